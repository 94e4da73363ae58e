"""HPA stabilization over recorded recommendations, and the pruning of that record.

Scale-down takes the HIGHEST recommendation in its window, scale-up the LOWEST in its window
(HPA `stabilizeRecommendationWithBehaviors`; AIBrix inverts this and deepens scale-downs). The
record lives in status, so a restarted operator keeps its windows. It is kept run-length encoded
(an entry per change of the recommendation, not per tick), so a steady service's status does not
change from tick to tick and need not be rewritten; the price is that a run counts until the next
run began, which makes a window at most one tick longer, never shorter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from inferscale.scaling.types import ScaleEvent, TimedReplicas

_Dated = TypeVar("_Dated", TimedReplicas, ScaleEvent)

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


def as_points(runs: Sequence[TimedReplicas], now: float) -> list[TimedReplicas]:
    """A run-length record as the per-tick record `stabilize` reads: each run is dated when the next
    run began (the last it could have been recommended), the current run now. A date after `now` (a
    skewed clock, a hand edit) is read as `now`: left in the future it would sit in every window for as
    long as it stays there, holding scale-ups; dropped, it would shorten the scale-down window."""
    ends = [r.at for r in runs[1:]] + [now]
    return [TimedReplicas(min(max(end, r.at), now), r.replicas) for r, end in zip(runs, ends, strict=True)]


def prune_recommendations(history: Sequence[TimedReplicas], now: float, keep: float) -> tuple[TimedReplicas, ...]:
    """The run-length record of `history` (time-ordered) that can still matter to a window of `keep`
    seconds: repeats fold into the run they continue, runs that ended before the window are dropped.
    A run dated after `now` is stored as begun `now`, so it lasts one window from the tick that first
    read it, as a recommendation made now would, instead of for as long as its date stays ahead."""
    runs: list[TimedReplicas] = []
    for r in _until(history, now):
        if not runs or runs[-1].replicas != r.replicas:
            runs.append(r)
    ends = [r.at for r in runs[1:]] + [float("inf")]
    return tuple(r for r, end in zip(runs, ends, strict=True) if end > now - keep)


def prune_events(events: Sequence[ScaleEvent], now: float, keep: float) -> tuple[ScaleEvent, ...]:
    """Events inside the longest rate-limit period, and at least the last `KEEP_EVENTS`. An event dated
    after `now` counts in every rate-limit period while it stays ahead; stored as happened `now`, it
    limits one period, as an event now would, and then ages out."""
    events = _until(events, now)
    first_recent = len(events) - KEEP_EVENTS
    return tuple(e for i, e in enumerate(events) if i >= first_recent or now - keep < e.at)


def _until(items: Sequence[_Dated], now: float) -> list[_Dated]:
    # A time-ordered record stays time-ordered: every date after `now` becomes `now`.
    return [replace(item, at=now) if item.at > now else item for item in items]
