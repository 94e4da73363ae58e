"""Status conditions and the explanation written to status: pure functions of one tick's outcome."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferscale.adapters.workload import TargetState, on_their_way, parse_time, rfc3339, stuck_bound
from inferscale.api.status import HISTORY_LIMIT  # the CRD's maxItems: a longer list fails the whole patch
from inferscale.perf import PrefillStep, advice
from inferscale.scaling.durations import format_duration
from inferscale.scaling.inputs import clean_observation
from inferscale.scaling.types import Decision, MetricsState, Observation, ScaleEvent

STATUS_REFRESH = 30.0  # seconds: the latest figures are written at least this often, and decision.at shows liveness


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


def merge_conditions(
    previous: Iterable[Mapping[str, Any]] | None, new: Sequence[Condition], now: float, generation: int | None
) -> list[dict[str, Any]]:
    """Keeps lastTransitionTime when a condition's status did not change."""
    old = {c.get("type"): c for c in previous or [] if isinstance(c, Mapping)}
    out = []
    for c in new:
        prev = old.get(c.type)
        changed = prev is None or prev.get("status") != c.status
        out.append(
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": rfc3339(now) if changed else prev.get("lastTransitionTime", rfc3339(now)),  # type: ignore[union-attr]
                "observedGeneration": generation,
            }
        )
    return out


def condition_changed(previous: Iterable[Mapping[str, Any]] | None, c: Condition) -> bool:
    for p in previous or []:
        if isinstance(p, Mapping) and p.get("type") == c.type:
            return p.get("status") != c.status or p.get("reason") != c.reason
    return True


def condition_reworded(previous: Iterable[Mapping[str, Any]] | None, c: Condition) -> bool:
    """The same status and reason, told with another message."""
    for p in previous or []:
        if isinstance(p, Mapping) and p.get("type") == c.type:
            return p.get("status") == c.status and p.get("reason") == c.reason and p.get("message") != c.message
    return False


# A tick's figures and decision, which a state that decides nothing removes from status (null in a merge patch).
# `replicas` stays: a managed Deployment deleted meanwhile comes back at that count (`recreate_count`).
LAST_DECISION = ("desiredReplicas", "observed", "recommendations", "forecast", "decision")


def metrics_condition(obs: Observation, why: str) -> Condition:
    if obs.state is MetricsState.COMPLETE and obs.failed_queries:
        # every Ready pod reports, but a query failed or a store did not answer: no scale-down on it
        return Condition(
            "MetricsAvailable", "True", "MetricsPartial", why + "; no scale-down until every query answers"
        )
    if obs.state is MetricsState.COMPLETE:
        return Condition("MetricsAvailable", "True", "MetricsComplete", why)
    if obs.state is MetricsState.PARTIAL:
        return Condition("MetricsAvailable", "True", "MetricsPartial", why + "; missing pods count conservatively")
    reason = "MetricsStale" if obs.state is MetricsState.STALE else "MetricsMissing"
    return Condition("MetricsAvailable", "False", reason, why + "; holding the current replica count")


def slo_condition(
    decision: Decision | None, obs: Observation | None, slo_ttft: float, slo_itl: float, slo_tpot: float | None = None
) -> Condition:
    if decision is None or decision.slo_met is None or obs is None:
        return Condition("SLOMet", "Unknown", "NoLatencyData", "no requests finished in the latency window")
    parts = []
    if obs.ttft_p95 is not None:
        parts.append(f"TTFT P95 {format_duration(obs.ttft_p95)} (SLO {format_duration(slo_ttft)})")
    if obs.itl_mean is not None:
        parts.append(f"ITL mean {format_duration(obs.itl_mean)} (SLO {format_duration(slo_itl)})")
    if slo_tpot is not None:
        parts.append(
            f"TPOT P95 {format_duration(obs.tpot_p95)} (SLO {format_duration(slo_tpot)})"
            if obs.tpot_p95 is not None
            else "TPOT P95 unknown: no vllm:request_time_per_output_token_seconds samples in the window"
        )
    return Condition(
        "SLOMet",
        "True" if decision.slo_met else "False",
        "WithinSLO" if decision.slo_met else "SLOViolated",
        ", ".join(parts) or "latency within objectives",
    )


def prefill_condition(
    step: PrefillStep | None, slo_itl: float | None, lengths_known: bool = True, engine: str = "vllm"
) -> Condition:
    """Whether one engine step that carries a prompt's prefill chunk fits the ITL SLO: when it does not, short
    answers that share such steps miss their own ITL at any replica count, and only the engine's limits
    fix that (see `perf.chunking`). `lengths_known` False: no traffic told the lengths this tick."""
    kind = "PrefillStepWithinITL"
    if not lengths_known:
        return Condition(kind, "Unknown", "NoLengths", "no request finished to tell the lengths")
    if step is None or step.within_slo is None or slo_itl is None:
        return Condition(kind, "Unknown", "NotAssessed", "needs spec.model.profile and an ITL SLO")
    if step.within_slo:
        return Condition(
            kind,
            "True",
            "WithinITL",
            f"a step carrying one mean prompt's prefill chunk ({step.chunk_tokens:,} tokens) takes "
            f"{format_duration(step.step_s)}, within the ITL SLO {format_duration(slo_itl)}",
        )
    text = advice(step, slo_itl, engine)
    if step.fitting is not None:
        text += " (set spec.model.maxNumBatchedTokens and maxNumSeqs to match)"
    return Condition(kind, "False", "PrefillStepOverITL", text)


