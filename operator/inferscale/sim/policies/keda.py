"""KEDA ScaledObject with a Prometheus trigger on `vllm:num_requests_waiting`, as vLLM
production-stack ships it.

Sources: reference/peer-autoscalers.md §4.4 (KEDA 2.18) and §4.6 (production-stack example),
DESIGN §6. Defaults: query `sum(vllm:num_requests_waiting)`, threshold 5 (AverageValue), polling
15 s, cooldownPeriod 360 s, activationThreshold 0, ignoreNullValues true. production-stack's example
queries the bare metric, one series per pod, which KEDA's Prometheus scaler rejects (it needs one
element): `sum()` is the fix its user makes.
- 1 <-> N is an HPA on the External metric: desired = ceil(waiting / 5) unless within the 0.1
  tolerance of the current count, then the HPA default behavior (scale-down window 300 s), with
  the HPA's minReplicas = max(minReplicaCount, 1).
- 0 <-> 1 is KEDA's own: activate when waiting > 0; go to zero only when minReplicaCount is 0 and
  the trigger has been inactive for the cooldown (the cooldown applies to N -> 0 only).
- ignoreNullValues=true: an empty Prometheus result is read as 0, not as an error. Kept on purpose:
  that is what KEDA does (and why "unknown is never zero" matters), so no data reads as no queue.
- KEDA queries Prometheus on each HPA request, so no extra pipeline lag beyond the scrape.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.hpa_behavior import HPABehavior, external_average_value_replicas

THRESHOLD = 5.0
ACTIVATION_THRESHOLD = 0.0
POLLING_INTERVAL = 15.0
COOLDOWN_PERIOD = 360.0


class KedaQueue:
    name = "keda-queue"

    def __init__(self, ctx: PolicyContext, threshold: float | None = None, cooldown: float = COOLDOWN_PERIOD) -> None:
        self.interval = POLLING_INTERVAL
        self.threshold = threshold if threshold is not None else ctx.given_target(self.name) or THRESHOLD
        self.cooldown = cooldown
        self.min_replicas = ctx.min_replicas
        self._behavior = HPABehavior(max(ctx.min_replicas, 1), ctx.max_replicas)
        self._last_active: float | None = None

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        waiting = obs.waiting if obs.waiting is not None else 0.0  # ignoreNullValues: true
        current = obs.current_replicas
        active = waiting > ACTIVATION_THRESHOLD
        if active or self._last_active is None:
            self._last_active = now
        if current == 0:
            return self._behavior.min_replicas if active else 0
        if self.min_replicas == 0 and not active and now - self._last_active >= self.cooldown:
            return 0
        pods = obs.ready_replicas + obs.pending_replicas or current
        desired = external_average_value_replicas(waiting, self.threshold, pods)
        return self._behavior.apply(desired, current, now)
