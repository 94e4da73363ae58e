"""Online capacity learning: bounded steps, bounds from their side only, bounded distance from the prior."""

from __future__ import annotations

import pytest

from inferscale.scaling import capacity
from inferscale.scaling.capacity import ALPHA, MAX_CHANGE, PRIOR_SPAN, Evidence, learn
from inferscale.scaling.types import ScalerState

AT, LOWER, UPPER = Evidence.AT_CAPACITY, Evidence.LOWER_BOUND, Evidence.UPPER_BOUND


@pytest.mark.parametrize("kind", list(Evidence))
def test_first_sample_without_prior_is_taken_as_is(kind: Evidence) -> None:
    assert learn(None, None, request_rate=8.0, ready=4, kind=kind) == 2.0


def test_ema_moves_by_alpha_but_at_most_max_step() -> None:
    assert learn(2.0, None, request_rate=8.8, ready=4, kind=AT) == pytest.approx(2.0 + ALPHA * 0.2)
    assert learn(2.0, None, request_rate=80.0, ready=4, kind=AT) == pytest.approx(2.0 * (1 + MAX_CHANGE))
    # Downward, the EMA alone is already within the bound (a sample is never negative).
    assert learn(2.0, None, request_rate=0.4, ready=4, kind=AT) == pytest.approx(2.0 + ALPHA * (0.1 - 2.0))


def test_a_bound_moves_the_estimate_only_from_its_side() -> None:
    # A rate carried within the SLO without a backlog: capacity is at least that much.
    assert learn(2.0, None, request_rate=4.0, ready=4, kind=LOWER) == 2.0
    assert learn(2.0, None, request_rate=8.8, ready=4, kind=LOWER) == pytest.approx(2.0 + ALPHA * 0.2)
    # All the replicas give, with the SLO missed behind a backlog: capacity at the SLO is below it.
    assert learn(2.0, None, request_rate=12.0, ready=4, kind=UPPER) == 2.0
    assert learn(2.0, None, request_rate=4.0, ready=4, kind=UPPER) == pytest.approx(2.0 - ALPHA * 1.0)


def test_estimate_stays_within_a_factor_of_the_prior() -> None:
    estimate = 1.0
    for _ in range(500):
        estimate = learn(estimate, 1.0, request_rate=400.0, ready=4, kind=AT)
    assert estimate == pytest.approx(PRIOR_SPAN)
    for _ in range(500):
        estimate = learn(estimate, 1.0, request_rate=0.04, ready=4, kind=UPPER)
    assert estimate == pytest.approx(1.0 / PRIOR_SPAN)


def test_the_learned_figure_follows_the_prior_through_a_change_of_lengths() -> None:
    # Learned at 0.8x a prior of 10 req/s; requests get twice as long and the prior halves: the
    # estimate is 0.8 x 5, not the 8 req/s learned on short requests.
    state = ScalerState(capacity_rps=8.0, capacity_factor=0.8)
    rate, learned = capacity.estimate(state, 5.0)
    assert rate == pytest.approx(4.0) and learned
    assert capacity.estimate(state, None) == (8.0, True)  # no prior: the rate itself
    assert capacity.estimate(ScalerState(capacity_rps=8.0), 5.0) == (8.0, True)  # learned before factors
    assert capacity.estimate(ScalerState(), 5.0) == (5.0, False)
    assert capacity.estimate(ScalerState(), float("nan")) == (None, False)
    rps, factor = capacity.learned_state(state, 5.0, 4.5)
    assert rps == 4.5 and factor == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("demand", "current", "expected"),
    [
        (54.0, 5, 6),  # needs 5.29: a sixth replica at once, the dead-band does not eat the headroom
        (214.0, 20, 21),  # needs 20.98, within 10% above 20: still one more
        (51.0, 5, 5),  # needs exactly 5
        (193.0, 20, 20),  # needs 18.92, within 10% below 20: hold
        (183.0, 20, 18),  # needs 17.94: scale down
    ],
)
def test_capacity_dead_band_only_holds_a_scale_down(demand: float, current: int, expected: int) -> None:
    rec, _ = capacity.recommend(demand, 12.0, True, 180.0, 0.1, current)  # 10.2 req/s per replica at 85%
    assert rec.replicas == expected