def held(previous: Iterable[Mapping[str, Any]] | None, c: Condition) -> Condition:
    """`c`, or the previous assessment of its type while `c` only says this tick could not assess (an idle
    spell): a warning is news when the engine or its traffic changed, not after every quiet night."""
    if c.reason != "NoLengths":
        return c
    for p in previous or []:
        if isinstance(p, Mapping) and p.get("type") == c.type and p.get("status") in ("True", "False"):
            return Condition(c.type, str(p["status"]), str(p.get("reason", "")), str(p.get("message", "")))
    return c


def status_number(v: float | None) -> float | None:
    """A figure as status carries it: 4 decimals, and none where it is not finite (JSON has no Infinity: the API
    server would refuse the whole write, every tick)."""
    return round(v, 4) if v is not None and math.isfinite(v) else None


def observed(obs: Observation, state_text: str) -> dict[str, Any]:
    obs = clean_observation(obs)  # the figures the decision read: an absurd one is none, as there
    kv = obs.kv_cache_utilization

    num = status_number
    return {
        "at": rfc3339(obs.at),
        "metrics": obs.state.value,
        "podsReporting": obs.pods_reporting,
        "ttftP95": format_duration(obs.ttft_p95) if obs.ttft_p95 is not None else None,
        "itlMean": format_duration(obs.itl_mean) if obs.itl_mean is not None else None,
        "tpotP95": format_duration(obs.tpot_p95) if obs.tpot_p95 is not None else None,
        "kvCacheUtilization": num(kv),
        "kvCachePercent": round(kv * 100) if kv is not None else None,
        "waiting": num(obs.waiting),
        "running": num(obs.running),
        "requestRate": num(obs.request_rate),
        "promptTokenRate": num(obs.prompt_token_rate),
        "cachedPromptTokenRate": num(obs.cached_prompt_token_rate),
        "generationTokenRate": num(obs.generation_token_rate),
    }


def decision_status(decision: Decision, now: float) -> dict[str, Any]:
    return {
        "at": rfc3339(now),
        "replicas": decision.replicas,
        "reason": decision.reason.value,
        "message": decision.message,
        "limits": [r.value for r in decision.limits],
    }


def recommendations(decision: Decision) -> list[dict[str, Any]]:
    return [
        {
            "signal": r.signal.value,
            "replicas": r.replicas,
            "value": status_number(r.value),
            "target": status_number(r.target),
            "message": r.message,
        }
        for r in decision.recommendations
    ]


def append_history(
    history: Iterable[Mapping[str, Any]] | None, now: float, from_: int, to: int, reason: str, message: str
) -> list[dict[str, Any]]:
    items = [dict(h) for h in history or [] if isinstance(h, Mapping)]
    items.append({"at": rfc3339(now), "from": from_, "to": to, "reason": reason, "message": message})
    return items[-HISTORY_LIMIT:]


def untold_scale(events: Iterable[ScaleEvent], status: Mapping[str, Any], replicas: int) -> ScaleEvent | None:
    """A scale recorded ahead (status.scaler) that the target shows made, but that no status after it tells:
    the process that made it stopped between the scale and its account (a kill, a rollout of the operator,
    a lost Lease), and its successor tells it. Only the newest event can be one, and only while the target is
    still at its count: a scale never made (stopped between the record and the scale) is not told."""
    newest = max(events, key=lambda e: e.at, default=None)
    if newest is None or newest.to_replicas != replicas:
        return None
    told = parse_time(status.get("lastScaleTime"))
    return newest if told is None or told < math.floor(newest.at) else None


