"""Request-rate forecast at `now + horizon` from a rate history, stateless and cheap.

Three methods, chosen by how much history there is:

- ``seasonal``: history spans at least two seasons. The forecast is the current level plus the
  change the same time of day saw over the horizon in past seasons (median over up to
  `MAX_SEASONS`), i.e. Holt's level with an additive seasonal profile, capped like the trend: with
  two days kept the median is the mean of two, so one incident yesterday would otherwise be half
  forecast again today. Only the samples near the needed instants are read (binary search), so the
  cost does not grow with weeks of history.
- ``holt``: at least `MIN_TREND_SAMPLES` samples over `MIN_TREND_SPAN`: Holt's linear trend on the
  last `TREND_SAMPLES` samples, its growth capped at `MAX_GROWTH` × the recent peak so one noisy
  ramp cannot ask for an unbounded fleet.
- ``peak``: anything less: the recent peak.

Whatever the method, the result is never below the peak of the last `PEAK_WINDOW` seconds:
under-forecasting costs SLO, over-forecasting costs a little GPU time. Where that floor is the forecast, its
method is ``peak``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from inferscale.scaling.types import RateSample

PEAK_WINDOW = 120.0  # seconds of recent history whose peak is a floor on the forecast
MIN_TREND_SAMPLES = 5
MIN_TREND_SPAN = 600.0  # seconds: a shorter history is noise, not a trend
TREND_SAMPLES = 30  # Holt runs on the newest samples only: old trends are not today's trend
HOLT_ALPHA = 0.5  # level smoothing; history is already a 1-minute rate, so react fast
HOLT_BETA = 0.2  # trend smoothing: slower, one bump is not a trend
MAX_GROWTH = 4.0  # neither trend nor season may forecast more than this multiple of the recent peak
# A step between samples over this many times their median spacing is a gap (Prometheus had no data): Holt
# starts again after it, at the level it finds, rather than extend the slope of before it across the gap.
GAP_STEPS = 5
MAX_SEASONS = 7  # past seasons looked at for the seasonal profile
SEASON_PROBE = 300.0  # half-width of the window averaged around each past instant

# Seconds of rate history the operator keeps per Deployment: two daily seasons and an hour, so that a missed
# or extra sample never leaves the seasonal method short of its two seasons. The simulator hands the policy
# no more than this, so that a replay forecasts from what the operator would have, not from weeks of it.
HISTORY_KEPT = 2 * 86400.0 + 3600.0
# A history whose newest sample is older than this has stopped (the operator's range queries fail while its
# instant ones answer, or a replay's Prometheus is down): its recent peak and trend are not today's, and the
# forecast is unknown rather than the old peak. Ten of the operator's one-minute points.
HISTORY_STALE = 600.0

Method = Literal["seasonal", "holt", "peak", "none"]


@dataclass(frozen=True)
class Forecast:
    rps: float | None  # None when the history holds no usable sample
    method: Method
    horizon: float
    recent_peak: float | None


def forecast(history: Sequence[RateSample], now: float, horizon: float, season: float = 86400.0) -> Forecast:
    """Forecast the request rate at `now + horizon`. `history` is sorted by time, oldest first;
    samples after `now` and non-finite values are ignored, and a history that stopped `HISTORY_STALE` ago
    forecasts nothing."""
    if not (math.isfinite(now) and math.isfinite(horizon) and horizon >= 0):
        raise ValueError(f"forecast needs a finite now and a horizon >= 0, got now={now!r}, horizon={horizon!r}")
    if not (math.isfinite(season) and season > 0):
        raise ValueError(f"forecast season must be a positive number of seconds, got {season!r}")
    end = bisect_right(history, now, key=_at)
    if end == 0 or history[end - 1].at < now - HISTORY_STALE:
        return Forecast(None, "none", horizon, None)
    peak = _recent_peak(history, end, now)
    if peak is None:
        return Forecast(None, "none", horizon, None)
    span = now - history[0].at
    recent = _finite_tail(history, end, TREND_SAMPLES)
    level, trend = _holt(recent)
    if span >= 2 * season:
        profile = _seasonal_change(history, end, now, horizon, season)
        if profile is not None:
            return _bounded(level + profile, peak, "seasonal", horizon)
    if len(recent) >= MIN_TREND_SAMPLES and span >= MIN_TREND_SPAN:
        return _bounded(level + trend * horizon, peak, "holt", horizon)
    return Forecast(peak, "peak", horizon, peak)


def _bounded(projected: float, peak: float, method: Method, horizon: float) -> Forecast:
    """Between the recent peak and `MAX_GROWTH` times it; the peak where the sum overflowed (rates near the
    largest float), which no status or metric could carry. A projection below the peak is the peak's
    forecast, and says so: the decision that reads it must not credit a trend for the last minutes' figure."""
    bounded = min(projected, MAX_GROWTH * peak)
    if not math.isfinite(bounded) or bounded < peak:
        return Forecast(peak, "peak", horizon, peak)
    return Forecast(bounded, method, horizon, peak)


def _at(sample: RateSample) -> float:
    return sample.at


def _recent_peak(history: Sequence[RateSample], end: int, now: float) -> float | None:
    start = bisect_left(history, now - PEAK_WINDOW, key=_at, hi=end)
    window = [s.value for s in history[start:end] if math.isfinite(s.value) and s.value >= 0]
    if window:
        return max(window)
    # Nothing in the window: the newest usable sample is the best we know.
    tail = _finite_tail(history, end, 1)
    return tail[-1][1] if tail else None


def _finite_tail(history: Sequence[RateSample], end: int, count: int) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    i = end - 1
    while i >= 0 and len(out) < count:
        s = history[i]
        if math.isfinite(s.value) and s.value >= 0 and math.isfinite(s.at):
            out.append((s.at, s.value))
        i -= 1
    out.reverse()
    return out


def _holt(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Holt's linear method on irregularly spaced points: level and trend per second."""
    if not points:
        return 0.0, 0.0
    spacings = sorted(b - a for (a, _), (b, _) in itertools.pairwise(points) if b > a)
    gap = GAP_STEPS * spacings[len(spacings) // 2] if spacings else math.inf
    level, trend = points[0][1], 0.0
    prev_at = points[0][0]
    for at, value in points[1:]:
        dt = at - prev_at
        if dt <= 0:
            continue
        if dt > gap:
            level, trend, prev_at = value, 0.0, at
            continue
        predicted = level + trend * dt
        new_level = HOLT_ALPHA * value + (1 - HOLT_ALPHA) * predicted
        trend = HOLT_BETA * (new_level - level) / dt + (1 - HOLT_BETA) * trend
        level, prev_at = new_level, at
    return level, trend


def _mean_near(history: Sequence[RateSample], end: int, t: float) -> float | None:
    lo = bisect_left(history, t - SEASON_PROBE, key=_at, hi=end)
    hi = bisect_right(history, t + SEASON_PROBE, key=_at, lo=lo, hi=end)
    values = [s.value for s in history[lo:hi] if math.isfinite(s.value) and s.value >= 0]
    return sum(values) / len(values) if values else None


def _seasonal_change(
    history: Sequence[RateSample], end: int, now: float, horizon: float, season: float
) -> float | None:
    """Median over past seasons of (rate at now+horizon) - (rate at now), one season back each."""
    changes = []
    for k in range(1, MAX_SEASONS + 1):
        base = now - k * season
        if base - SEASON_PROBE < history[0].at:
            break
        then = _mean_near(history, end, base)
        later = _mean_near(history, end, base + horizon)
        if then is not None and later is not None:
            changes.append(later - then)
    return statistics.median(changes) if changes else None
