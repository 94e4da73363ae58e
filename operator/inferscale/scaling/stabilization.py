"""HPA stabilization over recorded recommendations, and the pruning of that record.

Scale-down takes the HIGHEST recommendation in its window, scale-up the LOWEST in its window
(HPA `stabilizeRecommendationWithBehaviors`; AIBrix inverts this and deepens scale-downs). The
record lives in status, so a restarted operator keeps its windows.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferscale.scaling.types import ScaleEvent, TimedReplicas

KEEP_EVENTS = 20  # scale events kept for status history beyond what the rate limits need


def stabilize(
    desired: int, current: int, history: Sequence[TimedReplicas], now: float, up_window: float, down_window: float
) -> int:
    """`history` excludes `desired` itself; an entry counts when it is strictly newer than the cutoff."""
    up, down = desired, desired
    up_cut, down_cut = now - up_window, now - down_window
    for rec in history:
        if rec.at > up_cut:
            up = min(up, rec.replicas)
        if rec.at > down_cut:
            down = max(down, rec.replicas)
    result = current
    if result < up:
        result = up
    if result > down:
        result = down
    return result


def prune_recommendations(history: Sequence[TimedReplicas], now: float, keep: float) -> tuple[TimedReplicas, ...]:
    """Entries that can still matter to a window of `keep` seconds. Entries from a clock that went
    back are kept a window long too: dropping them would shorten the window."""
    return tuple(r for r in history if now - keep < r.at <= now + keep)


def prune_events(events: Sequence[ScaleEvent], now: float, keep: float) -> tuple[ScaleEvent, ...]:
    """Events inside the longest rate-limit period, and at least the last `KEEP_EVENTS`."""
    first_recent = len(events) - KEEP_EVENTS
    return tuple(e for i, e in enumerate(events) if i >= first_recent or now - keep < e.at)
