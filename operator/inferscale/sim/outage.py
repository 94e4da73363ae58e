"""A metrics outage in a replay: what each policy sees while Prometheus, or its view of vLLM, is gone.

Two kinds, because the peers fail differently in each (`reference/peer-autoscalers.md`):

- ``prometheus-down``: the server does not answer. Every query errors. The operator's adapter then builds an
  Observation that holds only what the API server says (replicas, Ready and pending pods) with its metrics
  state MISSING (`adapters/observation.observe`), and its rate-history range query fails: it forecasts from the
  history it holds, which stops at the outage's start (nothing once that is `forecast.HISTORY_STALE` old).
- ``vllm-unscraped``: Prometheus answers, but the vLLM pods' series stop (a ServiceMonitor deleted, the metrics
  port renamed). Queries on them return empty results, not errors. The operator reads them as no fresh
  sample (MISSING); KEDA's Prometheus trigger, with `ignoreNullValues` at its default true, reads an empty
  result as the value 0 (§8 item 2 and the KEDA section).

What each policy does is its own code's, given what it would see: `BLIND` policies decide on the Observation
the outage leaves them; `HOLD` policies are controllers whose metric fetch errors, so they skip the round and
keep the replica count (HPA when its metrics API fails, KEDA's HPA without a `fallback`, WVA's MetricsStale,
Dynamo's skipped adjustment); `UNAFFECTED` policies read a source the outage does not touch (Knative's
queue-proxy and AIBrix's direct pod scrape do not go through Prometheus; HPA's GPU utilisation comes from the
DCGM exporter, scraped apart from vLLM; Dynamo's planner reads its frontend's counters; the bounds know the
trace). After the outage Prometheus holds no samples for it: the rate history keeps a gap, and the windows of
the first minutes after it (1-m rates, 2-m latency histograms) span only what was scraped since (`keeps`), as
PromQL's rate and increase over a range with a hole in it do.

inferscale with `spec.metrics.podPort` (`simulate --read-pods`) `PODS`: it reads the pods' /metrics itself
through either kind (`adapters.pod_metrics`): the engines' own figures, its first read of the outage the gauges
alone, and Prometheus named failed so that no scale-down rests on them. The request rates it reads go on its
rate history, a point a minute (`collector.add_pod_rate`), so the forecast leads through the outage too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from inferscale.scaling.types import PROMETHEUS, MetricsState, Observation, RateSample

PROMETHEUS_DOWN = "prometheus-down"
VLLM_UNSCRAPED = "vllm-unscraped"
KINDS = (PROMETHEUS_DOWN, VLLM_UNSCRAPED)

_Decide = Callable[[Observation, float, Sequence[RateSample]], int]


class Behaviour(Enum):
    BLIND = "decides on what the outage leaves"
    HOLD = "skips its decisions"
    UNAFFECTED = "unaffected"
    PODS = "reads the pods"


_B, _H, _U = Behaviour.BLIND, Behaviour.HOLD, Behaviour.UNAFFECTED
BEHAVIOUR: dict[str, dict[str, Behaviour]] = {
    "inferscale": {PROMETHEUS_DOWN: _B, VLLM_UNSCRAPED: _B},
    "oracle": {PROMETHEUS_DOWN: _U, VLLM_UNSCRAPED: _U},
    "reactive-oracle": {PROMETHEUS_DOWN: _U, VLLM_UNSCRAPED: _U},
    "static-peak": {PROMETHEUS_DOWN: _U, VLLM_UNSCRAPED: _U},
    "hpa-gpu-util": {PROMETHEUS_DOWN: _H, VLLM_UNSCRAPED: _U},
    "keda-queue": {PROMETHEUS_DOWN: _H, VLLM_UNSCRAPED: _B},
    "knative-kpa": {PROMETHEUS_DOWN: _U, VLLM_UNSCRAPED: _U},
    "aibrix-apa": {PROMETHEUS_DOWN: _U, VLLM_UNSCRAPED: _U},
    "wva-saturation": {PROMETHEUS_DOWN: _H, VLLM_UNSCRAPED: _H},
    "dynamo-sla": {PROMETHEUS_DOWN: _H, VLLM_UNSCRAPED: _U},
}


@dataclass(frozen=True)
class Outage:
    kind: str
    start: float  # seconds on the replay's axis
    end: float

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown outage kind {self.kind!r}; known: {', '.join(KINDS)}")
        if not 0 <= self.start < self.end:
            raise ValueError(f"an outage needs 0 <= start < end, got {self.start!r} to {self.end!r}")

    def covers(self, at: float) -> bool:
        return self.start <= at < self.end

    def describe(self) -> dict[str, object]:
        return {"kind": self.kind, "start_s": self.start, "end_s": self.end}


class OutageView:
    """One replay's policy seen through an outage: `decide` calls the policy, or not, with what it would see.
    The replay keeps no scrape the outage takes away (`keeps`), so its rate history already has the gap."""

    def __init__(self, outage: Outage | None, policy_name: str, reads_pods: bool = False) -> None:
        self.outage = outage
        known = BEHAVIOUR.get(policy_name)
        if outage is not None and known is None:
            raise ValueError(f"no outage behaviour is known for policy {policy_name!r}")
        self.behaviour = known[outage.kind] if outage is not None and known is not None else _U
        if reads_pods and self.behaviour is _B:
            self.behaviour = Behaviour.PODS
        self._pods_read = False  # whether the pods were read before in the outage (the first read has no rate)

    def keeps(self, at: float) -> bool:
        """Whether the windows and the rate history this policy reads hold the scrape at `at`: not inside an
        outage that reaches them (a policy reading another source keeps its own samples; inferscale reading the
        pods keeps its own reads, which end when Prometheus answers again: its first minute back reads them as
        Prometheus's)."""
        outage = self.outage
        return outage is None or self.behaviour in (_U, Behaviour.PODS) or not outage.covers(at)

    def replicas(self, decide: _Decide, obs: Observation, now: float, history: Sequence[RateSample]) -> int | None:
        """The count the policy asks for at `now`, or None when it skips the round (the count stays)."""
        outage = self.outage
        if outage is None or self.behaviour is _U or not outage.covers(now):
            return decide(obs, now, history)
        if self.behaviour is _H:
            return None
        if self.behaviour is Behaviour.PODS:
            first, self._pods_read = not self._pods_read, True
            return decide(pods_read(obs, first), now, history)
        return decide(blind(obs), now, history)


def pods_read(obs: Observation, first: bool) -> Observation:
    """What the operator's own reads of the pods' /metrics give (`adapters.pod_metrics`, spec.metrics.podPort):
    the engines' figures, Prometheus named failed so that no scale-down rests on them; the first read of the
    outage has the gauges only, its counters' rates need a second read."""
    failed = obs.failed_queries | {PROMETHEUS}
    if not first:
        return replace(obs, failed_queries=failed)
    return replace(
        blind(obs),
        state=obs.state,
        pods_reporting=obs.pods_reporting,
        kv_cache_utilization=obs.kv_cache_utilization,
        kv_cache_utilization_max=obs.kv_cache_utilization,
        waiting=obs.waiting,
        running=obs.running,
        newest_sample_at=obs.newest_sample_at,
        failed_queries=failed,
    )


def blind(obs: Observation) -> Observation:
    """What the operator's adapter builds with no metric: the API server's counts, metrics MISSING."""
    return Observation(
        at=obs.at,
        current_replicas=obs.current_replicas,
        ready_replicas=obs.ready_replicas,
        pending_replicas=obs.pending_replicas,
        capacity_blocked_replicas=obs.capacity_blocked_replicas,
        state=MetricsState.MISSING,
    )
