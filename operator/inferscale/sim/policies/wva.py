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
- Scale-up skips a variant with pending pods (cascade prevention: start-up takes minutes); a scale-down
  does not.
- "Preserve desired": a run that asks for no change keeps the previous desired count while the
  replicas have not reached it. No metric: the same (MetricsMissing keeps the previous desired count).
- WVA does not scale 1 <-> N itself (its direct actuator only takes a variant from 0 to 1): it exports
  `wva_desired_replicas`, and an HPA on it as an External metric with AverageValue 1 scales, with the
  Helm chart's 240 s stabilization windows up and down (reference §2.4) and the HPA's 0.1 tolerance.
  So above 10 replicas WVA's +1 or -1 is inside the tolerance and the HPA never moves: the fleet stays
  where it was, whatever the saturation analyser says. That is the documented set-up's behaviour, kept
  on purpose, as KEDA's reading of no data as zero is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.hpa_behavior import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SYNC_PERIOD,
    HPABehavior,
    external_average_value_replicas,
)
from inferscale.sim.policies.window import Samples

KV_THRESHOLD = 0.80
QUEUE_THRESHOLD = 5.0
KV_SPARE_TRIGGER = 0.10
QUEUE_SPARE_TRIGGER = 3.0
MIN_NON_SATURATED_FOR_SCALE_DOWN = 2
OPT_INTERVAL = 60.0
SAMPLE_INTERVAL = SYNC_PERIOD  # one tick is one scrape of the queue and one sync of the HPA
PEAK_WINDOW = 60.0
HELM_HPA_WINDOW = 240.0  # the WVA Helm chart's HPA stabilization window, up and down
HELM_SCALE_UP = replace(DEFAULT_SCALE_UP, stabilization_window=HELM_HPA_WINDOW)
HELM_SCALE_DOWN = replace(DEFAULT_SCALE_DOWN, stabilization_window=HELM_HPA_WINDOW)


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

    def __init__(self, ctx: PolicyContext, hpa: bool = True) -> None:
        """`hpa` False: WVA's count applied as it is decided, as if it scaled the Deployment itself."""
        self.interval = SAMPLE_INTERVAL
        self.clamp = ctx.clamp
        self._queue = Samples(keep=PEAK_WINDOW)
        self._next_run: float | None = None
        self._desired: int | None = None  # wva_desired_replicas
        self._hpa = (
            HPABehavior(max(ctx.min_replicas, 1), ctx.max_replicas, HELM_SCALE_UP, HELM_SCALE_DOWN) if hpa else None
        )

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        current = obs.current_replicas
        if obs.waiting is not None and obs.ready_replicas > 0:
            self._queue.add(now, obs.waiting / obs.ready_replicas)
        if self._next_run is None or now >= self._next_run:
            self._next_run = now + OPT_INTERVAL
            self._analyse(obs, now)
        if self._desired is None:
            return current
        if self._hpa is None:
            return self._desired
        wanted = external_average_value_replicas(float(self._desired), 1.0, current)
        return self._hpa.apply(wanted, current, now)

    def _analyse(self, obs: Observation, now: float) -> None:
        """One run of the saturation analyser: `_desired` moves by its step, or is kept."""
        current, ready = obs.current_replicas, obs.ready_replicas
        kv = obs.kv_cache_utilization_max
        queue = self._queue.max(now, PEAK_WINDOW)
        if kv is None or queue is None or ready == 0:
            return
        step = saturation_step(kv, queue, ready)
        if step > 0 and obs.pending_replicas > 0:
            step = 0  # cascade prevention
        if step != 0:
            self._desired = self.clamp(current + step)
        elif self._desired is None or self._desired == current:
            self._desired = current
