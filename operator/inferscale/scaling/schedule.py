"""Schedule floors: a known peak keeps at least `min_replicas` for `duration` after each cron match.

Cron expressions are evaluated in UTC over `now` (seconds since the Unix epoch). The last match at
or before a given minute only changes once a minute, so it is memoised per (expression, minute):
the simulator asks every tick for weeks of simulated time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from croniter import croniter

from inferscale.scaling.types import Schedule


def validate_schedule(schedule: Schedule) -> None:
    """Raise ValueError naming what is wrong with `schedule`."""
    if not croniter.is_valid(schedule.cron):
        raise ValueError(f"invalid cron expression {schedule.cron!r}: expected five fields such as '0 9 * * 1-5'")
    if not (math.isfinite(schedule.duration) and schedule.duration > 0):
        raise ValueError(f"schedule {schedule.cron!r}: duration must be positive seconds, got {schedule.duration!r}")
    if schedule.min_replicas < 0:
        raise ValueError(f"schedule {schedule.cron!r}: minReplicas must be >= 0, got {schedule.min_replicas}")


def active_floor(schedules: Sequence[Schedule], now: float) -> tuple[int, Schedule] | None:
    """The highest floor among schedules active at `now`, with the schedule that sets it."""
    best: tuple[int, Schedule] | None = None
    for schedule in schedules:
        start = _last_match(schedule.cron, math.floor(now / 60.0))
        if now - start < schedule.duration and (best is None or schedule.min_replicas > best[0]):
            best = (schedule.min_replicas, schedule)
    return best


@lru_cache(maxsize=4096)
def _last_match(cron: str, minute: int) -> float:
    # A match at the start of this very minute counts: look back from just after it.
    return float(croniter(cron, minute * 60.0 + 0.5).get_prev(float))
