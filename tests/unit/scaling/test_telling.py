"""Which decisions are worth a line in the operator's log and a replay's decisions file."""

from __future__ import annotations

import pytest

from inferscale.scaling.telling import HEARTBEAT, worth_telling
from inferscale.scaling.types import Decision, Reason, ScalerState


def decision(replicas: int, current: int, reason: Reason, slo_met: bool | None) -> Decision:
    return Decision(replicas, current, reason, "m", (), (), True, slo_met, None, 240.0, ScalerState())


HOLD = ("ScaleUpInProgress", 4)


@pytest.mark.parametrize(
    ("d", "before", "told_at", "expected"),
    [
        (decision(5, 4, Reason.CAPACITY, True), ("CapacityForecast", 5), 95.0, True),  # a scale is always told
        (decision(4, 4, Reason.SCALE_UP_PENDING, True), None, None, True),  # the first
        (decision(4, 4, Reason.SCALE_UP_PENDING, True), ("ScaleDownStabilizing", 4), 95.0, True),  # a new reason
        (decision(4, 4, Reason.SCALE_UP_PENDING, True), ("ScaleUpInProgress", 5), 95.0, True),  # a new count
        (decision(4, 4, Reason.SCALE_UP_PENDING, True), HOLD, 0.0, False),  # a steady hold: once
        (decision(4, 4, Reason.SCALE_UP_PENDING, None), HOLD, 0.0, False),  # latency unknown: not a miss
        (decision(4, 4, Reason.SCALE_UP_PENDING, False), HOLD, 100.0 - HEARTBEAT + 1, False),
        (decision(4, 4, Reason.SCALE_UP_PENDING, False), HOLD, 100.0 - HEARTBEAT, True),  # a minute on, missed
        (decision(4, 4, Reason.SCALE_UP_PENDING, False), HOLD, 105.0, True),  # a clock stepped back
        (decision(4, 4, Reason.SCALE_UP_PENDING, False), HOLD, None, True),  # a restarted operator
    ],
)
def test_a_decision_is_told_on_news_and_once_a_minute_while_the_slo_is_missed(
    d: Decision, before: tuple[str, int] | None, told_at: float | None, expected: bool
) -> None:
    assert worth_telling(d, before, told_at, 100.0) is expected
