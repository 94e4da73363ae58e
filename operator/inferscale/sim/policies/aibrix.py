"""AIBrix PodAutoscaler, APA strategy, on vLLM KV-cache usage.

Sources: reference/peer-autoscalers.md §1.1 and §1.3 (vllm-project/aibrix `algorithm/apa.go`,
`context/context.go` defaults, `podautoscaler_controller.go::stabilizeRecommendation`); the APA
sample in AIBrix's autoscaling docs (`targetMetric: gpu_cache_usage_perc`, `targetValue: "0.5"`).
Defaults: target 0.5, up/down tolerance 0.1/0.1, max scale-up rate 2.0, max scale-down rate 2.0,
scale-up cooldown 0 s, scale-down cooldown 300 s, reconcile every 10 s.
- The metric is the current per-pod average (APA does not use the stable/panic windows); r = avg/target:
  r > 1.1 -> min(ceil(N r), ceil(2 N)); r < 0.9 -> max(ceil(N r), floor(N / 2)); else N.
- Clamp to [min, max], then AIBrix's stabilization as the code does it (not as HPA does): a
  scale-up takes the MAX recommendation within the scale-up window, a scale-down takes the MIN within
  the 300 s scale-down window, so the cooldown deepens a scale-down instead of delaying it.
- No metric (every pod failed): the round is skipped. Zero current replicas: scaling disabled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.window import Samples

TARGET_KV = 0.5
UP_TOLERANCE = 0.1
DOWN_TOLERANCE = 0.1
MAX_SCALE_UP_RATE = 2.0
MAX_SCALE_DOWN_RATE = 2.0
SCALE_UP_COOLDOWN = 0.0
SCALE_DOWN_COOLDOWN = 300.0
RESYNC = 10.0


def apa_replicas(current: int, usage: float, target: float) -> int:
    """`computeTargetReplicas` of apa.go."""
    ratio = usage / target
    if ratio > 1 + UP_TOLERANCE:
        return min(math.ceil(current * ratio), math.ceil(MAX_SCALE_UP_RATE * current))
    if ratio < 1 - DOWN_TOLERANCE:
        return max(math.ceil(current * ratio), math.floor(current / MAX_SCALE_DOWN_RATE))
    return current


class AIBrixAPA:
    name = "aibrix-apa"

    def __init__(self, ctx: PolicyContext, target: float = TARGET_KV) -> None:
        self.interval = RESYNC
        self.target = target
        self.clamp = ctx.clamp
        self._history = Samples(keep=max(SCALE_UP_COOLDOWN, SCALE_DOWN_COOLDOWN) + RESYNC)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        current = obs.current_replicas
        if obs.kv_cache_utilization is None or current == 0:
            return current
        desired = self.clamp(apa_replicas(current, obs.kv_cache_utilization, self.target))
        self._history.add(now, float(desired))
        if desired > current:
            window = self._history.values(now, SCALE_UP_COOLDOWN) or [float(desired)]
            return self.clamp(int(max(window)))
        if desired < current:
            return self.clamp(int(min(self._history.values(now, SCALE_DOWN_COOLDOWN))))
        return current
