"""One service's Observation out of the fleet-wide snapshot: pure, so every degenerate Prometheus
answer (nothing, NaN, some pods missing, old samples) maps to a defined state in one place."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from inferscale.adapters.prometheus import SGLANG_GAUGES, VLLM, FleetSnapshot, PodSeries
from inferscale.scaling.histogram import histogram_quantile
from inferscale.scaling.types import (
    CACHED_PROMPT_TOKENS,
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    RATE_FAMILIES,
    REQUESTS,
    MetricsState,
    Observation,
)

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV = "vllm:kv_cache_usage_perc"
_DIALECT_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


@dataclass(frozen=True)
class Workload:
    """What the Kubernetes side knows about the target at this tick."""

    namespace: str
    current_replicas: int  # spec.replicas of the target
    ready_pods: frozenset[str]
    pending_replicas: int = 0
    capacity_blocked_replicas: int = 0


def _gauge_name(family: str, engine: str) -> str:
    """A gauge as the engine names it, for messages (series are kept under vLLM's names)."""
    if engine == VLLM:
        return family
    return next((theirs for theirs, ours in SGLANG_GAUGES.items() if ours == family), family)


def _sum(series: Iterable[PodSeries], family: str) -> float | None:
    values = [s.values[family] for s in series if family in s.values]
    return sum(values) if values else None


def _added(histograms: Iterable[dict[float, float]]) -> dict[float, float]:
    """Bucket rates added over pods, by upper bound."""
    out: dict[float, float] = {}
    for buckets in histograms:
        for le, v in buckets.items():
            out[le] = out.get(le, 0.0) + v
    return out


def _failed_query(snapshot: FleetSnapshot, name: str, consequence: str) -> str:
    why = f"the Prometheus query {name} failed, so {consequence}"
    errors = [e for e in snapshot.errors if e.startswith(f"{name}:")]
    return why + (f" ({errors[0]})" if errors else "")


def _named(snapshot: FleetSnapshot, workload: Workload, model_name: str | None) -> list[PodSeries]:
    """The Ready pods' series, of the service's model where it names one."""
    return [
        s
        for pod in workload.ready_pods
        for s in snapshot.by_pod.get((workload.namespace, pod), ())
        if not model_name or s.model_name == model_name
    ]


def _fresh(s: PodSeries, at: float, stale_after: float) -> bool:
    """Dated within `stale_after`. A pod without a sample time has gauges of unknown age: Prometheus's
    lookback can return minutes-old values, and a scale-down must not rest on them."""
    return "sample_time" in s.values and at - s.values["sample_time"] <= stale_after


def _reports(s: PodSeries, at: float, stale_after: float) -> bool:
    """Fresh, with both gauges a scale-down rests on. A pod with the KV cache but no queue (or the
    reverse) counted among the reporting pods would add nothing to the sum, as if it held 0 waiting."""
    return _fresh(s, at, stale_after) and KV in s.values and WAITING in s.values


def _partial_rates(fresh: list[PodSeries]) -> frozenset[str]:
    """Rate families some pods report while a busy pod does not. A pod that has served nothing may have no
    counter yet (SGLang creates its series on the first request), so only a pod holding requests counts."""
    busy = [s for s in fresh if s.values.get(RUNNING, 0.0) + s.values.get(WAITING, 0.0) > 0]
    return frozenset(
        f for f in RATE_FAMILIES if any(f in s.values for s in fresh) and any(f not in s.values for s in busy)
    )


def _cached(fresh: list[PodSeries]) -> float | None:
    """Prompt tokens/s served from the prefix cache, when every pod counting prompts says how many: a sum over
    some of them would take the others' prompts for cached. Unknown leaves the prompts whole (the larger
    capacity demand)."""
    counting = [s for s in fresh if PROMPT_TOKENS in s.values]
    if not counting or any(CACHED_PROMPT_TOKENS not in s.values for s in counting):
        return None
    return sum(s.values[CACHED_PROMPT_TOKENS] for s in counting)


def pod_loads(
    snapshot: FleetSnapshot, workload: Workload, model_name: str | None, stale_after: float, engine: str = VLLM
) -> dict[str, float]:
    """Requests each Ready pod holds (running and waiting), for the pods whose fresh gauges say so. A pod
    left out is one whose load is unknown, which is not the same as idle."""
    if "sample_time" in snapshot.failed or "gauges" in snapshot.failed:  # also when Prometheus is down
        return {}
    loads: dict[str, float] = {}
    for s in _named(snapshot, workload, model_name):
        if engine in s.dialects and _fresh(s, snapshot.at, stale_after) and RUNNING in s.values and WAITING in s.values:
            loads[s.pod] = loads.get(s.pod, 0.0) + s.values[RUNNING] + s.values[WAITING]
    return loads


def observe(
    snapshot: FleetSnapshot, workload: Workload, model_name: str | None, stale_after: float, engine: str = VLLM
) -> tuple[Observation, str]:
    """Returns the Observation and a one-line explanation of its metrics state. Only series in the
    `engine`'s metric dialect count: a pod answering in the other one is named in the explanation."""
    obs, why = _observe(snapshot, workload, model_name, stale_after, engine)
    if snapshot.partial and obs.state not in (MetricsState.COMPLETE, MetricsState.PARTIAL):
        # the pods' series may be on the stores that did not answer: the pods are not to blame alone
        why += f"; answered in part: {'; '.join(snapshot.warnings[:2])}"
    return obs, why


def _observe(
    snapshot: FleetSnapshot, workload: Workload, model_name: str | None, stale_after: float, engine: str
) -> tuple[Observation, str]:
    base = Observation(
        at=snapshot.at,
        current_replicas=workload.current_replicas,
        ready_replicas=len(workload.ready_pods),
        pending_replicas=workload.pending_replicas,
        capacity_blocked_replicas=workload.capacity_blocked_replicas,
    )
    if snapshot.unavailable:
        why = "Prometheus did not answer: " + ("; ".join(snapshot.errors[:2]) or "no data")
        return replace(base, state=MetricsState.MISSING), why
    if not workload.ready_pods:
        return replace(base, state=MetricsState.MISSING), "no Ready pods of the target report metrics yet"

    named = _named(snapshot, workload, model_name)
    mine = [s for s in named if engine in s.dialects]
    sample_times = [s.values["sample_time"] for s in mine if "sample_time" in s.values]
    newest = max(sample_times) if sample_times else None
    fresh = [s for s in mine if _reports(s, snapshot.at, stale_after)]
    ready = len(workload.ready_pods)
    if not mine:
        hint = f" with model_name={model_name!r}" if model_name else ""
        dialect = _DIALECT_NAMES.get(engine, engine)
        why = f"no {dialect} metrics for the {ready} Ready pod(s) in {workload.namespace}{hint}"
        others = sorted({d for s in named for d in s.dialects} - {engine})
        if others:
            why += f"; they export {' and '.join(_DIALECT_NAMES.get(d, d) for d in others)} metrics: set spec.engine"
        return replace(base, state=MetricsState.MISSING), why
    if "sample_time" in snapshot.failed:
        # The gauges' age is known only from sample_time: without it, the gauges Prometheus still
        # returns from its lookback could be minutes old, and deciding on them as fresh could scale down.
        return replace(base, state=MetricsState.STALE), _failed_query(
            snapshot, "sample_time", "the age of the gauges is unknown"
        )
    if not fresh:
        if "gauges" in snapshot.failed:
            why = _failed_query(snapshot, "gauges", "KV cache and queue are unknown")
            return replace(base, state=MetricsState.STALE, newest_sample_at=newest), why
        timely = [s for s in mine if _fresh(s, snapshot.at, stale_after)]
        if timely:
            lacking = sorted({_gauge_name(g, engine) for s in timely for g in (KV, WAITING) if g not in s.values})
            why = f"{len(timely)} Ready pod(s) report fresh samples without {' or '.join(lacking)}"
            return replace(base, state=MetricsState.MISSING, newest_sample_at=newest), why
        if newest is None:
            why = f"no Ready pod reports {_gauge_name(RUNNING, engine)}, whose timestamp dates the gauges"
            return replace(base, state=MetricsState.STALE), why
        age = snapshot.at - newest
        return (
            replace(base, state=MetricsState.STALE, newest_sample_at=newest),
            f"the newest engine sample is {age:.0f}s old (staleAfter {stale_after:.0f}s)",
        )

    itl_sum, itl_count = _sum(fresh, "itl_sum"), _sum(fresh, "itl_count")
    kvs = [s.values[KV] for s in fresh if KV in s.values]
    peaks = [s.values["kv_peak"] for s in fresh if "kv_peak" in s.values]
    state = MetricsState.COMPLETE if len(fresh) >= ready else MetricsState.PARTIAL
    partial = _partial_rates(fresh)
    obs = replace(
        base,
        state=state,
        pods_reporting=len(fresh),
        kv_cache_utilization=sum(kvs) / len(kvs) if kvs else None,
        # a pod whose peak series is missing still has its instant KV, which the peak cannot be under
        kv_cache_utilization_max=max(peaks + kvs) if peaks or kvs else None,
        waiting=_sum(fresh, WAITING),
        running=_sum(fresh, RUNNING),
        ttft_p95=histogram_quantile(0.95, _added(s.ttft_buckets for s in fresh)),
        itl_mean=itl_sum / itl_count if itl_sum is not None and itl_count else None,
        tpot_p95=histogram_quantile(0.95, _added(s.tpot_buckets for s in fresh)),
        request_rate=_sum(fresh, REQUESTS),
        prompt_token_rate=_sum(fresh, PROMPT_TOKENS),
        cached_prompt_token_rate=_cached(fresh),
        generation_token_rate=_sum(fresh, GENERATION_TOKENS),
        newest_sample_at=newest,
        failed_queries=snapshot.failed | snapshot.partial,
        partial_rates=partial,
    )
    why = f"{len(fresh)} of {ready} Ready pods report"
    if snapshot.failed:
        why += f"; unknown this tick: {', '.join(sorted(snapshot.failed))}"
    if snapshot.partial:
        why += f"; answered in part: {'; '.join(snapshot.warnings[:2])}"
    if partial:
        why += f"; busy pods without {', '.join(sorted(partial))}, summed over the others only"
    return obs, why
