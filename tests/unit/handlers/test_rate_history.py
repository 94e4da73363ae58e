"""The collector's compact rate history, read by the forecaster in place."""

import math
import random

import pytest

from inferscale.handlers.rate_history import RateHistory
from inferscale.scaling.forecast import forecast
from inferscale.scaling.types import RateSample


def test_it_keeps_the_newest_points_and_skips_repeats_of_what_it_holds() -> None:
    history = RateHistory(3)
    history.extend([(60.0, 1.0), (120.0, 2.0)])
    history.extend([(120.0, 9.0), (180.0, 3.0), (240.0, 4.0)])  # the range query repeats its start
    assert list(history) == [RateSample(120.0, 2.0), RateSample(180.0, 3.0), RateSample(240.0, 4.0)]
    assert history[0] == RateSample(120.0, 2.0) and history[-1] == RateSample(240.0, 4.0)
    assert history[1:] == [RateSample(180.0, 3.0), RateSample(240.0, 4.0)]
    with pytest.raises(IndexError):
        history[3]


def test_an_empty_history_is_falsy_and_a_size_below_one_is_refused() -> None:
    assert not RateHistory(5)
    with pytest.raises(ValueError, match="at least one point"):
        RateHistory(0)


def test_the_forecast_read_in_place_equals_the_forecast_over_a_copied_list() -> None:
    rng = random.Random(7)
    points = [(60.0 * i, 50.0 + 30.0 * math.sin(i / 229.0) + rng.uniform(-5, 5)) for i in range(3 * 1440)]
    history = RateHistory(2 * 1440 + 2)
    history.extend(points)
    copied = [RateSample(at, value) for at, value in points[-(2 * 1440 + 2) :]]
    for now in (points[-1][0], points[-1][0] - 3600.0, points[-1][0] - 86400.0):
        assert forecast(history, now, 240.0) == forecast(copied, now, 240.0)
