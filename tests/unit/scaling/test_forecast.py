"""The rate forecaster: method by history length, the recent-peak floor, bounded growth."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferscale.scaling import RateSample, forecast
from inferscale.scaling.forecast import HISTORY_STALE, MAX_GROWTH, PEAK_WINDOW

DAY = 86400.0


def series(values: list[float], step: float = 60.0, start: float = 0.0) -> list[RateSample]:
    return [RateSample(start + i * step, v) for i, v in enumerate(values)]


def test_no_history_forecasts_nothing() -> None:
    f = forecast([], now=100.0, horizon=180.0)
    assert (f.rps, f.method) == (None, "none")


def test_a_history_that_stopped_forecasts_nothing_rather_than_its_old_peak() -> None:
    ramp = series([10.0 + 0.5 * i for i in range(40)])  # then Prometheus stopped answering the range query
    last = ramp[-1].at
    within = forecast(ramp, now=last + HISTORY_STALE, horizon=180.0)
    assert within.method == "holt" and within.rps is not None and within.rps > 29.5
    stopped = forecast(ramp, now=last + HISTORY_STALE + 1.0, horizon=180.0)
    assert (stopped.rps, stopped.method, stopped.recent_peak) == (None, "none", None)


def test_short_history_forecasts_the_recent_peak() -> None:
    f = forecast(series([1.0, 5.0, 2.0]), now=120.0, horizon=180.0)
    assert (f.rps, f.method) == (5.0, "peak")


def test_a_rising_history_shorter_than_ten_minutes_is_no_trend() -> None:
    # 8 samples, enough for Holt, but 7 minutes of them: noise, so the peak of the last 2 minutes (17)
    ramp = series([10.0 + i for i in range(8)])
    f = forecast(ramp, now=420.0, horizon=180.0)
    assert (f.rps, f.method) == (17.0, "peak")
    # the same ramp for 10 minutes is a trend, extrapolated above the peak
    longer = forecast(series([10.0 + i for i in range(11)]), now=600.0, horizon=180.0)
    assert longer.method == "holt" and longer.rps is not None and longer.rps > 20.0


def test_trend_is_extrapolated_over_the_horizon() -> None:
    ramp = series([10.0 + 0.5 * i for i in range(40)])  # +0.5 req/s per minute
    now = ramp[-1].at
    f = forecast(ramp, now=now, horizon=600.0)
    assert f.method == "holt"
    assert f.rps == pytest.approx(29.5 + 0.5 * 10, rel=0.05)


def test_a_falling_trend_never_forecasts_below_the_recent_peak() -> None:
    fall = series([50.0 - i for i in range(40)])
    now = fall[-1].at
    f = forecast(fall, now=now, horizon=600.0)
    peak = max(s.value for s in fall if s.at >= now - PEAK_WINDOW)
    assert f.rps == peak and f.recent_peak == peak


def test_trend_growth_is_capped() -> None:
    spike = series([1.0] * 30 + [1.0 + 20.0 * i for i in range(1, 8)])
    f = forecast(spike, now=spike[-1].at, horizon=3600.0)
    assert f.rps is not None and f.rps <= MAX_GROWTH * f.recent_peak  # type: ignore[operator]


def daily(t: float) -> float:
    return 20.0 + 10.0 * math.sin(2 * math.pi * t / DAY)


def test_seasonal_profile_anticipates_the_daily_ramp() -> None:
    history = [RateSample(t, daily(t)) for t in range(0, int(3 * DAY), 60)]
    now = 2 * DAY + DAY / 4 - 3600.0  # rising flank, an hour before the daily peak
    f = forecast(history, now=now, horizon=1800.0)
    assert f.method == "seasonal"
    assert f.rps == pytest.approx(daily(now + 1800.0), abs=0.5)


def test_seasonal_growth_is_capped_like_the_trend() -> None:
    # an incident yesterday (100x for 20 minutes) is no reason to ask for 100x today at the same hour
    quiet, incident_at = 2.0, DAY + 43200.0
    history = [
        RateSample(t, 200.0 if incident_at <= t < incident_at + 1200.0 else quiet) for t in range(0, int(2 * DAY), 60)
    ]
    now = 2 * DAY + 43200.0 - 300.0
    history += [RateSample(t, quiet) for t in range(int(2 * DAY), int(now) + 1, 60)]
    f = forecast(history, now=now, horizon=600.0)
    assert f.method == "seasonal"
    assert f.rps == pytest.approx(MAX_GROWTH * quiet)


def test_seasonal_uses_only_samples_up_to_now() -> None:
    history = [RateSample(t, daily(t)) for t in range(0, int(3 * DAY), 60)]
    now = 2.5 * DAY
    with_future = forecast(history, now=now, horizon=900.0)
    without = forecast([s for s in history if s.at <= now], now=now, horizon=900.0)
    assert with_future == without


def test_non_finite_samples_are_ignored() -> None:
    f = forecast(series([2.0, math.nan, math.inf, 3.0]), now=180.0, horizon=60.0)
    assert f.rps == 3.0


@pytest.mark.parametrize(("now", "horizon"), [(math.nan, 1.0), (0.0, -1.0), (0.0, math.inf)])
def test_bad_arguments_raise(now: float, horizon: float) -> None:
    with pytest.raises(ValueError, match="forecast needs"):
        forecast(series([1.0]), now=now, horizon=horizon)


@settings(max_examples=200)
@given(
    st.lists(
        st.floats(min_value=0.0, max_value=1e4) | st.floats(min_value=1e300, max_value=1e308), min_size=1, max_size=200
    ),
    st.floats(min_value=0.0, max_value=3600.0),
)
def test_never_below_the_recent_peak_and_always_finite(values: list[float], horizon: float) -> None:
    h = series(values)
    now = h[-1].at
    f = forecast(h, now=now, horizon=horizon)
    recent = [s.value for s in h if s.at >= now - PEAK_WINDOW]
    assert f.rps is not None and math.isfinite(f.rps)
    assert f.rps >= max(recent)


def test_rates_near_the_largest_float_forecast_a_finite_rate() -> None:
    # 4x the peak, or the trend over an hour, overflowed to inf, which no status write can carry
    h = series([1e308 * (0.5 + i / 100) for i in range(50)])
    f = forecast(h, now=h[-1].at, horizon=3600.0)
    assert f.method == "holt" and f.rps is not None and math.isfinite(f.rps)


@pytest.mark.parametrize("gap", [1800.0, 3600.0])
def test_a_trend_that_ended_before_a_gap_is_not_carried_across_it(gap: float) -> None:
    ramp = series([10 + 1.5 * i for i in range(61)])  # 10 -> 100 req/s, then Prometheus had nothing for a while
    h = [*ramp, RateSample(ramp[-1].at + gap + 60.0, 100.0)]  # flat at 100 on both sides of the gap
    f = forecast(h, now=h[-1].at, horizon=180.0)
    assert f.method == "holt" and f.rps == pytest.approx(100.0)  # 127 and 150 when the slope crossed the gap
    missed = [s for i, s in enumerate(ramp) if i % 3]  # a missed sample here and there is no gap: the trend holds
    assert forecast(missed, now=missed[-1].at, horizon=180.0).rps > 100.0


def test_a_projection_under_the_recent_peak_is_told_as_the_peak() -> None:
    # a fall: Holt projects it on, the floor of the last 2 minutes' peak wins, and the method says which did
    fall = series([100.0 - 2.0 * i for i in range(30)])
    f = forecast(fall, now=fall[-1].at, horizon=600.0)
    assert (f.rps, f.method) == (f.recent_peak, "peak")
    rise = series([100.0 + 2.0 * i for i in range(30)])
    f = forecast(rise, now=rise[-1].at, horizon=600.0)
    assert f.method == "holt" and f.rps is not None and f.recent_peak is not None and f.rps > f.recent_peak
