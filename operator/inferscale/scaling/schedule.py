"""Schedule floors: a known peak keeps at least `min_replicas` for `duration` after each cron match, from
one time-to-ready before it, so that the replicas are Ready when it starts.

Cron expressions are evaluated in UTC over `now` (seconds since the Unix epoch). The last match is
memoised per expression until the next match: the simulator asks every tick for weeks of
simulated time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from croniter import CroniterBadDateError, croniter

from inferscale.scaling.types import Schedule


def validate_schedule(schedule: Schedule) -> None:
    """Raise ValueError naming what is wrong with `schedule`."""
    problem = cron_problem(schedule.cron)
    if problem is not None:
        raise ValueError(f"invalid cron expression {schedule.cron!r}: {problem}")
    if not (math.isfinite(schedule.duration) and schedule.duration > 0):
        raise ValueError(f"schedule {schedule.cron!r}: duration must be positive seconds, got {schedule.duration!r}")
    if schedule.min_replicas < 0:
        raise ValueError(f"schedule {schedule.cron!r}: minReplicas must be >= 0, got {schedule.min_replicas}")


@lru_cache(maxsize=256)
def cron_problem(cron: str) -> str | None:
    """What is wrong with `cron`, or None. A well-formed expression can still name a day that never comes
    ('0 0 30 2 *', February 30th): croniter finds no match, and a floor that never starts is a mistake."""
    try:
        croniter(cron, 0.0).get_next(float)
    except CroniterBadDateError:  # a ValueError too: first
        return "it never matches a date (a day the month does not have?)"
    except (ValueError, KeyError) as e:  # croniter's own errors are ValueErrors; odd text can raise KeyError
        why = str(e).split("] ", 1)[-1]  # croniter repeats the expression in brackets first
        if "out of range" in why:
            why = "a field is outside its range (minute 0-59, hour 0-23, day 1-31, month 1-12, weekday 0-7)"
        field = _unreadable_field(cron)
        if field is not None:  # croniter's words ("is not acceptable") name neither the field nor the item
            why = (
                f"croniter cannot read its {field}: "
                "use numbers (9), ranges (1-5), steps (*/15), lists (1,3) or names (mon, jan)"
            )
        return why
    return None


_FIELDS = ("minute", "hour", "day of the month", "month", "day of the week")


def _unreadable_field(cron: str) -> str | None:
    """The first of the five fields croniter refuses on its own, every other field '*'; None for a macro, or
    when each field reads alone (the fields together are what it refuses)."""
    fields = cron.split()
    if len(fields) != len(_FIELDS):
        return None
    for i, name in enumerate(_FIELDS):
        alone = " ".join(f if j == i else "*" for j, f in enumerate(fields))
        try:
            croniter(alone, 0.0).get_next(float)
        except CroniterBadDateError:
            continue
        except (ValueError, KeyError):
            return f"{name} field {fields[i]!r}"
    return None


def active_floor(schedules: Sequence[Schedule], now: float, lead: float = 0.0) -> tuple[int, Schedule, float] | None:
    """The highest floor among schedules active at `now` or starting within `lead` seconds (the time-to-ready:
    replicas ordered at the match itself would be Ready minutes into the peak), with the schedule that sets
    it and the seconds until it starts (0 once started)."""
    best: tuple[int, Schedule, float] | None = None
    for schedule in schedules:
        start, following = _matches(schedule.cron, now)
        if now - start < schedule.duration:
            found = (schedule.min_replicas, schedule, 0.0)
        elif following - now <= lead:
            found = (schedule.min_replicas, schedule, following - now)
        else:
            continue
        if best is None or found[0] > best[0]:
            best = found
    return best


# cron -> (last match, next match): a memo of a pure function of (cron, now). Ticks between two
# matches reuse it, so croniter (about 150 us a call) runs about once per match, not per tick.
_MATCHES: dict[str, tuple[float, float]] = {}
_MAX_MEMO = 4096


def _matches(cron: str, now: float) -> tuple[float, float]:
    """The last match at or before `now` and the next one after it (-inf / inf where none)."""
    known = _MATCHES.get(cron)
    if known is not None and known[0] <= now < known[1]:
        return known
    # A match at the start of this very minute counts: look back from just after it.
    minute = math.floor(now / 60.0) * 60.0
    try:
        last = float(croniter(cron, minute + 0.5).get_prev(float))
    except CroniterBadDateError:  # no match within croniter's search span: no floor
        last = -math.inf
        following = math.inf
    else:
        try:
            following = float(croniter(cron, last + 0.5).get_next(float))
        except CroniterBadDateError:
            following = math.inf
    if len(_MATCHES) >= _MAX_MEMO:
        _MATCHES.clear()
    _MATCHES[cron] = (last, following)
    return last, following
