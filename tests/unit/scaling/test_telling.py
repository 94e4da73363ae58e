"""Which decisions are worth a line in the operator's log and a replay's decisions file."""

from __future__ import annotations

import pytest

from inferscale.scaling.telling import HEARTBEAT, Told, worth_telling
from inferscale.scaling.types import Decision, Reason, ScalerState


def decision(replicas: int, current: int, reason: Reason, slo_met: bool | None) -> Decision:
    return Decision(replicas, current, reason, "m", (), (), True, slo_met, None, 240.0, ScalerState())


def told(reason: Reason, replicas: int = 4, slo_met: bool | None = True, at: float = 95.0) -> Told:
    return Told(reason.value, replicas, slo_met, at)


PENDING = Reason.SCALE_UP_PENDING


@pytest.mark.parametrize(
    ("d", "before", "expected"),
    [
        (decision(5, 4, Reason.CAPACITY, True), told(Reason.CAPACITY, 5), True),  # a scale is always told
        (decision(4, 4, PENDING, True), None, True),  # the first, or the first of a new process
        (decision(4, 4, PENDING, True), told(PENDING, 5), True),  # a count someone else set
        (decision(4, 4, PENDING, True), told(PENDING), False),  # a steady hold: once
        # a routine hold whose reason flips as the capacity swings: the status's, not the log's
        (decision(4, 4, PENDING, True), told(Reason.STABILIZING), False),
        (decision(4, 4, Reason.WITHIN_TOLERANCE, True), told(Reason.CONSOLIDATION_REFUSED), False),
        (decision(4, 4, Reason.STABILIZING, True), told(Reason.CAPACITY), False),  # the window after a scale
        # a reason that is not routine, as it begins and as it ends
        (decision(4, 4, Reason.METRICS_MISSING, True), told(Reason.WITHIN_TOLERANCE), True),
        (decision(4, 4, Reason.WITHIN_TOLERANCE, True), told(Reason.METRICS_MISSING), True),
        (decision(4, 4, Reason.MAX_REPLICAS, True), told(Reason.KV_CACHE), True),
        (decision(4, 4, Reason.STABILIZING, True), told(Reason.RATE_LIMITED), True),  # the limit lets go
        (decision(4, 4, Reason.STABILIZING, True), told(Reason.NEWLY_WATCHED), True),  # the first minute ends
        # a breach that begins or ends, whatever the reason
        (decision(4, 4, PENDING, False), told(PENDING, at=99.0), True),
        (decision(4, 4, PENDING, True), told(PENDING, slo_met=False, at=99.0), True),
        (decision(4, 4, PENDING, None), told(PENDING, slo_met=False, at=99.0), True),  # unknown is not a miss
        (decision(4, 4, PENDING, None), told(PENDING), False),
        # while it lasts: once a minute
        (decision(4, 4, PENDING, False), told(Reason.STABILIZING, slo_met=False, at=100.0 - HEARTBEAT + 1), False),
        (decision(4, 4, PENDING, False), told(PENDING, slo_met=False, at=100.0 - HEARTBEAT), True),
        (decision(4, 4, PENDING, False), told(PENDING, slo_met=False, at=105.0), True),  # a clock stepped back
    ],
)
def test_a_decision_is_told_on_news_and_once_a_minute_while_the_slo_is_missed(
    d: Decision, before: Told | None, expected: bool
) -> None:
    assert worth_telling(d, before, 100.0) is expected


def test_every_reason_but_the_routine_holds_is_news() -> None:
    news = {r for r in Reason if worth_telling(decision(4, 4, r, True), told(Reason.WITHIN_TOLERANCE), 100.0)}
    # an SLO's breach, a limit or a bound that holds the count, the metrics, the first minute of a watch
    assert news == {
        Reason.SLO_TTFT,
        Reason.SLO_ITL,
        Reason.SLO_TPOT,
        Reason.NEWLY_WATCHED,
        Reason.RATE_LIMITED,
        Reason.MIN_REPLICAS,
        Reason.MAX_REPLICAS,
        Reason.METRICS_MISSING,
        Reason.METRICS_STALE,
    }
