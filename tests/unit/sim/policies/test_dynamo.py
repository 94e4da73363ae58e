"""Dynamo SLA planner: predicted load / engine capacity at the SLA, every 180 s."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs, steady_trace

from inferscale.scaling.types import RateSample
from inferscale.sim.policies.dynamo import DynamoSLA, KalmanTrend


def busy(rate: float) -> dict[str, Any]:
    return {"request_rate": rate, "prompt_token_rate": rate * 1000.0, "generation_token_rate": rate * 200.0}


def test_acts_every_180_s_on_load_over_capacity_at_the_sla() -> None:
    ctx = make_ctx()
    dyn = DynamoSLA(ctx)
    assert dyn.adjustment_interval == 180.0
    assert dyn.interval == 60.0  # it samples the 1-minute arrival rate in between
    history = [RateSample(float(t), 100.0) for t in (60, 120, 180)]
    n = dyn.decide(make_obs(2, **busy(100.0)), 180.0, history)
    assert n == math.ceil(100.0 / ctx.capacity_rps(1000.0, 200.0))
    assert n > 2
    assert dyn.decide(make_obs(n, **busy(400.0)), 240.0, history) == n  # between adjustments: hold
    assert dyn.decide(make_obs(n, **busy(400.0)), 300.0, history) == n
    assert dyn.decide(make_obs(n, **busy(400.0)), 360.0, history) > n


def test_the_first_adjustment_is_on_the_180_s_grid() -> None:
    dyn = DynamoSLA(make_ctx())
    assert dyn.decide(make_obs(2, arrival_rate=100.0, **busy(100.0)), 120.0, []) == 2
    assert dyn.decide(make_obs(2, arrival_rate=100.0, **busy(100.0)), 180.0, []) > 2


def test_demand_is_offered_load_not_completions() -> None:
    """planner traffic_metrics.py get_avg_request_count reads increase(dynamo_frontend_requests_started_total):
    a saturated fleet completing 450 rps of 744 offered is sized for the 744."""
    ctx = make_ctx(trace=steady_trace([(0.0, 600.0, 5.0)], 1155, 211), max_replicas=69)
    completed, offered = 450.0, 744.0
    obs = make_obs(
        13,
        request_rate=completed,
        prompt_token_rate=completed * 1155,
        generation_token_rate=completed * 211,
        arrival_rate=offered,
    )
    history = [RateSample(t, completed) for t in (60.0, 120.0, 180.0)]
    assert DynamoSLA(ctx).decide(obs, 180.0, history) == ctx.replicas_for(offered, 1155, 211)
    without = replace(obs, arrival_rate=None)  # the operator's observation: completions stand in
    assert DynamoSLA(ctx).decide(without, 180.0, history) == ctx.replicas_for(completed, 1155, 211)
    assert ctx.replicas_for(completed, 1155, 211) < ctx.replicas_for(offered, 1155, 211)


def test_offered_load_is_averaged_over_the_interval() -> None:
    ctx = make_ctx()
    dyn = DynamoSLA(ctx)
    for t, rate in ((60.0, 10.0), (120.0, 60.0), (180.0, 80.0)):  # three 1-minute rates tile (0, 180]
        n = dyn.decide(make_obs(1, arrival_rate=rate, **busy(5.0)), t, [])
    assert n == ctx.replicas_for(50.0, 1000.0, 200.0)  # (10 + 60 + 80) / 3


def test_rate_comes_from_the_last_interval_of_rate_history() -> None:
    ctx = make_ctx()
    dyn = DynamoSLA(ctx)
    history = [RateSample(60.0, 10.0), RateSample(240.0, 60.0), RateSample(300.0, 60.0), RateSample(360.0, 60.0)]
    assert dyn.decide(make_obs(1, **busy(60.0)), 360.0, history) == math.ceil(60.0 / ctx.capacity_rps(1000, 200))


def test_missing_metrics_skip_the_adjustment() -> None:
    dyn = DynamoSLA(make_ctx())
    assert dyn.decide(make_obs(4), 180.0, []) == 4
    assert dyn.decide(make_obs(4, request_rate=0.0), 360.0, []) == 4  # no traffic: stays (Dynamo #6985)


def test_kalman_predictor_tracks_a_constant_and_extrapolates_a_trend() -> None:
    flat = KalmanTrend()
    for _ in range(10):
        flat.update(500.0)
    assert flat.predict() == pytest.approx(500.0, rel=1e-3)
    ramp = KalmanTrend()
    for i in range(4):
        ramp.update(100.0 * i)
    assert ramp.predict() == 300.0  # fewer than 5 points: the last value
    for i in range(4, 12):
        ramp.update(100.0 * i)
    assert ramp.predict() == pytest.approx(1200.0, rel=0.05)
