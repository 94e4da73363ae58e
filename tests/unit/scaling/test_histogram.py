import math

import pytest

from inferscale.scaling.histogram import histogram_quantile

# vLLM's TTFT bucket bounds up to 1 s, then +Inf.
LE = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, math.inf]


def cumulative(per_bucket: list[float]) -> dict[float, float]:
    out, acc = {}, 0.0
    for le, n in zip(LE, per_bucket, strict=True):
        acc += n
        out[le] = acc
    return out


def test_interpolates_linearly_inside_the_bucket_holding_the_rank() -> None:
    # 100 observations: 90 in (0.1, 0.25], 10 in (0.25, 0.5]. Rank 95 -> halfway into (0.25, 0.5].
    b = cumulative([0, 0, 0, 0, 0, 0, 0, 0, 90, 10, 0, 0, 0])
    assert histogram_quantile(0.95, b) == pytest.approx(0.375)
    assert histogram_quantile(0.5, b) == pytest.approx(0.1 + 0.15 * 50 / 90)


def test_first_bucket_starts_at_zero() -> None:
    b = cumulative([10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    assert histogram_quantile(0.5, b) == pytest.approx(0.0005)


def test_rank_in_the_inf_bucket_returns_the_highest_finite_bound() -> None:
    b = cumulative([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 99])
    assert histogram_quantile(0.95, b) == 1.0


@pytest.mark.parametrize("b", [{}, cumulative([0] * 13), {0.1: 5.0}, {0.1: 1.0, math.inf: math.nan}])
def test_no_observations_or_no_inf_bucket_is_unknown_not_zero(b: dict[float, float]) -> None:
    assert histogram_quantile(0.95, b) is None


def test_non_monotonic_rates_are_repaired() -> None:
    # the 0.5 bucket dips under the one before: raised to 10, the rank 15 sits halfway from 0.5 to 1.0
    # (interpolated from the dip, 9, it would read 0.77)
    b = {0.1: 5.0, 0.25: 10.0, 0.5: 9.0, 1.0: 20.0, math.inf: 20.0}
    assert histogram_quantile(0.75, b) == pytest.approx(0.75)
