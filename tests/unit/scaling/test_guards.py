"""Rate limits, stabilization, bounds and consolidation: HPA's exact semantics and rounding."""

from __future__ import annotations

from tests.unit.scaling.helpers import observe, policy, run_fleet

from inferscale.scaling import Reason, ScaleEvent, ScalerState, ScaleRule, TimedReplicas, decide, state_to_status
from inferscale.scaling.guards import Load, consolidation_floor, scale_down_limit, scale_up_limit
from inferscale.scaling.stabilization import as_points, prune_events, prune_recommendations, stabilize


def steps(ticks: list) -> list[tuple[float, int]]:  # type: ignore[type-arg]
    out, last = [], None
    for t in ticks:
        if t.replicas != last:
            out.append((t.at, t.replicas))
            last = t.replicas
    return out


def test_percent_scale_up_rounds_up_2_3_5() -> None:
    # A 10% KV target on saturated replicas asks for 10x: only the rate limit binds.
    pol = policy(scale_up=ScaleRule(0.0, 50.0, None, 60.0), target_kv_cache=0.1)
    ticks = run_fleet(pol, lambda t: 100.0, start=2, until=130.0)
    assert steps(ticks) == [(0.0, 3), (60.0, 5), (120.0, 8)]


def test_percent_scale_down_rounds_down_7_5_3() -> None:
    pol = policy(scale_down=ScaleRule(0.0, 25.0, None, 60.0))
    ticks = run_fleet(pol, lambda t: 0.0, start=7, until=130.0)
    assert steps(ticks) == [(0.0, 5), (60.0, 3), (120.0, 2)]


def test_pods_limit_one_per_minute() -> None:
    pol = policy(scale_up=ScaleRule(0.0, None, 1, 60.0), target_kv_cache=0.1)
    ticks = run_fleet(pol, lambda t: 100.0, start=1, until=130.0)
    assert steps(ticks) == [(0.0, 2), (60.0, 3), (120.0, 4)]
    assert ticks[0].decision.reason is Reason.RATE_LIMITED
    assert "1 pods per 60s" in ticks[0].decision.message


def test_the_larger_of_percent_and_pods_applies() -> None:
    rule = ScaleRule(0.0, 100.0, 4, 15.0)
    assert scale_up_limit(rule, (), current=1, now=0.0) == 5  # 4 pods beats doubling
    assert scale_up_limit(rule, (), current=10, now=0.0) == 20  # doubling beats 4 pods
    down = ScaleRule(0.0, 50.0, 1, 60.0)
    assert scale_down_limit(down, (), current=10, now=0.0) == 5
    assert scale_down_limit(down, (), current=2, now=0.0) == 1


def test_limits_count_from_the_start_of_the_period_using_recorded_events() -> None:
    rule = ScaleRule(0.0, 100.0, None, 60.0)
    events = (ScaleEvent(10.0, 2, 4, "KVCacheSaturation"),)
    assert scale_up_limit(rule, events, current=4, now=30.0) == 4  # started the period at 2: at most 4
    assert scale_up_limit(rule, events, current=4, now=70.0) == 8  # the event left the period
    down = ScaleRule(0.0, 50.0, None, 60.0)
    events = (ScaleEvent(10.0, 8, 4, "KVCacheSaturation"),)
    assert scale_down_limit(down, events, current=4, now=30.0) == 4


def test_a_limit_never_reverses_the_direction_when_replicas_changed_behind_the_operator() -> None:
    # the operator scaled 10 -> 20 five seconds ago; spec.replicas now reads 12 (kubectl scale, GitOps)
    up = ScaleRule(0.0, 100.0, 4, 15.0)
    assert scale_up_limit(up, (ScaleEvent(95.0, 10, 20, "TTFTAboveSLO"),), current=12, now=100.0) == 12
    # the operator scaled 10 -> 5 thirty seconds ago; spec.replicas now reads 3
    down = ScaleRule(0.0, 50.0, None, 60.0)
    assert scale_down_limit(down, (ScaleEvent(70.0, 10, 5, "KVCacheSaturation"),), current=3, now=100.0) == 3


def test_first_replica_is_never_blocked_by_a_percentage() -> None:
    assert scale_up_limit(ScaleRule(0.0, 100.0, None, 60.0), (), current=0, now=0.0) == 1


def test_stabilization_takes_highest_for_down_and_lowest_for_up() -> None:
    history = [TimedReplicas(t, n) for t, n in ((100.0, 8), (200.0, 6), (290.0, 4))]
    # Scale-down: the highest recommendation in the last 300 s (8, still inside at t=350).
    assert stabilize(2, 10, history, now=350.0, up_window=0.0, down_window=300.0) == 8
    assert stabilize(2, 10, history, now=450.0, up_window=0.0, down_window=300.0) == 6
    # Scale-up: the lowest recommendation in the window (AIBrix inverts this).
    assert stabilize(12, 3, history, now=300.0, up_window=120.0, down_window=0.0) == 4
    assert stabilize(12, 3, history, now=300.0, up_window=0.0, down_window=0.0) == 12


