"""Per-signal recommendations: each turns one observed quantity into a replica count with a reason.

The saturation signals (KV cache, queue) follow the HPA replica calculator: desired =
ceil(ready x observed/target), a dead-band of `tolerance` around the target that holds the current
count, and HPA's rule for partial data (pods that did not report count as 0% of target when the
reporting pods ask for more, as 100% when they ask for less; a direction flip holds). The count
they ask for is the total needed to carry today's load, so pods still starting (in `current`)
are supply on the way: no replicas are added for load they will cover, and none are removed while
the ready ones are over target. The queue signal is capped at `MAX_STEP` x the ready replicas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferscale.scaling.types import Reason, Recommendation

# An overload signal (latency above its SLO, a queue) at most doubles the READY replicas per tick.
# Neither is linear in replicas: a queue is a backlog, not a rate, and drains fast once capacity
# arrives; replicas already starting count against the doubling, so they absorb it instead of
# more being added on top (in a bursty Azure replay, an unbounded queue signal went 5 -> 12 -> 18
# while 7 replicas were still starting).
MAX_STEP = 2.0
# "Loaded": a queue forming (waiting at least this many per ready replica at the scrape) or the
# mean KV cache at least this fraction of its target. Only a loaded fleet teaches capacity, and
# only on a loaded fleet does a latency breach ask for replicas: on an idle one it is the prefill
# of long prompts or the network, which more replicas would not lower (in a long-prompt replay,
# an ungated TTFT signal took 14 replicas at 6% KV to the max of 48, TTFT unchanged at 880 ms).
LOADED_KV_FRACTION = 0.75
LOADED_WAITING_PER_REPLICA = 1.0
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
    ratio: float  # observed / target, after filling in missing pods and the cap
    held: bool  # the dead-band or a direction flip held the current count
    capped: bool = False  # the ratio was cut to `max_ratio`
    covered: bool = False  # over target, but replicas already starting cover it


def hpa_ratio(usage: Usage, target: float, tolerance: float, current: int, max_ratio: float = math.inf) -> Ratio:
    """HPA's replica calculator for one per-pod metric (see the module docstring), the ratio
    capped at `max_ratio`."""
    k, n = usage.reporting, usage.ready
    ratio = usage.total / (k * target)
    if k < n:
        up = ratio > 1.0
        filled = usage.total / (n * target) if up else (usage.total + (n - k) * target) / (n * target)
        if up != (filled > 1.0) and filled != 1.0:
            return Ratio(current, current, filled, True)
        ratio = filled
    capped = ratio > max_ratio
    ratio = min(ratio, max_ratio)
    raw = ceil_count(ratio * n)
    if abs(ratio - 1.0) <= tolerance:
        return Ratio(current, raw, ratio, True)
    if ratio > 1.0 and raw <= current:
        # HPA counts not-ready pods as 0% on a scale-up; when that flips the direction it holds.
        # Overloaded ready replicas never ask to remove the ones still starting.
        return Ratio(current, current, ratio, False, capped, covered=True)
    return Ratio(raw, raw, ratio, False, capped)


def _coverage(usage: Usage) -> str:
    return "" if usage.reporting >= usage.ready else f" ({usage.reporting} of {usage.ready} reporting)"


def _outcome(r: Ratio, tolerance: float, current: int) -> str:
    if r.held:
        return f", within {tolerance:.0%} tolerance → hold {current}"
    if r.covered:
        return f" → hold {current}: the replicas starting cover it"
    if r.capped:
        return f" → {r.replicas} (at most {MAX_STEP:g}x the ready replicas per tick)"
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
    r = hpa_ratio(usage, target, tolerance, current, MAX_STEP)
    per = waiting / max(usage.reporting, 1)
    message = (
        f"{waiting:g} waiting ({per:.1f} per replica vs target {target:g}) on {usage.ready} ready replicas"
        f"{_coverage(usage)}{_outcome(r, tolerance, current)}"
    )
    return Recommendation(Reason.QUEUE, r.replicas, waiting, target, message), r


def queued(waiting: float | None, ready: int) -> bool:
    return waiting is not None and waiting >= LOADED_WAITING_PER_REPLICA * ready


def loaded(kv: float | None, waiting: float | None, target_kv: float, ready: int) -> bool:
    return (kv is not None and kv >= LOADED_KV_FRACTION * target_kv) or queued(waiting, ready)


def slo(
    signal: Reason, observed: float, target: float, ready: int, current: int, is_loaded: bool
) -> Recommendation | str | None:
    """Latency above its SLO on loaded replicas asks for ready x observed/target replicas, at most
    doubling, and never fewer than `current` (no scale-down during a breach). When the SLO is met
    it recommends nothing (latency below target says nothing about how many to remove). A breach on
    replicas that are not loaded recommends nothing either and returns the sentence saying why."""
    if observed <= target or ready < 1:
        return None
    name = "TTFT P95" if signal is Reason.SLO_TTFT else "ITL mean"
    breach = f"{name} {observed * 1000:.0f}ms > SLO {target * 1000:.0f}ms"
    if not is_loaded:
        return f"{breach} on replicas that are not loaded: more replicas would not lower it"
    step = min(observed / target, MAX_STEP)
    replicas = max(ceil_count(ready * step), ready + 1, current)
    return Recommendation(signal, replicas, observed, target, f"{breach} on {ready} ready replicas → {replicas}")
