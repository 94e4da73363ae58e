"""Per-signal recommendations: each turns one observed quantity into a replica count with a reason.

The saturation signals (KV cache, queue) follow the HPA replica calculator: desired =
ceil(ready x observed/target), a dead-band of `tolerance` around the target that holds the current
count, and HPA's rule for partial data (pods that did not report count as 0% of target when the
reporting pods ask for more, as 100% when they ask for less; a direction flip holds). The count
they ask for is the total needed to carry today's load, so pods still starting (in `current`)
are supply on the way: no replicas are added for load they will cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferscale.scaling.types import Reason, Recommendation

MAX_SLO_STEP = 2.0  # an SLO breach at most doubles the ready replicas per tick: latency is not linear
EPSILON = 1e-9  # float noise must not add a replica: 2 x 0.4 / 0.8 is 1.0000000000000002


def ceil_count(x: float) -> int:
    return max(0, math.ceil(x - EPSILON))


@dataclass(frozen=True)
class Usage:
    """A per-pod quantity summed over the pods that reported it."""

    total: float
    reporting: int  # pods with a sample, <= ready
    ready: int


@dataclass(frozen=True)
class Ratio:
    replicas: int  # after the dead-band
    raw: int  # without the dead-band
    ratio: float  # observed / target, after filling in missing pods
    held: bool  # the dead-band or a direction flip held the current count


def hpa_ratio(usage: Usage, target: float, tolerance: float, current: int) -> Ratio:
    """HPA's replica calculator for one per-pod metric (see the module docstring)."""
    k, n = usage.reporting, usage.ready
    ratio = usage.total / (k * target)
    if k < n:
        up = ratio > 1.0
        filled = usage.total / (n * target) if up else (usage.total + (n - k) * target) / (n * target)
        if up != (filled > 1.0) and filled != 1.0:
            return Ratio(current, current, filled, True)
        ratio = filled
    raw = ceil_count(ratio * n)
    if abs(ratio - 1.0) <= tolerance:
        return Ratio(current, raw, ratio, True)
    return Ratio(raw, raw, ratio, False)


def _coverage(usage: Usage) -> str:
    return "" if usage.reporting >= usage.ready else f" ({usage.reporting} of {usage.ready} reporting)"


def _outcome(r: Ratio, tolerance: float, current: int) -> str:
    if r.held:
        return f", within {tolerance:.0%} tolerance → hold {current}"
    return f" → {r.replicas}"


def kv_cache(mean: float, usage: Usage, target: float, tolerance: float, current: int) -> tuple[Recommendation, Ratio]:
    r = hpa_ratio(usage, target, tolerance, current)
    cmp = ">" if mean > target else "<" if mean < target else "="
    message = (
        f"KV cache {mean:.0%} {cmp} {target:.0%} target on {usage.ready} ready replicas{_coverage(usage)}"
        f"{_outcome(r, tolerance, current)}"
    )
    return Recommendation(Reason.KV_CACHE, r.replicas, mean, target, message), r


def queue(waiting: float, usage: Usage, target: float, tolerance: float, current: int) -> tuple[Recommendation, Ratio]:
    r = hpa_ratio(usage, target, tolerance, current)
    per = waiting / max(usage.reporting, 1)
    message = (
        f"{waiting:g} waiting ({per:.1f} per replica vs target {target:g}) on {usage.ready} ready replicas"
        f"{_coverage(usage)}{_outcome(r, tolerance, current)}"
    )
    return Recommendation(Reason.QUEUE, r.replicas, waiting, target, message), r


def slo(signal: Reason, observed: float, target: float, ready: int, current: int) -> Recommendation | None:
    """Latency above its SLO asks for ready x observed/target replicas, at most doubling; when the
    SLO is met it recommends nothing (latency below target says nothing about how many to remove).
    While it is breached the count never goes below `current`: no scale-down during a breach."""
    if observed <= target or ready < 1:
        return None
    step = min(observed / target, MAX_SLO_STEP)
    replicas = max(ceil_count(ready * step), ready + 1, current)
    name = "TTFT P95" if signal is Reason.SLO_TTFT else "ITL mean"
    message = f"{name} {observed * 1000:.0f}ms > SLO {target * 1000:.0f}ms on {ready} ready replicas → {replicas}"
    return Recommendation(signal, replicas, observed, target, message)