def test_fresh_state_does_not_scale_down_on_its_first_sample() -> None:
    # HPA TestScaleDownStabilizeInitialSize: 5 stays 5.
    d = decide(observe(5, kv=0.1), policy(), ScalerState(), 0.0)
    assert d.replicas == 5 and d.reason is Reason.STABILIZING


def test_bounds_name_themselves() -> None:
    d = decide(observe(4, kv=1.0, waiting=200.0), policy(max_replicas=6), ScalerState(), 0.0)
    assert d.replicas == 6 and d.limits[-1] is Reason.MAX_REPLICAS and d.reason is Reason.MAX_REPLICAS
    free = ScaleRule(0.0, None, None)
    d = decide(observe(4, kv=0.0), policy(min_replicas=3, scale_down=free), ScalerState(), 0.0)
    assert d.replicas == 3 and d.reason is Reason.MIN_REPLICAS


def test_current_above_max_comes_down_to_max() -> None:
    d = decide(observe(30, kv=0.8), policy(max_replicas=20), ScalerState(), 0.0)
    assert d.replicas == 20 and d.reason is Reason.MAX_REPLICAS


def test_consolidation_refuses_when_a_pod_is_saturated() -> None:
    free = ScaleRule(0.0, None, None)
    obs = observe(6, kv=0.3, kv_cache_utilization_max=0.97)
    d = decide(obs, policy(scale_down=free), ScalerState(), 0.0)
    assert d.replicas == 6 and d.reason is Reason.CONSOLIDATION_REFUSED
    assert "97%" in d.message


def test_consolidation_floor_is_the_fewest_replicas_within_every_target() -> None:
    # The signals already size for these targets, so in decide() this is a backstop; test it directly.
    load = Load(kv_total=2.0, kv_peak=0.6, waiting=9.0, request_rate=3.5, capacity_rps=1.0)
    assert consolidation_floor(load, target_kv=0.8, target_waiting=4.0, current=8) == (
        4,
        "4 replicas carry 3.50 req/s",
    )
    idle = Load(kv_total=0.0, kv_peak=0.0, waiting=0.0, request_rate=None, capacity_rps=1.0)
    assert consolidation_floor(idle, target_kv=0.8, target_waiting=4.0, current=8) == (
        0,
        "0 replicas keep waiting <= 4 each",
    )
    unknown = Load(kv_total=None, kv_peak=None, waiting=None, request_rate=None, capacity_rps=None)
    assert consolidation_floor(unknown, target_kv=0.8, target_waiting=4.0, current=8) is None


def test_scale_events_inside_the_period_are_all_kept_and_old_ones_down_to_the_last_20() -> None:
    events = tuple(ScaleEvent(float(i), 1, 2, "x") for i in range(30))
    # 25 inside the last 25.5 s: more than the 20 kept for history
    assert prune_events(events, now=30.0, keep=25.5) == events[5:]
    assert prune_events(events, now=10_000.0, keep=60.0) == events[-20:]
    assert prune_events(events[:5], now=10_000.0, keep=60.0) == events[:5]


def test_the_record_keeps_one_entry_per_run_and_drops_runs_that_ended_before_the_window() -> None:
    ticks = [TimedReplicas(t, n) for t, n in ((0.0, 8), (15.0, 8), (30.0, 5), (45.0, 5), (60.0, 5), (75.0, 3))]

    def runs(now: float) -> list[tuple[float, int]]:
        return [(r.at, r.replicas) for r in prune_recommendations(ticks, now=now, keep=300.0)]

    assert runs(75.0) == [(0.0, 8), (30.0, 5), (75.0, 3)]
    # The 8-run ended when the 5-run began (t=30): it matters while 30 is inside the window.
    assert runs(329.0) == [(0.0, 8), (30.0, 5), (75.0, 3)]
    assert runs(330.0) == [(30.0, 5), (75.0, 3)]


def test_a_run_counts_until_the_next_began_so_a_window_is_never_shorter_than_per_tick() -> None:
    runs = [TimedReplicas(0.0, 8), TimedReplicas(100.0, 2)]
    per_tick = [TimedReplicas(float(t), 8) for t in range(0, 100, 10)] + [TimedReplicas(100.0, 2)]
    for now in range(100, 500, 5):
        exact = stabilize(2, 8, per_tick, float(now), 0.0, 300.0)
        runlength = stabilize(2, 8, as_points(runs, float(now)), float(now), 0.0, 300.0)
        assert runlength >= exact  # never scales down earlier than the per-tick record would
    assert stabilize(2, 8, as_points(runs, 400.0), 400.0, 0.0, 300.0) == 2  # and not forever


def test_a_steady_service_leaves_its_status_record_unchanged_from_tick_to_tick() -> None:
    state, records = ScalerState(), []
    for i in range(40):
        d = decide(observe(4, kv=0.78), policy(), state, 15.0 * i)
        assert d.replicas == 4
        state = d.state
        record = state_to_status(state)
        record["lastTick"].pop("at")  # the previous tick's time: a figure, not part of the record
        records.append(record)
    assert records[-1] == records[-2] == records[20]
