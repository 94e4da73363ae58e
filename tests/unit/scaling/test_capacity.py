"""Online capacity learning: bounded steps, bounded distance from the prior."""

from __future__ import annotations

import pytest

from inferscale.scaling import capacity
from inferscale.scaling.capacity import ALPHA, MAX_CHANGE, PRIOR_SPAN, learn


def test_first_sample_without_prior_is_taken_as_is() -> None:
    assert learn(None, None, request_rate=8.0, ready=4, kv=0.8, target_kv=0.8, queued=False) == 2.0


def test_kv_below_target_extrapolates_to_the_target_at_most_by_a_third() -> None:
    assert learn(None, None, request_rate=8.0, ready=4, kv=0.7, target_kv=0.8, queued=False) == pytest.approx(
        2.0 * 0.8 / 0.7
    )
    assert learn(None, None, request_rate=8.0, ready=4, kv=0.2, target_kv=0.8, queued=False) == pytest.approx(
        2.0 / 0.75
    )


def test_ema_moves_by_alpha_but_at_most_max_step() -> None:
    assert learn(2.0, None, request_rate=8.8, ready=4, kv=0.8, target_kv=0.8, queued=False) == pytest.approx(
        2.0 + ALPHA * 0.2
    )
    assert learn(2.0, None, request_rate=80.0, ready=4, kv=0.8, target_kv=0.8, queued=False) == pytest.approx(
        2.0 * (1 + MAX_CHANGE)
    )
    # Downward, the EMA alone is already within the bound (a sample is never negative).
    assert learn(2.0, None, request_rate=0.4, ready=4, kv=0.8, target_kv=0.8, queued=False) == pytest.approx(
        2.0 + ALPHA * (0.1 - 2.0)
    )


def test_estimate_stays_within_a_factor_of_the_prior() -> None:
    estimate = 1.0
    for _ in range(500):
        estimate = learn(estimate, 1.0, request_rate=400.0, ready=4, kv=0.8, target_kv=0.8, queued=False)
    assert estimate == pytest.approx(PRIOR_SPAN)


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
