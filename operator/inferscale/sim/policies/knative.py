"""Knative Pod Autoscaler (KPA) on request concurrency.

Sources: reference/peer-autoscalers.md §4.3; knative/serving `config-autoscaler` defaults and
`pkg/autoscaler/scaling/autoscaler.go` (`Scale`). Defaults: stable window 60 s, panic window 10 %
of it (6 s), panic threshold 200 %, max scale-up rate 1000, max scale-down rate 2, tick 2 s,
target utilization 70 %.
- Concurrency per pod is what the queue-proxy counts: requests in the pod, running + waiting.
- Target: Knative's default of 100 concurrent requests means nothing for a vLLM pod (it batches
  hundreds of sequences and its latency, not its slots, is the limit). A KPA user of vLLM sets
  `autoscaling.knative.dev/target` to the concurrency at which one pod still meets the SLO in their
  load test; here that is the batch size of the perf model's SLO operating point at the trace's
  mean lengths (`PolicyContext.slo_point`), with Knative's 70 % target utilization on top.
- desired = ceil(window-average total concurrency / (target x 0.7)) for the stable and panic windows,
  each bounded to [floor(ready / 2), ceil(1000 x ready)]. Panic starts when the panic count is
  >= 2 x ready pods and lasts until a full stable window passes without that; while panicking the
  count never goes down (the max reached in panic is held).
- Start: as `newAutoscaler` does, a KPA that finds more than one pod Ready starts in panic mode with
  the ready count as the panic maximum ("keeping at least the current scale until we accumulate enough
  data"), so it cannot scale down before a stable window of its own samples has passed. Here the
  autoscaler starts at the policy's first decision, the end of the replay's warm-up (it has no sample
  from before).
- No sample in the stable window: the decision is invalid and the count is kept.
- Scale to zero (grace 30 s) is not modelled: the count never goes below max(min, 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.window import Samples

STABLE_WINDOW = 60.0
PANIC_WINDOW = 6.0
PANIC_THRESHOLD = 2.0
MAX_SCALE_UP_RATE = 1000.0
MAX_SCALE_DOWN_RATE = 2.0
TICK = 2.0
TARGET_UTILIZATION = 0.7


def slo_concurrency(ctx: PolicyContext) -> float:
    """Per-pod concurrency at which one replica meets the SLO at the trace's mean lengths."""
    return max(ctx.slo_point.batch, 1.0)


class KnativeKPA:
    name = "knative-kpa"

    def __init__(self, ctx: PolicyContext, target: float | None = None) -> None:
        self.interval = TICK
        self.target = target if target is not None else ctx.given_target(self.name) or slo_concurrency(ctx)
        self.target_value = self.target * TARGET_UTILIZATION
        self.min_replicas = max(ctx.min_replicas, 1)
        self.max_replicas = ctx.max_replicas
        self._concurrency = Samples(keep=STABLE_WINDOW)
        self._panic_since: float | None = None  # last time the panic condition held
        self._max_panic_pods = 0
        self._started = False

    @property
    def panicking(self) -> bool:
        return self._panic_since is not None

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        if not self._started:
            self._started = True
            if obs.ready_replicas > 1:
                self._panic_since = now
                self._max_panic_pods = obs.ready_replicas
        if obs.running is not None or obs.waiting is not None:
            self._concurrency.add(now, (obs.running or 0.0) + (obs.waiting or 0.0))
        stable = self._concurrency.mean(now, STABLE_WINDOW)
        panic = self._concurrency.mean(now, PANIC_WINDOW)
        if stable is None or panic is None:
            return obs.current_replicas
        ready = float(max(obs.ready_replicas, 1))
        max_up = math.ceil(MAX_SCALE_UP_RATE * ready)
        max_down = math.floor(ready / MAX_SCALE_DOWN_RATE)
        dspc = math.ceil(stable / self.target_value)
        dppc = math.ceil(panic / self.target_value)
        stable_pods = min(max(dspc, max_down), max_up)
        panic_pods = min(max(dppc, max_down), max_up)
        over = dppc / ready >= PANIC_THRESHOLD
        if over:
            self._panic_since = now
        elif self._panic_since is not None and self._panic_since + STABLE_WINDOW < now:
            self._panic_since = None
            self._max_panic_pods = 0
        desired = stable_pods
        if self._panic_since is not None:
            desired = max(desired, panic_pods)
            if desired > self._max_panic_pods:
                self._max_panic_pods = desired
            else:
                desired = self._max_panic_pods
        return min(max(desired, self.min_replicas), self.max_replicas)
