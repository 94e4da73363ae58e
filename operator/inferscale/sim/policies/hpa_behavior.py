"""The HorizontalPodAutoscaler's replica calculator and `behavior` (autoscaling/v2), shared by the
HPA and KEDA baselines (KEDA drives an HPA for 1 <-> N).

Sources: reference/peer-autoscalers.md §4.5; kubernetes `replica_calculator.go`
(`calcPlainMetricReplicas`, `GetExternalPerPodMetricReplicas`) and `horizontal.go`
(`stabilizeRecommendationWithBehaviors`, `convertDesiredReplicasWithBehaviorRate`). Stabilization
and rate limits reuse `scaling.stabilization` and `scaling.guards`, which implement the same HPA
semantics for inferscale itself.
"""

from __future__ import annotations

import math

from inferscale.scaling.guards import scale_down_limit, scale_up_limit
from inferscale.scaling.stabilization import stabilize
from inferscale.scaling.types import ScaleEvent, ScaleRule, TimedReplicas

TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance
SYNC_PERIOD = 15.0  # --horizontal-pod-autoscaler-sync-period
# Default behavior: scale-up 100 % or 4 pods per 15 s (selectPolicy Max), no window;
# scale-down 100 % per 15 s after a 300 s stabilization window.
DEFAULT_SCALE_UP = ScaleRule(stabilization_window=0.0, max_change_percent=100.0, max_change_pods=4, period=15.0)
DEFAULT_SCALE_DOWN = ScaleRule(stabilization_window=300.0, max_change_percent=100.0, max_change_pods=None, period=15.0)


def pods_metric_replicas(
    usage: float,
    target: float,
    current: int,
    reporting: int,
    missing: int,
    pending: int = 0,
    tolerance: float = TOLERANCE,
) -> int:
    """`calcPlainMetricReplicas` for a per-pod average metric, pods grouped as `groupPods` does for a
    non-CPU metric. `usage` is the mean over the `reporting` pods; `missing` pods (Running, no sample)
    count as 100 % of target on a scale-down and 0 % on a scale-up; `pending` pods (Pending phase,
    unready) count as 0 % on a scale-up and are left out on a scale-down; a change that flips direction
    is dropped."""
    ratio = usage / target
    scale_up_with_pending = pending > 0 and ratio > 1.0
    if not scale_up_with_pending and missing == 0:
        if abs(1.0 - ratio) <= tolerance:
            return current
        return math.ceil(ratio * reporting)
    fill = target if ratio < 1.0 else 0.0
    total = reporting + missing + (pending if scale_up_with_pending else 0)
    new_ratio = (usage * reporting + fill * missing) / (target * total)
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    replicas = math.ceil(new_ratio * total)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas


def external_average_value_replicas(usage: float, target: float, current: int, tolerance: float = TOLERANCE) -> int:
    """`GetExternalPerPodMetricReplicas` (an External metric with an AverageValue target, as KEDA
    creates): ceil(usage / target) unless usage / (target * current) is within the tolerance."""
    if current > 0 and abs(1.0 - usage / (target * current)) <= tolerance:
        return current
    return math.ceil(usage / target)


class HPABehavior:
    """Stabilization window and rate limits of an HPA; keeps its recommendations and scale events
    in memory, as kube-controller-manager does (a restart loses them)."""

    def __init__(
        self,
        min_replicas: int,
        max_replicas: int,
        scale_up: ScaleRule = DEFAULT_SCALE_UP,
        scale_down: ScaleRule = DEFAULT_SCALE_DOWN,
    ) -> None:
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.scale_up = scale_up
        self.scale_down = scale_down
        self._recommendations: list[TimedReplicas] = []
        self._events: list[ScaleEvent] = []
        self._started = False

    def apply(self, desired: int, current: int, now: float) -> int:
        """The replica count the HPA writes, given the calculator's `desired`; records both."""
        keep = max(self.scale_up.stabilization_window, self.scale_down.stabilization_window)
        if not self._started:
            # recordInitialRecommendation: a new HPA remembers the current count first, so it does not
            # scale down before a full window of its own recommendations.
            self._recommendations.append(TimedReplicas(now, current))
            self._started = True
        self._recommendations = [r for r in self._recommendations if r.at > now - keep]
        result = stabilize(
            desired,
            current,
            self._recommendations,
            now,
            self.scale_up.stabilization_window,
            self.scale_down.stabilization_window,
        )
        self._recommendations.append(TimedReplicas(now, desired))
        if result > current:
            limit = scale_up_limit(self.scale_up, self._events, current, now)
            ceiling = self.max_replicas if limit is None else min(self.max_replicas, max(limit, current))
            result = min(result, ceiling)
        elif result < current:
            limit = scale_down_limit(self.scale_down, self._events, current, now)
            floor = self.min_replicas if limit is None else max(self.min_replicas, min(limit, current))
            result = max(result, floor)
        result = min(max(result, self.min_replicas), self.max_replicas)
        if result != current:
            period = max(self.scale_up.period, self.scale_down.period)
            self._events = [e for e in self._events if now - e.at < period]
            self._events.append(ScaleEvent(now, current, result, "hpa"))
        return result
