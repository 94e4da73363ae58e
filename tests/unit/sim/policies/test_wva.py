"""llm-d WVA V1 saturation: KV >= 0.8 or queue >= 5; +1/-1 per 60 s; >= 2 non-saturated to go down; an HPA on
wva_desired_replicas (AverageValue 1, 240 s windows) scales."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.sim.policies.wva import WVASaturation, saturation_step


@pytest.mark.parametrize(
    ("kv", "queue", "ready", "step"),
    [
        (0.85, 0.0, 4, 1),  # saturated by KV
        (0.2, 5.0, 4, 1),  # saturated by queue
        (0.75, 0.0, 4, 1),  # spare KV 0.05 < 0.10
        (0.3, 2.5, 4, 1),  # spare queue 2.5 < 3
        (0.3, 0.0, 4, -1),  # 0.3 x 4/3 = 0.4 leaves 0.4 spare
        (0.3, 0.0, 1, 0),  # one non-saturated replica: never scale down
        (0.4, 0.0, 2, 0),  # 0.4 x 2 = 0.8 leaves no spare
        (0.6, 0.0, 4, 0),  # fine now, but 0.6 x 4/3 = 0.8 on 3 replicas would leave no spare
    ],
)
def test_saturation_rule(kv: float, queue: float, ready: int, step: int) -> None:
    assert saturation_step(kv, queue, ready) == step


def test_plus_one_per_60_s() -> None:
    wva = WVASaturation(make_ctx(), hpa=False)
    current = 2
    seen = {}
    for t in range(0, 195, 15):
        current = wva.decide(make_obs(current, kv_cache_utilization_max=0.9, waiting=0.0), float(t), [])
        seen[t] = current
    assert seen == {0: 3, 15: 3, 30: 3, 45: 3, 60: 4, 75: 4, 90: 4, 105: 4, 120: 5, 135: 5, 150: 5, 165: 5, 180: 6}


def test_no_scale_up_while_pods_are_pending() -> None:
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(3, ready=2, pending=1, kv_cache_utilization_max=0.95, waiting=20.0), 0.0, []) == 3


def test_a_scale_down_does_not_wait_for_pending_pods() -> None:
    """Cascade prevention skips scale-ups only (reference §2.3, §2.4): 10 idle ready pods and one pending
    lose one."""
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(11, ready=10, pending=1, kv_cache_utilization_max=0.2, waiting=0.0), 0.0, []) == 10


def test_one_replica_per_cold_start() -> None:
    """Scale-up skips a variant with pending replicas (cascade prevention), so with one variant the fleet
    grows by at most +1 per time-to-ready, whatever the saturation."""
    wva = WVASaturation(make_ctx(), hpa=False)
    busy: dict[str, Any] = {"kv_cache_utilization": 0.99, "kv_cache_utilization_max": 0.99, "waiting": 500.0}
    assert wva.decide(make_obs(10, **busy), 0.0, []) == 11
    for k in range(1, 16):
        assert wva.decide(make_obs(11, ready=10, pending=1, **busy), 15.0 * k, []) == 11


def test_reads_the_pods_kv_peaks_not_the_fleet_mean() -> None:
    """WVA takes each pod's max_over_time[1m]: a fleet whose mean KV reads 0.5 but whose pods peaked at
    0.85 within the minute is saturated (+1); on the mean it would look spare enough to lose one."""
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(4, kv_cache_utilization=0.5, kv_cache_utilization_max=0.85, waiting=0.0), 0.0, []) == 5
    assert saturation_step(0.5, 0.0, 4) == -1


def test_uses_the_queue_peak_of_the_last_minute() -> None:
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(4, kv_cache_utilization_max=0.3, waiting=0.0), 0.0, []) == 3
    wva.decide(make_obs(3, kv_cache_utilization_max=0.3, waiting=18.0), 30.0, [])
    # At 60 s the queue is empty again, but its 1-minute peak was 6 per replica: +1.
    assert wva.decide(make_obs(3, kv_cache_utilization_max=0.3, waiting=0.0), 60.0, []) == 4


def test_no_kv_peak_holds() -> None:
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(4, kv_cache_utilization=0.1, waiting=0.0), 0.0, []) == 4


def test_no_scale_down_with_a_single_replica() -> None:
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(1, kv_cache_utilization_max=0.0, waiting=0.0), 0.0, []) == 1


def test_through_the_helm_charts_hpa_each_step_waits_its_240_s_window() -> None:
    wva = WVASaturation(make_ctx())
    current, seen = 2, {}
    for t in range(0, 600, 15):
        current = wva.decide(make_obs(current, kv_cache_utilization_max=0.9, waiting=0.0), float(t), [])
        seen[t] = current
    # the HPA's first recommendation is the count it found (2): the up window holds it for 240 s
    assert {seen[t] for t in range(0, 240, 15)} == {2}
    assert seen[240] == 3 and seen[510] == 3 and seen[525] == 4  # asked from 300: 240 s after its last 3


def test_above_ten_replicas_the_hpas_tolerance_swallows_every_step() -> None:
    """+1 on 12 is 13 / 12 = 1.08 of the target, inside the HPA's 0.1 tolerance: the HPA never moves, however
    saturated the fleet; below 10 the same +1 goes through."""
    wva = WVASaturation(make_ctx(max_replicas=40))
    saturated = {"kv_cache_utilization_max": 0.99, "waiting": 200.0}
    assert {wva.decide(make_obs(12, **saturated), 15.0 * k, []) for k in range(60)} == {12}
    small = WVASaturation(make_ctx(max_replicas=40))
    assert small.decide(make_obs(5, **saturated), 240.0, []) == 5  # its window starts now
    assert small.decide(make_obs(5, **saturated), 495.0, []) == 6


def test_a_desired_count_not_reached_is_kept_while_the_analyser_asks_for_no_change() -> None:
    wva = WVASaturation(make_ctx(), hpa=False)
    assert wva.decide(make_obs(4, kv_cache_utilization_max=0.9, waiting=0.0), 0.0, []) == 5
    # the Deployment is still at 4 (a slow HPA) and the fleet now looks fine: 5 stays WVA's desired count
    assert wva.decide(make_obs(4, kv_cache_utilization_max=0.6, waiting=0.0), 60.0, []) == 5
