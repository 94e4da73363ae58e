"""`ScalerState` <-> the `status.scaler` object the operator stores on the InferenceService.

The dict is JSON-safe (times are float seconds, counts are ints, absent values are omitted) and
round-trips exactly. Reading is tolerant: status is written by older versions, edited by hand,
or pruned by the API server, so an entry that does not parse is dropped and the rest is kept;
reading never raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from inferscale.scaling.types import CapacityLow, LastTick, ScaleEvent, ScalerState, TimedReplicas


def state_to_status(state: ScalerState) -> dict[str, Any]:
    out: dict[str, Any] = {
        "recommendations": [{"at": r.at, "replicas": r.replicas} for r in state.recommendations if _time(r.at)],
        "scaleEvents": [
            {"at": e.at, "from": e.from_replicas, "to": e.to_replicas, "reason": e.reason}
            for e in state.scale_events
            if _time(e.at)
        ],
    }
    if _known(state.time_to_ready):
        out["timeToReady"] = state.time_to_ready
    if _known(state.capacity_rps):
        out["capacityRps"] = state.capacity_rps
    if _known(state.capacity_factor):
        out["capacityFactor"] = state.capacity_factor
    if state.last_tick is not None:
        out["lastTick"] = _last_tick_to_status(state.last_tick)
    if state.capacity_low is not None and _time(state.capacity_low.since) and _known(state.capacity_low.low):
        out["capacityLow"] = _capacity_low_to_status(state.capacity_low)
    return out


def state_from_status(obj: Mapping[str, Any] | None) -> ScalerState:
    if not isinstance(obj, Mapping):
        return ScalerState()
    recs = [
        TimedReplicas(float(item["at"]), item["replicas"])
        for item in _items(obj.get("recommendations"))
        if _time(item.get("at")) and _count(item.get("replicas"))
    ]
    events = [
        ScaleEvent(float(item["at"]), item["from"], item["to"], item["reason"])
        for item in _items(obj.get("scaleEvents"))
        if _time(item.get("at"))
        and _count(item.get("from"))
        and _count(item.get("to"))
        and isinstance(item.get("reason"), str)
    ]
    return ScalerState(
        recommendations=tuple(sorted(recs, key=lambda r: r.at)),
        scale_events=tuple(sorted(events, key=lambda e: e.at)),
        time_to_ready=_non_negative(obj.get("timeToReady")),
        capacity_rps=_non_negative(obj.get("capacityRps")),
        capacity_factor=_non_negative(obj.get("capacityFactor")),
        last_tick=_last_tick_from_status(obj.get("lastTick")),
        capacity_low=_capacity_low_from_status(obj.get("capacityLow")),
    )


def _capacity_low_to_status(low: CapacityLow) -> dict[str, Any]:
    out: dict[str, Any] = {"since": low.since, "low": low.low}
    if _known(low.before):
        out["before"] = low.before
    return out


def _capacity_low_from_status(value: object) -> CapacityLow | None:
    if not isinstance(value, Mapping) or not _time(value.get("since")):
        return None
    low = _non_negative(value.get("low"))
    if low is None:
        return None
    return CapacityLow(float(value["since"]), low, _non_negative(value.get("before")))


def _last_tick_to_status(last: LastTick) -> dict[str, Any]:
    out: dict[str, Any] = {"at": last.at, "ready": last.ready, "readySince": last.ready_since}
    if _known(last.waiting):
        out["waiting"] = last.waiting
    if _time(last.backlog_since):
        out["backlogSince"] = last.backlog_since
    return out


def _last_tick_from_status(value: object) -> LastTick | None:
    if not isinstance(value, Mapping):
        return None
    if not (_time(value.get("at")) and _count(value.get("ready")) and _time(value.get("readySince"))):
        return None
    backlog = value["backlogSince"] if _time(value.get("backlogSince")) else None
    return LastTick(
        float(value["at"]),
        value["ready"],
        float(value["readySince"]),
        _non_negative(value.get("waiting")),
        float(backlog) if backlog is not None else None,
    )


def _items(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _time(value: object) -> bool:
    return _number(value)


def _known(value: object) -> bool:
    return _non_negative(value) is not None


def _non_negative(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
