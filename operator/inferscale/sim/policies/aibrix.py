"""AIBrix PodAutoscaler, APA strategy, on vLLM KV-cache usage, as AIBrix behaves since PR #2671
(merged Sep 2026, after the reference's snapshot e3e10f9e): with its pending-replica guard.

Sources: reference/peer-autoscalers.md §1.1 and §1.3 (vllm-project/aibrix `algorithm/apa.go`,
`metrics/client.go`, `context/context.go` defaults, `podautoscaler_controller.go::stabilizeRecommendation`);
issue vllm-project/aibrix#2670 and PR #2671 (`applyPendingReplicaGuard`). Defaults: observeWindowSeconds
180 s, up/down tolerance 0.1/0.1, max scale-up rate 2.0, max scale-down rate 2.0, scale-up cooldown 0 s,
scale-down cooldown 300 s, reconcile every 10 s.
- The metric: each reconcile's per-pod average KV usage is recorded into the stable window, and APA
  reads the window's mean over observeWindowSeconds (`StableValue`, what `ComputeRecommendation` passes
  to `SetCurrentUsePerPod`), not the last scrape. r = mean / target:
  r > 1.1 -> min(ceil(N r), ceil(2 N)); r < 0.9 -> max(ceil(N r), floor(N / 2)); else N.
- Pending-replica guard (`applyPendingReplicaGuard` in `autoscaler.go`), while pods are pending (created,
  not Ready, no metric yet) and the recommendation moves: on a scale-up the metric is scaled by ready / N,
  the pending pods read as missing metrics, and ceil(N x metric / target) is kept within [N, the
  unguarded result]; on a scale-down the pending pods read at the target, (metric x ready + target x
  pending) / N, and the result is kept within [the unguarded result, N]. Without it a fleet whose new
  pods take minutes to start doubles every reconcile on the same saturated ready pods (the 9 -> 18 -> 36
  -> 69 cascade of #2670). `pending_guard=False` models AIBrix up to e3e10f9e.
- Target: AIBrix's sample sets `targetValue: "0.5"`, a KV level a pod reaches only when its requests
  can fill the cache: with ServeGen m-small's 122/15-token requests a pod running max_num_seqs
  sequences holds 0.30 of its KV, so 0.5 reads "under-used" on a saturated fleet and APA halves it.
  A user who load-tested sets the KV usage one replica shows where it still meets the SLO; here that
  is `PolicyContext.slo_kv_usage` at the trace's mean lengths, with Knative's 70 % target utilization
  on top: the same calibration as knative-kpa's concurrency target.
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
from inferscale.sim.policies.knative import TARGET_UTILIZATION
from inferscale.sim.policies.window import Samples

SAMPLE_TARGET_KV = 0.5  # AIBrix's APA sample; used only where the SLO is unattainable (no load test to go by)
OBSERVE_WINDOW = 180.0
UP_TOLERANCE = 0.1
DOWN_TOLERANCE = 0.1
MAX_SCALE_UP_RATE = 2.0
MAX_SCALE_DOWN_RATE = 2.0
SCALE_UP_COOLDOWN = 0.0
SCALE_DOWN_COOLDOWN = 300.0
RESYNC = 10.0


def calibrated_kv_target(ctx: PolicyContext) -> float:
    usage = ctx.slo_kv_usage
    return usage * TARGET_UTILIZATION if usage > 0 else SAMPLE_TARGET_KV


def apa_replicas(current: int, usage: float, target: float) -> int:
    """`computeTargetReplicas` of apa.go."""
    ratio = usage / target
    if ratio > 1 + UP_TOLERANCE:
        return min(math.ceil(current * ratio), math.ceil(MAX_SCALE_UP_RATE * current))
    if ratio < 1 - DOWN_TOLERANCE:
        return max(math.ceil(current * ratio), math.floor(current / MAX_SCALE_DOWN_RATE))
    return current


def guard_pending(current: int, ready: int, usage: float, target: float, desired: int) -> int:
    """`applyPendingReplicaGuard` for APA: `desired` is the unguarded recommendation on `usage`, the mean
    over the `ready` pods that report it."""
    if desired == current or ready >= current:
        return desired
    pending = current - ready
    if desired > current:
        adjusted = usage * ready / current
        return min(max(math.ceil(current * adjusted / target), current), desired)
    adjusted = (usage * ready + target * pending) / current
    return max(min(math.ceil(current * adjusted / target), current), desired)


class AIBrixAPA:
    name = "aibrix-apa"

    def __init__(self, ctx: PolicyContext, target: float | None = None, pending_guard: bool = True) -> None:
        self.interval = RESYNC
        self.target = target if target is not None else ctx.given_target(self.name) or calibrated_kv_target(ctx)
        self.pending_guard = pending_guard
        self.clamp = ctx.clamp
        self._kv = Samples(keep=OBSERVE_WINDOW)
        self._history = Samples(keep=max(SCALE_UP_COOLDOWN, SCALE_DOWN_COOLDOWN) + RESYNC)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        current = obs.current_replicas
        if obs.kv_cache_utilization is None or current == 0:
            return current
        self._kv.add(now, obs.kv_cache_utilization)
        usage = self._kv.mean(now, OBSERVE_WINDOW)
        if usage is None:
            return current
        desired = apa_replicas(current, usage, self.target)
        if self.pending_guard and obs.pending_replicas > 0:
            desired = guard_pending(current, min(obs.ready_replicas, current), usage, self.target, desired)
        desired = self.clamp(desired)
        self._history.add(now, float(desired))
        if desired > current:
            window = self._history.values(now, SCALE_UP_COOLDOWN) or [float(desired)]
            return self.clamp(int(max(window)))
        if desired < current:
            return self.clamp(int(min(self._history.values(now, SCALE_DOWN_COOLDOWN))))
        return current
