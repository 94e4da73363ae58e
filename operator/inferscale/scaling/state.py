"""`ScalerState` <-> the `status.scaler` object the operator stores on the InferenceService.

The dict is JSON-safe (times are float seconds, counts are ints) and round-trips exactly. An absent
optional value is written as None (JSON null), never omitted: status is written with a JSON merge
patch (RFC 7386), which keeps every key the patch leaves out, so an omitted value that became
unknown would survive in status and be read back as current; null is what deletes it.

Reading is tolerant: status is written by older versions, edited by hand, or pruned by the API
server, so an entry that does not parse is dropped and the rest is kept; reading never raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from inferscale.scaling.types import CapacityLow, LastTick, ScaleEvent, ScalerState, TimedReplicas

# The learned capacity is a divisor of the demand, so a stored 0, a subnormal or an absurd figure
# (a hand edit, an older version) would raise ZeroDivisionError or overflow in the decision. Such a
# value is read as absent: learning then starts over from the prior, which never shrinks the fleet.
# No replica serves fewer than one request in ~12 days (1e-6/s) or a billion per second (1e9/s);
# a figure outside that is garbage, not a measurement.
MIN_CAPACITY_RPS, MAX_CAPACITY_RPS = 1e-6, 1e9
# The factor on the prior is learned within capacity.PRIOR_SPAN (4x) of it; 1000x either way is
# far outside anything learned and still keeps prior x factor finite and non-zero.
MIN_CAPACITY_FACTOR, MAX_CAPACITY_FACTOR = 1e-3, 1e3
# No model load takes an hour: the operator measures no start above it (adapters.workload), and a
# stored one (a hand edit) would lead the forecast by days and make the backlog's drain time nothing.
MAX_TIME_TO_READY = 3600.0


def state_to_status(state: ScalerState) -> dict[str, Any]:
    low = state.capacity_low
    return {
        "recommendations": [{"at": r.at, "replicas": r.replicas} for r in state.recommendations if _time(r.at)],
        "scaleEvents": [
            {"at": e.at, "from": e.from_replicas, "to": e.to_replicas, "reason": e.reason}
            for e in state.scale_events
            if _time(e.at)
        ],
        "timeToReady": stored_time_to_ready(state.time_to_ready),
        "capacityRps": _capacity_rps(state.capacity_rps),
        "capacityFactor": _capacity_factor(state.capacity_factor),
        "lastTick": _last_tick_to_status(state.last_tick) if state.last_tick is not None else None,
        "capacityLow": (
            _capacity_low_to_status(low) if low is not None and _time(low.since) and _known(low.low) else None
        ),
    }


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
        time_to_ready=stored_time_to_ready(obj.get("timeToReady")),
        capacity_rps=_capacity_rps(obj.get("capacityRps")),
        capacity_factor=_capacity_factor(obj.get("capacityFactor")),
        last_tick=_last_tick_from_status(obj.get("lastTick")),
        capacity_low=_capacity_low_from_status(obj.get("capacityLow")),
    )


def _capacity_low_to_status(low: CapacityLow) -> dict[str, Any]:
    return {"since": low.since, "low": low.low, "before": _non_negative(low.before)}


def _capacity_low_from_status(value: object) -> CapacityLow | None:
    if not isinstance(value, Mapping) or not _time(value.get("since")):
        return None
    low = _capacity_rps(value.get("low"))  # within the bounds of capacityRps: a low of 5e-324 divides as 0
    if low is None:
        return None
    return CapacityLow(float(value["since"]), low, _capacity_rps(value.get("before")))


def _last_tick_to_status(last: LastTick) -> dict[str, Any]:
    return {
        "at": last.at,
        "ready": last.ready,
        "readySince": last.ready_since,
        "waiting": _non_negative(last.waiting),
        "backlogSince": last.backlog_since if _time(last.backlog_since) else None,
        "blindSince": last.blind_since if _time(last.blind_since) else None,
        "capacityAsk": last.capacity_ask if _count(last.capacity_ask) else None,
        "watchedSince": last.watched_since if _time(last.watched_since) else None,
    }


def _last_tick_from_status(value: object) -> LastTick | None:
    if not isinstance(value, Mapping):
        return None
    if not (_time(value.get("at")) and _count(value.get("ready")) and _time(value.get("readySince"))):
        return None
    backlog = value["backlogSince"] if _time(value.get("backlogSince")) else None
    blind = value["blindSince"] if _time(value.get("blindSince")) else None
    return LastTick(
        float(value["at"]),
        value["ready"],
        float(value["readySince"]),
        _non_negative(value.get("waiting")),
        float(backlog) if backlog is not None else None,
        float(blind) if blind is not None else None,
        value["capacityAsk"] if _count(value.get("capacityAsk")) else None,
        float(value["watchedSince"]) if _time(value.get("watchedSince")) else None,
    )


def _items(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list | tuple):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _number(value: object) -> bool:
    # The exact types first: the simulator reads its status back every tick, a few dozen entries at a time.
    kind = type(value)
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is int:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_time = _number


def _known(value: object) -> bool:
    return _non_negative(value) is not None


def _non_negative(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def stored_time_to_ready(value: object) -> float | None:
    """A start-up read back from status (seconds), or None when it is not one the operator could measure."""
    return _within(value, 0.0, MAX_TIME_TO_READY)


def _capacity_rps(value: object) -> float | None:
    return _within(value, MIN_CAPACITY_RPS, MAX_CAPACITY_RPS)


def _capacity_factor(value: object) -> float | None:
    return _within(value, MIN_CAPACITY_FACTOR, MAX_CAPACITY_FACTOR)


def _within(value: object, low: float, high: float) -> float | None:
    number = _non_negative(value)
    return number if number is not None and low <= number <= high else None


def _count(value: object) -> bool:
    if type(value) is int:
        return value >= 0
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
