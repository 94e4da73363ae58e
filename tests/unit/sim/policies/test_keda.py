"""KEDA on vllm:num_requests_waiting (threshold 5, polling 15 s, cooldown 360 s), via its HPA."""

from __future__ import annotations

from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.sim.policies.keda import KedaQueue


def test_waiting_12_on_one_replica_gives_3_at_the_next_poll() -> None:
    keda = KedaQueue(make_ctx())
    assert keda.interval == 15.0
    assert keda.decide(make_obs(1, waiting=12.0), 0.0, []) == 3


def test_within_tolerance_holds() -> None:
    keda = KedaQueue(make_ctx())
    # 10.4 waiting on 2 pods is 1.04 x the 5-per-pod target: inside the 0.1 tolerance.
    assert keda.decide(make_obs(2, waiting=10.4), 0.0, []) == 2
    assert keda.decide(make_obs(2, waiting=11.5), 15.0, []) == 3


def test_scale_down_waits_for_the_hpa_stabilization_window() -> None:
    keda = KedaQueue(make_ctx())
    current = keda.decide(make_obs(1, waiting=30.0), 0.0, [])
    assert current == 5  # ceil(30 / 5) = 6, but the HPA adds at most max(4 pods, 100 %) per 15 s
    current = keda.decide(make_obs(current, waiting=30.0), 15.0, [])
    assert current == 6
    timeline = {}
    for t in range(30, 400, 15):
        current = keda.decide(make_obs(current, waiting=0.0), float(t), [])
        timeline[t] = current
    assert all(n == 6 for t, n in timeline.items() if t < 315)
    assert timeline[315] == 1  # 100 % per 15 s, down to the HPA's min once the 6 of t=15 has left the window


def test_cooldown_applies_to_the_step_to_zero_only() -> None:
    keda = KedaQueue(make_ctx(min_replicas=0))
    assert keda.decide(make_obs(0, waiting=3.0), 0.0, []) == 1  # activation 0 -> 1
    current = 1
    seen = {}
    for t in range(15, 420, 15):
        current = keda.decide(make_obs(current, waiting=0.0), float(t), [])
        seen[t] = current
    assert all(n == 1 for t, n in seen.items() if t < 360)
    assert seen[360] == 0


def test_empty_result_reads_as_zero_like_keda_ignore_null_values() -> None:
    keda = KedaQueue(make_ctx(min_replicas=0))
    assert keda.decide(make_obs(0, waiting=None), 0.0, []) == 0  # no data: not activated
    assert keda.decide(make_obs(0, waiting=1.0), 15.0, []) == 1


def test_a_new_hpa_waits_a_window_before_scaling_down() -> None:
    keda = KedaQueue(make_ctx())
    seen = {t: keda.decide(make_obs(4, waiting=0.0), float(t), []) for t in range(0, 330, 15)}
    assert all(n == 4 for t, n in seen.items() if t < 300)  # recordInitialRecommendation
    assert seen[300] == 1


def test_a_healthy_fleet_is_in_the_queue_triggers_dead_zone() -> None:
    """production-stack's trigger (threshold 5 on waiting, AverageValue) has no signal below saturation:
    24 replicas serving 3000 requests with 4 waiting in total want ceil(4 / 5) = 1, taken after the
    300-s window. The peer's behaviour, which the benchmark's collapse-then-flood replays show."""
    keda = KedaQueue(make_ctx(max_replicas=69))
    t, got = 0.0, 24
    while t <= 315.0:
        got = keda.decide(make_obs(24, waiting=4.0, running=3000.0), t, [])
        t += 15.0
    assert got == 1
