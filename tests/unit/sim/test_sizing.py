"""Sizing a rate curve window by window at the SLO (`inferscale plan --trace`)."""

from __future__ import annotations

import math

import pytest

from inferscale.perf import replica_capacity_rps, replica_profile
from inferscale.sim.sizing import mean_lengths, size_curve
from inferscale.sim.traces import RatePoint

PROFILE = replica_profile("llama-3.1-8b", "h100-80gb")
SLO = (0.5, 0.05)


def capacity(input_tokens: float, output_tokens: float) -> float:
    return replica_capacity_rps(PROFILE, input_tokens, output_tokens, *SLO)


def test_each_window_is_sized_at_its_rate_and_the_peak_is_held_for_the_whole_span() -> None:
    c = capacity(1000, 200)
    curve = [RatePoint(0.0, 2.5 * c, 1000, 200), RatePoint(600.0, 0.5 * c, 1000, 200)]
    sizing = size_curve(PROFILE, curve, 900.0, *SLO)
    assert [w.replicas for w in sizing.windows] == [3, 1]
    assert [w.length for w in sizing.windows] == [600.0, 300.0]  # the last window ends at the span
    assert sizing.peak.t == 0.0
    assert sizing.replica_hours_following == pytest.approx((3 * 600 + 1 * 300) / 3600)
    assert sizing.replica_hours_at_peak == pytest.approx(3 * 900 / 3600)
    assert sizing.requests == pytest.approx(2.5 * c * 600 + 0.5 * c * 300)


def test_a_window_of_longer_prompts_needs_more_replicas_at_the_same_rate() -> None:
    rate = 2 * capacity(1000, 200)
    sizing = size_curve(PROFILE, [RatePoint(0.0, rate, 1000, 200), RatePoint(60.0, rate, 4000, 200)], 120.0, *SLO)
    short, long = sizing.windows
    assert short.replicas == 2 and long.replicas is not None and long.replicas > 2
    assert sizing.peak is long


def test_lengths_a_replica_cannot_serve_within_the_slo_are_unknown_not_zero() -> None:
    assert capacity(100_000, 10) == 0.0  # a 100k-token prompt takes longer than 500 ms on its own
    curve = [RatePoint(0.0, 10.0, 1000, 200), RatePoint(60.0, 1.0, 100_000, 10)]
    sizing = size_curve(PROFILE, curve, 120.0, *SLO)
    assert sizing.windows[1].replicas is None and sizing.unattainable == (sizing.windows[1],)
    assert sizing.replica_hours_following == pytest.approx(sizing.windows[0].replicas * 60 / 3600)  # type: ignore[operator]


def test_an_idle_window_needs_nothing_and_its_unknown_lengths_do_not_count() -> None:
    curve = [RatePoint(0.0, 0.0, None, None), RatePoint(60.0, 4.0, 1000, 100), RatePoint(120.0, 1.0, 3000, 300)]
    sizing = size_curve(PROFILE, curve, 180.0, *SLO)
    assert sizing.windows[0].replicas == 0
    # weighted by requests: 240 of 1,000 tokens, 60 of 3,000
    assert mean_lengths(curve, 180.0) == pytest.approx(((240 * 1000 + 60 * 3000) / 300, (240 * 100 + 60 * 300) / 300))
    assert math.isclose(sizing.mean_input_tokens, 1400.0)


def test_a_curve_without_requests_is_refused() -> None:
    with pytest.raises(ValueError, match="holds no request"):
        size_curve(PROFILE, [RatePoint(0.0, 0.0, None, None)], 60.0, *SLO)


def test_each_window_is_sized_at_its_exact_lengths_as_plan_rps_sizes_one_load() -> None:
    # odd lengths, which a rounded length grid would move: the count must be what `plan --rps` gives
    profile = replica_profile("llama-3.1-70b", "h100-80gb", 2)
    rate = 42.25
    sizing = size_curve(profile, [RatePoint(0.0, rate, 1444.6, 135.0)], 60.0, *SLO)
    assert sizing.windows[0].replicas == math.ceil(rate / replica_capacity_rps(profile, 1444.6, 135.0, *SLO))


def test_a_window_longer_than_the_context_window_is_not_served_even_without_an_slo() -> None:
    curve = [RatePoint(0.0, 1.0, 1000, 100), RatePoint(60.0, 1.0, 200_000, 100)]
    sizing = size_curve(PROFILE, curve, 120.0, None, None)
    assert [w.replicas for w in sizing.windows] == [1, None]


def test_when_no_window_can_be_served_there_is_no_figure() -> None:
    sizing = size_curve(PROFILE, [RatePoint(0.0, 5.0, 1000, 100)], 60.0, 0.5, 0.001)
    assert sizing.peak.replicas is None
    assert sizing.replica_hours_at_peak is None and sizing.replica_hours_following is None
