"""The oracle provisions each window's need exactly time-to-ready ahead; static-peak sizes for the peak."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs, steady_trace

from inferscale.scaling.capacity import HEADROOM
from inferscale.sim.policies.oracle import Oracle
from inferscale.sim.policies.static_peak import StaticPeak
from inferscale.sim.traces import load_rate_curve

STEP = steady_trace([(0.0, 600.0, 5.0), (600.0, 1200.0, 150.0)])


def test_a_step_at_600_s_is_provisioned_from_600_minus_time_to_ready() -> None:
    ctx = make_ctx(trace=STEP, time_to_ready=180.0, interval=10.0)
    oracle = Oracle(ctx)
    low, high = oracle.replicas_at(0.0), oracle.replicas_at(600.0)
    assert low < high
    timeline = {t: oracle.decide(make_obs(low), float(t), []) for t in range(0, 1200, 10)}
    assert timeline[410] == low
    assert timeline[420] == high  # 420 + 180 = 600: the new replicas are Ready as the step arrives
    # Kept while any window from now to now + ttr needs them; past the trace's end, min_replicas.
    assert all(n == high for t, n in timeline.items() if 420 <= t < 1200)
    assert oracle.decide(make_obs(high), 1200.0, []) == 1


def test_need_covers_the_rate_with_poisson_headroom_at_the_slo() -> None:
    ctx = make_ctx(trace=STEP)
    oracle = Oracle(ctx)
    assert HEADROOM == 0.85 and ctx.capacity_rps(1000, 200) == pytest.approx(28.40, abs=0.01)
    # 9,000 requests in the minute, + sqrt(9,000) = 151.6 req/s over 0.85 x 28.40 = 6.28: 7 (150 alone: 6.21)
    assert oracle.replicas_at(700.0) == 7


def test_the_oracle_lead_is_the_context_time_to_ready() -> None:
    early = Oracle(make_ctx(trace=STEP, time_to_ready=300.0))
    assert early.decide(make_obs(1), 300.0, []) == early.replicas_at(600.0)
    assert early.decide(make_obs(1), 290.0, []) == early.replicas_at(0.0)


def test_the_lead_is_the_longest_time_to_ready_when_given() -> None:
    oracle = Oracle(make_ctx(trace=STEP, time_to_ready=240.0, time_to_ready_max=270.0))
    assert oracle.decide(make_obs(1), 320.0, []) == oracle.replicas_at(0.0)
    assert oracle.decide(make_obs(1), 330.0, []) == oracle.replicas_at(600.0)  # 330 + 270 = 600


def test_a_drop_releases_replicas_only_when_no_window_until_ttr_needs_them() -> None:
    drop = steady_trace([(0.0, 600.0, 150.0), (600.0, 1200.0, 5.0)])
    oracle = Oracle(make_ctx(trace=drop, time_to_ready=180.0, interval=10.0))
    high, low = oracle.replicas_at(0.0), oracle.replicas_at(700.0)
    assert high > low
    assert oracle.decide(make_obs(high), 590.0, []) == high  # still serving the last high window
    assert oracle.decide(make_obs(high), 600.0, []) == low


def test_oracle_runs_on_a_rate_curve_without_requests(shared_traces: Path) -> None:
    curve = tuple(load_rate_curve(shared_traces / "m-small_aggregate_10min.csv", time_scale=10))
    from inferscale.sim.requests import Trace

    ctx = make_ctx(trace=Trace("m-small", (), curve[-1].t + 60.0), curve=curve, max_replicas=500)
    oracle = Oracle(ctx)
    assert oracle.window == 60.0
    assert len(oracle.needs) == 2016
    assert max(oracle.needs) > min(oracle.needs) >= 1


def test_static_peak_serves_the_peak_minute_all_the_time() -> None:
    ctx = make_ctx(trace=STEP)
    peak = StaticPeak(ctx)
    assert (ctx.mean_input_tokens, ctx.mean_output_tokens) == (1000.0, 200.0)
    assert peak.replicas == 7  # 150 req/s over 0.85 x 28.40: 6.21
    assert {peak.decide(make_obs(1), float(t), []) for t in range(0, 1200, 60)} == {peak.replicas}
    capped = StaticPeak(make_ctx(trace=STEP, max_replicas=2))
    assert capped.replicas == 2


def test_the_lean_oracle_drops_the_poisson_pad_and_runs_at_the_headroom_given() -> None:
    ctx = make_ctx(trace=STEP)
    # 150 req/s alone at 100% of 28.40: 5.28 -> 6; at 85% with the pad (151.6 / 24.14): 7
    assert Oracle(ctx, headroom=1.0, poisson_pad=False).replicas_at(700.0) == 6
    assert Oracle(ctx, headroom=HEADROOM, poisson_pad=False).replicas_at(700.0) == 7  # 6.21
    assert Oracle(ctx).replicas_at(700.0) == 7
    with pytest.raises(ValueError, match="headroom"):
        Oracle(ctx, headroom=1.2)
