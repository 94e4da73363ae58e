"""Schedule floors evaluated over `now` in UTC."""

from __future__ import annotations

import datetime as dt

import pytest

from inferscale.scaling import Policy, Schedule, validate_policy
from inferscale.scaling.schedule import active_floor

WEEKDAYS = Schedule("0 9 * * 1-5", 9 * 3600.0, 4)
EVENING = Schedule("0 18 * * *", 3600.0, 7)


def at(day: int, hour: int, minute: int = 0) -> float:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=dt.UTC).timestamp()  # 2026-11-30 is a Monday


@pytest.mark.parametrize(
    ("now", "floor"),
    [
        (at(30, 9, 0), 4),  # the match itself counts
        (at(30, 8, 59), None),
        (at(30, 17, 59), 4),
        (at(30, 18, 0), 7),  # both active: the higher floor
        (at(30, 19, 0), None),  # weekday window ended at 18:00, evening at 19:00
        (at(29, 10, 0), None),  # Sunday
    ],
)
def test_floor_is_active_for_duration_after_each_match(now: float, floor: int | None) -> None:
    found = active_floor((WEEKDAYS, EVENING), now)
    assert (found[0] if found else None) == floor


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (Schedule("61 * * * *", 60.0, 1), "invalid cron expression '61 \\* \\* \\* \\*'"),
        (Schedule("0 0 30 2 *", 60.0, 1), "never matches"),  # February 30th: well-formed, never comes
        (Schedule("0 9 * * *", 0.0, 1), "duration must be positive"),
        (Schedule("0 9 * * *", 60.0, -1), "minReplicas must be >= 0"),
    ],
)
def test_bad_schedules_are_named(schedule: Schedule, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_policy(Policy(min_replicas=1, max_replicas=2, schedules=(schedule,)))


def test_memoised_matches_agree_with_croniter_in_any_order() -> None:
    from croniter import croniter

    times = [at(30, 0) + 7 * 60.0 * i + 13.0 for i in range(300)]
    for now in [*times, *reversed(times)]:
        found = active_floor((Schedule("*/20 8-10 * * *", 300.0, 2),), now)
        last = croniter("*/20 8-10 * * *", now + 1e-3).get_prev(float)
        assert (found is not None) == (now - last < 300.0), now


def test_a_cron_that_never_matches_sets_no_floor_instead_of_raising() -> None:
    # validation refuses it; a policy built without validation must still decide
    assert active_floor((Schedule("0 0 31 4 *", 3600.0, 3), EVENING), at(30, 18, 30)) == (7, EVENING, 0.0)
    assert active_floor((Schedule("0 0 31 4 *", 3600.0, 3),), at(30, 18, 30)) is None


def test_a_floor_starts_one_time_to_ready_before_its_window() -> None:
    # replicas ordered at 09:00 itself would be Ready five minutes into the peak
    lead = 300.0
    assert active_floor((WEEKDAYS,), at(30, 8, 54), lead) is None
    assert active_floor((WEEKDAYS,), at(30, 8, 55), lead) == (4, WEEKDAYS, 300.0)
    assert active_floor((WEEKDAYS,), at(30, 9, 0), lead) == (4, WEEKDAYS, 0.0)
    assert active_floor((WEEKDAYS,), at(30, 18, 0), lead) is None  # ends when it ends: no lead on the way out
    assert active_floor((WEEKDAYS, EVENING), at(30, 17, 56), lead) == (7, EVENING, 240.0)  # the higher, sooner
