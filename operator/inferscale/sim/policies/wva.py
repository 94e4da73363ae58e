"""llm-d Workload Variant Autoscaler, V1 saturation analyser, one variant.

Sources: reference/peer-autoscalers.md §2.2-§2.4 (llm-d-workload-variant-autoscaler
`docs/saturation-analyzer.md`, `saturation-scaling-config.md`, `internal/saturation/constants.go`).
Defaults: kvCacheThreshold 0.80, queueLengthThreshold 5, kvSpareTrigger 0.10, queueSpareTrigger 3,
MinNonSaturatedReplicasForScaleDown 2, GLOBAL_OPT_INTERVAL 60 s.
- Signals are `max_over_time[1m]` peaks of KV usage and waiting requests per ready replica. KV: the
  observation's `kv_cache_utilization_max`, the largest of the pods' 1-minute peaks, taken for every
  ready pod (the least-outstanding-requests router keeps them balanced; where they are not, this
  sees at least the saturation WVA sees). Waiting: the observation carries the fleet's sum only, so
  the peak over the minute of waiting / ready, sampled every 15 s (a Prometheus scrape).
- A replica is saturated when KV >= 0.80 or queue >= 5. Scale up by +1 when no replica is
  non-saturated or the non-saturated ones' spare (0.80 - KV, 5 - queue) falls below 0.10 or 3.
- Scale down by -1 only with >= 2 non-saturated replicas and when their load moved onto one replica
  fewer still leaves spare >= the triggers.
- No decision in either direction while a pod is pending: the variant is in transition (its metrics
  cover fewer pods than its replicas), and scale-up skips a variant with pending pods (cascade
  prevention: start-up takes minutes).
- The decision is applied directly (WVA's direct actuator / an HPA without stabilization); the Helm
  chart's HPA windows of 240 s would slow it further.
- No metric: hold (MetricsMissing keeps the previous desired count).
"""

from __future__ import annotations

from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.window import Samples

KV_THRESHOLD = 0.80
QUEUE_THRESHOLD = 5.0
KV_SPARE_TRIGGER = 0.10
QUEUE_SPARE_TRIGGER = 3.0
MIN_NON_SATURATED_FOR_SCALE_DOWN = 2
OPT_INTERVAL = 60.0
SAMPLE_INTERVAL = 15.0
PEAK_WINDOW = 60.0


def saturation_step(kv: float, queue: float, ready: int) -> int:
    """+1, -1 or 0 for `ready` balanced replicas each at KV usage `kv` and `queue` waiting requests."""
    saturated = kv >= KV_THRESHOLD or queue >= QUEUE_THRESHOLD
    non_saturated = 0 if saturated else ready
    if non_saturated == 0:
        return 1
    if KV_THRESHOLD - kv < KV_SPARE_TRIGGER or QUEUE_THRESHOLD - queue < QUEUE_SPARE_TRIGGER:
        return 1
    if non_saturated >= MIN_NON_SATURATED_FOR_SCALE_DOWN:
        spread = non_saturated / (non_saturated - 1)
        if KV_THRESHOLD - kv * spread >= KV_SPARE_TRIGGER and QUEUE_THRESHOLD - queue * spread >= QUEUE_SPARE_TRIGGER:
            return -1
    return 0


class WVASaturation:
    name = "wva-saturation"

    def __init__(self, ctx: PolicyContext) -> None:
        self.interval = SAMPLE_INTERVAL
        self.clamp = ctx.clamp
        self._queue = Samples(keep=PEAK_WINDOW)
        self._next_run: float | None = None

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        current = obs.current_replicas
        ready = obs.ready_replicas
        if obs.waiting is not None and ready > 0:
            self._queue.add(now, obs.waiting / ready)
        if self._next_run is not None and now < self._next_run:
            return current
        self._next_run = now + OPT_INTERVAL
        kv = obs.kv_cache_utilization_max
        queue = self._queue.max(now, PEAK_WINDOW)
        if kv is None or queue is None or ready == 0 or obs.pending_replicas > 0:
            return current
        return self.clamp(current + saturation_step(kv, queue, ready))
