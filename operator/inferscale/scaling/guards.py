"""Guards applied after the signals are combined: rate limits and the consolidation check.

Rate limits follow HPA `behavior` (`calculateScaleUpLimitWithScalingRules`): the change allowed in
a period is counted from the replica count at the start of the period, reconstructed from the
scale events recorded in status (so a restart does not reset it). When both a percent and a pods
limit are set, the one allowing the larger change applies. Rounding is HPA's: scale-up rounds up
(2 -> 3 -> 5 at 50%), scale-down rounds down (7 -> 5 -> 3 at 25%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from inferscale.scaling.signals import EPSILON, ceil_count
from inferscale.scaling.types import ScaleEvent, ScaleRule

KV_PEAK_SATURATED = 0.95  # a pod this full is about to queue or preempt: removing replicas only hurts


def _period_change(events: Sequence[ScaleEvent], now: float, period: float) -> tuple[int, int]:
    added = removed = 0
    for e in events:
        if now - e.at < period:
            delta = e.to_replicas - e.from_replicas
            if delta > 0:
                added += delta
            else:
                removed -= delta
    return added, removed


def scale_up_limit(rule: ScaleRule, events: Sequence[ScaleEvent], current: int, now: float) -> int | None:
    """The most replicas allowed now, or None when the rule sets no limit."""
    if rule.max_change_percent is None and rule.max_change_pods is None:
        return None
    added, removed = _period_change(events, now, rule.period)
    start = max(current - added + removed, 0)
    limits = []
    if rule.max_change_pods is not None:
        limits.append(start + rule.max_change_pods)
    if rule.max_change_percent is not None:
        limits.append(ceil_count(start * (1 + rule.max_change_percent / 100.0)))
    # A percentage of zero replicas is zero: never let that block the first replica. Never below
    # `current` either (as HPA clamps it): when spec.replicas was changed behind the operator's back the
    # period's start reads low, and a limit below `current` would turn a scale-up into a scale-down.
    return max(*limits, 1, current)


def scale_down_limit(rule: ScaleRule, events: Sequence[ScaleEvent], current: int, now: float) -> int | None:
    """The fewest replicas allowed now, or None when the rule sets no limit."""
    if rule.max_change_percent is None and rule.max_change_pods is None:
        return None
    added, removed = _period_change(events, now, rule.period)
    start = current + removed - added
    limits = []
    if rule.max_change_pods is not None:
        limits.append(start - rule.max_change_pods)
    if rule.max_change_percent is not None:
        limits.append(math.floor(start * (1 - rule.max_change_percent / 100.0) + EPSILON))
    # never above `current`: a scale-down limit must not turn a scale-down into a scale-up
    return min(max(min(limits), 0), current)


def ordered_at(events: Sequence[ScaleEvent], pending: int) -> float | None:
    """When the oldest of `pending` replicas not Ready yet was ordered, as the scale events tell it: the newest
    scale-ups that add up to them, the oldest Ready first (a ReplicaSet cancels the youngest on a scale-down, and
    with one time-to-ready the earliest ordered start first). None when the events kept do not account for them
    (pods restarting, a rollout's surge, events older than those kept)."""
    need = pending
    for e in reversed(events):
        need -= max(0, e.to_replicas - e.from_replicas)
        if need <= 0 < pending:
            return e.at
    return None


def describe_rule(rule: ScaleRule) -> str:
    parts = []
    if rule.max_change_percent is not None:
        parts.append(f"{rule.max_change_percent:g}%")
    if rule.max_change_pods is not None:
        parts.append(f"{rule.max_change_pods} pods")
    return f"{' or '.join(parts)} per {rule.period:g}s"


@dataclass(frozen=True)
class Load:
    """What the fleet carries now, with missing pods at 100% of target (the scale-down view)."""

    kv_total: float | None  # sum of per-pod KV usage
    kv_peak: float | None
    waiting: float | None
    request_rate: float | None
    capacity_rps: float | None


def consolidation_floor(load: Load, target_kv: float, target_waiting: float, current: int) -> tuple[int, str] | None:
    """The fewest replicas that carry `load` within every target, with the binding constraint;
    None when any count would do. A saturated peak pod refuses any scale-down (returns current)."""
    peak_limit = max(target_kv, KV_PEAK_SATURATED)
    if load.kv_peak is not None and load.kv_peak >= peak_limit:
        return current, f"a pod's KV cache peaks at {load.kv_peak:.0%}"
    needs: list[tuple[int, str]] = []
    if load.kv_total is not None:
        n = ceil_count(load.kv_total / target_kv)
        needs.append((n, f"{n} replicas keep KV cache <= {target_kv:.0%}"))
    if load.waiting is not None:
        n = ceil_count(load.waiting / target_waiting)
        needs.append((n, f"{n} replicas keep waiting <= {target_waiting:g} each"))
    if load.request_rate is not None and load.capacity_rps is not None:
        n = ceil_count(load.request_rate / load.capacity_rps)
        needs.append((n, f"{n} replicas carry {load.request_rate:.2f} req/s"))
    return max(needs) if needs else None
