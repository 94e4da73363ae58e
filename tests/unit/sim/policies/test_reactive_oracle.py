"""The reactive oracle: each window's need from the moment it starts, no lead; a margin on the rate."""

from __future__ import annotations

import math

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs, steady_trace

from inferscale.sim.policies import make_policy
from inferscale.sim.policies.oracle import Oracle
from inferscale.sim.policies.reactive_oracle import ReactiveOracle

STEP = steady_trace([(0.0, 600.0, 5.0), (600.0, 1200.0, 150.0), (1200.0, 1800.0, 5.0)])


def test_a_step_is_asked_for_when_it_starts_not_a_time_to_ready_ahead() -> None:
    ctx = make_ctx(trace=STEP, time_to_ready=180.0, interval=10.0)
    reactive, oracle = ReactiveOracle(ctx), Oracle(ctx)
    low, high = reactive.replicas_at(0.0), reactive.replicas_at(600.0)
    assert low < high
    timeline = {t: reactive.decide(make_obs(low), float(t), []) for t in range(0, 1800, 10)}
    assert timeline[420] == low and oracle.decide(make_obs(low), 420.0, []) == high  # the oracle already leads
    assert timeline[590] == low  # its decision holds until 600, when the step arrives: that is the future
    assert timeline[600] == high
    # released as soon as no window before the next decision needs them
    assert timeline[1190] == high and timeline[1200] == low


def test_the_margin_multiplies_the_rate_it_sizes_for() -> None:
    ctx = make_ctx(trace=STEP)
    # 151.6 req/s (test_oracle) x margin over 0.85 x 28.40 req/s: 6.28 -> 7, x 1.3: 8.16 -> 9
    assert [ReactiveOracle(ctx, margin).replicas_at(700.0) for margin in (1.0, 1.3)] == [7, 9]
    assert ReactiveOracle(ctx).replicas_at(700.0) == Oracle(ctx).replicas_at(700.0)


@pytest.mark.parametrize("margin", [0.9, math.nan, math.inf])
def test_a_margin_below_one_or_not_finite_is_refused(margin: float) -> None:
    with pytest.raises(ValueError, match="margin"):
        ReactiveOracle(make_ctx(trace=STEP), margin)


def test_it_is_a_policy_the_simulator_can_name() -> None:
    assert isinstance(make_policy("reactive-oracle", make_ctx(trace=STEP)), ReactiveOracle)
