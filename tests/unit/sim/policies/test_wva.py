"""llm-d WVA V1 saturation: KV >= 0.8 or queue >= 5; +1/-1 per 60 s; >= 2 non-saturated to go down."""

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
    wva = WVASaturation(make_ctx())
    current = 2
    seen = {}
    for t in range(0, 195, 15):
        current = wva.decide(make_obs(current, kv_cache_utilization_max=0.9, waiting=0.0), float(t), [])
        seen[t] = current
    assert seen == {0: 3, 15: 3, 30: 3, 45: 3, 60: 4, 75: 4, 90: 4, 105: 4, 120: 5, 135: 5, 150: 5, 165: 5, 180: 6}


def test_no_scale_up_while_pods_are_pending() -> None:
    wva = WVASaturation(make_ctx())
    assert wva.decide(make_obs(3, ready=2, pending=1, kv_cache_utilization_max=0.95, waiting=20.0), 0.0, []) == 3


def test_no_scale_down_while_a_pod_is_pending() -> None:
    """WVA makes no decision while the variant is in transition: 10 idle ready pods and one pending
    stay 11 (idle, they would lose one per run)."""
    wva = WVASaturation(make_ctx())
    assert wva.decide(make_obs(11, ready=10, pending=1, kv_cache_utilization_max=0.2, waiting=0.0), 0.0, []) == 11
    assert wva.decide(make_obs(11, kv_cache_utilization_max=0.2, waiting=0.0), 60.0, []) == 10


def test_one_replica_per_cold_start() -> None:
    """Scale-up skips a variant with pending replicas (cascade prevention), so with one variant the fleet
    grows by at most +1 per time-to-ready, whatever the saturation."""
    wva = WVASaturation(make_ctx())
    busy: dict[str, Any] = {"kv_cache_utilization": 0.99, "kv_cache_utilization_max": 0.99, "waiting": 500.0}
    assert wva.decide(make_obs(10, **busy), 0.0, []) == 11
    for k in range(1, 16):
        assert wva.decide(make_obs(11, ready=10, pending=1, **busy), 15.0 * k, []) == 11


def test_reads_the_pods_kv_peaks_not_the_fleet_mean() -> None:
    """WVA takes each pod's max_over_time[1m]: a fleet whose mean KV reads 0.5 but whose pods peaked at
    0.85 within the minute is saturated (+1); on the mean it would look spare enough to lose one."""
    wva = WVASaturation(make_ctx())
    assert wva.decide(make_obs(4, kv_cache_utilization=0.5, kv_cache_utilization_max=0.85, waiting=0.0), 0.0, []) == 5
    assert saturation_step(0.5, 0.0, 4) == -1


def test_uses_the_queue_peak_of_the_last_minute() -> None:
    wva = WVASaturation(make_ctx())
    assert wva.decide(make_obs(4, kv_cache_utilization_max=0.3, waiting=0.0), 0.0, []) == 3
    wva.decide(make_obs(3, kv_cache_utilization_max=0.3, waiting=18.0), 30.0, [])
    # At 60 s the queue is empty again, but its 1-minute peak was 6 per replica: +1.
    assert wva.decide(make_obs(3, kv_cache_utilization_max=0.3, waiting=0.0), 60.0, []) == 4


def test_no_kv_peak_holds() -> None:
    wva = WVASaturation(make_ctx())
    assert wva.decide(make_obs(4, kv_cache_utilization=0.1, waiting=0.0), 0.0, []) == 4


def test_no_scale_down_with_a_single_replica() -> None:
    wva = WVASaturation(make_ctx())
    assert wva.decide(make_obs(1, kv_cache_utilization_max=0.0, waiting=0.0), 0.0, []) == 1
