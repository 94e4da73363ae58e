"""AIBrix APA on KV usage: x2 up / /2 down bounds, 0.1 tolerances, inverted cooldown."""

from __future__ import annotations

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.sim.policies.aibrix import AIBrixAPA, apa_replicas


@pytest.mark.parametrize(
    ("current", "usage", "expected"),
    [
        (2, 1.5, 4),  # ratio 3 wants 6, at most x2
        (4, 0.6, 5),  # ratio 1.2 -> ceil(4.8)
        (4, 0.54, 4),  # ratio 1.08: inside the up tolerance
        (4, 0.46, 4),  # ratio 0.92: inside the down tolerance
        (4, 0.3, 3),  # ratio 0.6 -> ceil(2.4)
        (8, 0.05, 4),  # ratio 0.1 wants 1, at most /2
    ],
)
def test_apa_formula_and_bounds(current: int, usage: float, expected: int) -> None:
    assert apa_replicas(current, usage, 0.5) == expected


def test_target_is_the_documented_kv_sample_value() -> None:
    apa = AIBrixAPA(make_ctx())
    assert apa.target == 0.5
    assert apa.interval == 10.0
    assert apa.decide(make_obs(2, kv_cache_utilization=0.9), 0.0, []) == 4


def test_scale_down_takes_the_minimum_in_the_cooldown_window() -> None:
    apa = AIBrixAPA(make_ctx())
    assert apa.decide(make_obs(8, kv_cache_utilization=0.05), 0.0, []) == 4
    # Someone scaled to 10 meanwhile; APA now wants 8, but the 300-s window remembers 4.
    assert apa.decide(make_obs(10, kv_cache_utilization=0.4), 10.0, []) == 4
    # Once the 4 has left the window, the latest recommendation applies.
    assert apa.decide(make_obs(10, kv_cache_utilization=0.4), 310.0, []) == 8


def test_no_metric_skips_the_round() -> None:
    apa = AIBrixAPA(make_ctx())
    assert apa.decide(make_obs(3, kv_cache_utilization=None), 0.0, []) == 3
