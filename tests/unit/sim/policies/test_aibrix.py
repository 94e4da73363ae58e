"""AIBrix APA on KV usage: x2 up / /2 down bounds, 0.1 tolerances, inverted cooldown, the 180-s stable
window, the pending-replica guard of PR #2671, and a KV target calibrated at the SLO."""

from __future__ import annotations

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs, steady_trace

from inferscale.sim.policies.aibrix import AIBrixAPA, apa_replicas, calibrated_kv_target, guard_pending


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


def test_target_is_the_kv_usage_at_the_slo_at_70_percent() -> None:
    ctx = make_ctx()
    apa = AIBrixAPA(ctx)
    assert apa.target == pytest.approx(0.7 * ctx.slo_kv_usage)
    assert 0.3 < apa.target < 0.6  # 1000/200-token requests fill a pod's KV well before the SLO edge
    assert apa.interval == 10.0
    assert AIBrixAPA(ctx, target=0.5).target == 0.5  # AIBrix's sample value, when asked for


def test_calibrated_target_is_reachable_on_short_requests() -> None:
    """ServeGen m-small's lengths: a pod running max_num_seqs sequences holds 0.30 of its KV, so AIBrix's
    sample target 0.5 can never be reached; the calibrated one lies below that ceiling."""
    ctx = make_ctx(trace=steady_trace([(0.0, 600.0, 5.0)], 122, 15))
    ceiling = ctx.profile.max_num_seqs * (122 + 15 / 2) / ctx.profile.kv_capacity_tokens
    assert ceiling < 0.5 * (1 - 0.1)
    assert calibrated_kv_target(ctx) < 0.9 * ceiling


def test_sample_target_on_short_requests_halves_a_saturated_fleet() -> None:
    """Why the calibration: at target 0.5, a fleet saturated at its KV ceiling with 5000 queued reads
    r = 0.6 every round and halves (24 -> 15 -> 9 -> ... -> 2); at the calibrated target it grows."""
    ctx = make_ctx(trace=steady_trace([(0.0, 600.0, 5.0)], 122, 15))
    ceiling = ctx.profile.max_num_seqs * (122 + 15 / 2) / ctx.profile.kv_capacity_tokens
    sample, calibrated = AIBrixAPA(ctx, target=0.5), AIBrixAPA(ctx)
    n = m = 24
    for k in range(8):
        n = sample.decide(make_obs(n, kv_cache_utilization=ceiling, waiting=5000.0), 10.0 * k, [])
        m = calibrated.decide(make_obs(m, kv_cache_utilization=ceiling, waiting=5000.0), 10.0 * k, [])
    assert n == 2
    assert m == ctx.max_replicas


def test_reads_the_180_s_stable_window_not_the_last_sample() -> None:
    """apa.go ComputeRecommendation reads metrics.StableValue, the mean of the per-pod averages over
    observeWindowSeconds: 17 samples at target and one spike average 0.527, r = 1.05, inside the
    tolerance: hold (on the last sample alone, r = 1.98 would double the fleet)."""
    apa = AIBrixAPA(make_ctx(), target=0.5)
    for k in range(17):
        assert apa.decide(make_obs(10, kv_cache_utilization=0.5), 10.0 * k, []) == 10
    assert apa.decide(make_obs(10, kv_cache_utilization=0.99), 170.0, []) == 10


def test_samples_older_than_the_window_are_forgotten() -> None:
    apa = AIBrixAPA(make_ctx(), target=0.5)
    apa.decide(make_obs(10, kv_cache_utilization=0.5), 0.0, [])
    # 180 s later the 0.5 has left the window: the spike alone drives it, x2.
    assert apa.decide(make_obs(10, kv_cache_utilization=0.99), 180.0, []) == 20


def test_does_not_cut_a_saturated_fleet_when_its_new_empty_pods_turn_ready() -> None:
    """Three minutes at KV 0.99 on 9 ready pods of 69, then 31 empty pods turn Ready and the fleet
    mean reads 0.33 for one sample: the window still averages 0.95, so APA holds the fleet (on the
    last sample it would cut it to 46, and the 300-s min window would later take it to 9)."""
    apa = AIBrixAPA(make_ctx(max_replicas=69), target=0.5)
    for k in range(18):
        assert apa.decide(make_obs(69, ready=9, pending=60, kv_cache_utilization=0.99), 10.0 * k, []) == 69
    assert apa.decide(make_obs(69, ready=40, pending=29, kv_cache_utilization=0.33), 180.0, []) == 69


def test_pending_replica_guard_stops_the_cascade() -> None:
    """PR #2671 applyPendingReplicaGuard: 9 ready at KV 0.99 double to 18; while 9 are pending the metric
    is taken as 0.99 x 9 / 18, within tolerance of the target: hold 18 (unguarded: 36, then 69)."""
    apa = AIBrixAPA(make_ctx(max_replicas=69), target=0.5)
    assert apa.decide(make_obs(9, kv_cache_utilization=0.99), 0.0, []) == 18
    assert apa.decide(make_obs(18, ready=9, pending=9, kv_cache_utilization=0.99), 10.0, []) == 18
    unguarded = AIBrixAPA(make_ctx(max_replicas=69), target=0.5, pending_guard=False)
    assert unguarded.decide(make_obs(9, kv_cache_utilization=0.99), 0.0, []) == 18
    assert unguarded.decide(make_obs(18, ready=9, pending=9, kv_cache_utilization=0.99), 10.0, []) == 36


@pytest.mark.parametrize(
    ("current", "ready", "usage", "desired", "expected"),
    [
        (18, 9, 0.99, 36, 18),  # 0.495 on 18 is within tolerance: hold
        (20, 15, 0.99, 40, 30),  # 0.7425 on 20: r = 1.485 -> 30, below the unguarded 40
        (18, 3, 0.99, 36, 18),  # the scaled metric says scale down: never below current
        (10, 5, 0.3, 6, 8),  # a scale-down: the pending read at the target, 0.4 on 10 -> 8, not the unguarded 6
        (10, 5, 0.1, 2, 6),  # 0.3 on 10 -> 6: still a scale-down, never below the unguarded 2
        (10, 5, 0.3, 10, 10),  # no change asked: untouched
        (10, 10, 0.99, 20, 20),  # nothing pending: untouched
    ],
)
def test_guard_reads_pending_pods_as_missing_on_a_scale_up_and_at_target_on_a_scale_down(
    current: int, ready: int, usage: float, desired: int, expected: int
) -> None:
    assert guard_pending(current, ready, usage, 0.5, desired) == expected


def test_scale_down_takes_the_minimum_in_the_cooldown_window() -> None:
    apa = AIBrixAPA(make_ctx(), target=0.5)
    assert apa.decide(make_obs(8, kv_cache_utilization=0.05), 0.0, []) == 4
    # Someone scaled to 10 meanwhile; once the 0.05 has left the 180-s metric window APA wants 8,
    # but the 300-s cooldown window remembers 4.
    assert apa.decide(make_obs(10, kv_cache_utilization=0.4), 200.0, []) == 4
    # Once the 4 has left the window, the latest recommendation applies.
    assert apa.decide(make_obs(10, kv_cache_utilization=0.4), 310.0, []) == 8


def test_no_metric_skips_the_round() -> None:
    apa = AIBrixAPA(make_ctx())
    assert apa.decide(make_obs(3, kv_cache_utilization=None), 0.0, []) == 3