def _kept(value: Any) -> Any:
    """A value as the API server keeps it after a merge patch: null members removed."""
    if isinstance(value, Mapping):
        return {k: _kept(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_kept(v) for v in value]
    return value


def _pick(value: Any, keys: tuple[str, ...]) -> Any:
    return {k: value.get(k) for k in keys} if isinstance(value, Mapping) else value


_NEWS: dict[str, Callable[[Any], Any]] = {
    # What is news in each block: counts, reasons and states; the figures behind them are refreshed.
    "observed": lambda v: _pick(v, ("metrics", "podsReporting")),
    "decision": lambda v: _pick(v, ("replicas", "reason", "limits")),
    "forecast": lambda v: _pick(v, ("horizon",)),
    "recommendations": lambda v: [_pick(r, ("signal", "replicas")) for r in v] if isinstance(v, list) else v,
    "conditions": lambda v: [_pick(c, ("type", "status", "reason")) for c in v] if isinstance(v, list) else v,
    # The previous tick's time and queue are figures: a later tick reading an older lastTick measures the
    # queue's growth over a longer span, which is still its growth. Its capacity ask is news: the next tick
    # confirms or drops a capacity scale-up on it (`capacity.confirm`), and is None on a steady service.
    "scaler": lambda v: (
        {**v, "lastTick": _pick(v.get("lastTick"), ("ready", "readySince", "backlogSince", "capacityAsk"))}
        if isinstance(v, Mapping)
        else v
    ),
}


def has_news(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a status says something new: a count, a reason, a condition, the scaler's record.
    Only these are written in the tick; the figures behind them (latency, KV, rates, messages) are
    refreshed every STATUS_REFRESH seconds, paced between ticks (see refresher.py).

    Only the members the new status names count. `status.scaler` keeps unknown fields (the CRD preserves
    them), so a member this version never writes (left by another version, a rollback, a hand edit) stays
    there, as a merge patch removes only what it sets to null: compared, it would make every tick's status
    news, and every service with it would be written every tick, for good."""

    def news(key: str, value: Any, named: Any = None) -> Any:
        value = _kept(value)
        if isinstance(named, Mapping) and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if k in named}
        return _NEWS[key](value) if key in _NEWS and value is not None else value

    return any(news(k, v) != news(k, old.get(k), v) for k, v in new.items())


def refresh_due(old: Mapping[str, Any], new: Mapping[str, Any], now: float) -> bool:
    """Whether the figures in status are older than STATUS_REFRESH (decision.at dates them). A status without
    a decision (a problem's, which removes it) has no figures to refresh."""
    if new.get("decision") is None:
        return False
    written = parse_time((old.get("decision") or {}).get("at"))
    return written is None or not 0 <= now - written < STATUS_REFRESH


def target_changed(status: Mapping[str, Any], target: str, uid: str | None) -> str | None:
    """Why the decision state in status belongs to another Deployment than the one scaled now, or None.
    After scaleTargetRef moves (a blue/green cut-over) or the Deployment is recreated under its name (a
    Helm reinstall), the old one's recommendations would let the first tick scale the new one down at
    once; a fresh state holds its count through the scale-down window. A status without the fields
    (written before they existed) is taken as this Deployment's."""
    kept_name, kept_uid = status.get("targetName"), status.get("targetUID")
    if isinstance(kept_name, str) and kept_name != target:
        return f"scaleTargetRef moved from Deployment {kept_name} to {target}"
    if isinstance(kept_uid, str) and uid is not None and kept_uid != uid:
        return f"Deployment {target} was recreated"
    return None


def recreate_count(status: Mapping[str, Any], low: int, high: int) -> int:
    """Replicas to create a managed Deployment with: the count it last had when it is recreated (deleted by
    hand or by a GitOps prune, it should come back serving its traffic, not at the minimum for a
    time-to-ready), within the bounds; the minimum the first time."""
    last = status.get("replicas")
    if isinstance(last, bool) or not isinstance(last, int) or last < 0:
        return low
    return min(max(last, low), high)


def first_few(names: Sequence[str], shown: int = 3) -> str:
    """The first names of a list a message quotes, and how many more there are."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


# conditions whose True is the problem, announced with a Warning Event when they turn True
TRUE_IS_BAD = ("CapacityBlocked", "PodsRestarting", "PodsStuck")


def stuck_condition(ts: TargetState, target: str, lead: float) -> Condition:
    """Pods placed for far longer than the time-to-ready without becoming Ready (an image that does not pull, a
    readiness probe that never passes) are no longer counted as replicas on their way: the user must hear why
    the operator adds replicas beside them, and that they hold GPUs for nothing."""
    _, stuck = on_their_way(ts, lead)
    if not stuck:
        return Condition("PodsStuck", "False", "NoneStuck", "no pod of the target is stuck on its way to Ready")
    return Condition(
        "PodsStuck",
        "True",
        "NotReadyLongAfterPlacement",
        f"{len(stuck)} pod(s) of Deployment {target} ({first_few(stuck)}) have been on a node for more than "
        f"{format_duration(stuck_bound(lead))} (the time-to-ready of {format_duration(lead)}, twice over or 5m past "
        "it) without becoming Ready, and no longer count as replicas on their way: an image that does not pull, a "
        "readiness probe that never passes? They hold their GPUs: fix or delete them",
    )


def restarting_condition(restarting: int, target: str) -> Condition:
    """Pods not Ready after a restart count as replicas on their way (HPA's rule: adding replicas for a
    crash loop would only add crash-looping pods, each holding its GPUs); the user must hear that the
    decisions' "replicas not Ready yet cover it" rests on pods that may never be Ready."""
    if not restarting:
        return Condition("PodsRestarting", "False", "NoRestarts", "no pod of the target is restarting")
    return Condition(
        "PodsRestarting",
        "True",
        "NotReadyAfterRestart",
        f"{restarting} pod(s) of Deployment {target} are not Ready after a container restart (crash-looping?); "
        "they still count as replicas on their way, so no replicas are added for them: fix or delete them",
    )
