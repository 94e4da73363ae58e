"""Closed-loop timelines (Knative style): a fleet whose load changes over time, one decide per tick."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from tests.unit.scaling.helpers import Tick, observe, policy, run_fleet

from inferscale.scaling import (
    LastTick,
    MetricsState,
    Reason,
    Release,
    ScalerState,
    ScaleRule,
    Schedule,
    decide,
    state_from_status,
    state_to_status,
)

HIGH, LOW = 7.6, 0.8  # total KV load in "replicas at 100%": 10 replicas at 76%, then 1 replica's worth


def test_load_step_scales_up_on_the_next_tick() -> None:
    ticks = run_fleet(policy(), lambda t: 1.5 if t < 100 else 6.0, start=2, until=200.0)
    before = [t.replicas for t in ticks if t.at < 100]
    assert set(before) == {2}
    step = next(t for t in ticks if t.at == 100.0)
    assert step.replicas > 2 and step.decision.reason is Reason.KV_CACHE


HOLD_DOWN = ScaleRule(300.0, 50.0, None, 60.0, Release.HOLD)  # HPA's stabilization, 50% per 60 s


def test_load_fall_waits_the_window_then_steps_down_at_the_rate_limit() -> None:
    pol = policy(scale_down=HOLD_DOWN)
    ticks = run_fleet(pol, lambda t: HIGH if t < 600 else LOW, start=10, until=1500.0)
    downs = [(t.at, t.replicas) for prev, t in itertools.pairwise(ticks) if t.replicas < prev.replicas]
    first_low_tick = 600.0  # the record is run-length: the high run counts until the low one began
    assert downs[0][0] == first_low_tick + 300.0  # one window after, so at most one tick late, never early
    assert [n for _, n in downs] == [5, 2, 1]  # floor(10 x 0.5), floor(5 x 0.5), then the need (1)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(downs)]
    assert all(g >= 60.0 for g in gaps)
    assert ticks[-1].replicas == 1


def test_load_fall_released_linearly_steps_down_through_the_window() -> None:
    ticks = run_fleet(policy(), lambda t: HIGH if t < 600 else LOW, start=10, until=1500.0)  # the default
    after = [t for t in ticks if t.at >= 600.0]
    downs = [(t.at, t.replicas) for prev, t in itertools.pairwise(ticks) if t.replicas < prev.replicas]
    assert 600.0 < downs[0][0] < 600.0 + 300.0 / 2  # the first step comes early in the window
    assert len(downs) > 3  # and the fleet steps down through it, not at its end
    for t in after:  # never below what the burst's 10 still hold: 1 + 9 x (1 - age / 300), rounded up
        assert t.replicas >= math.ceil(1 + 9 * max(0.0, 1 - (t.at - 600.0) / 300.0) - 1e-9)
    assert next(t.at for t in after if t.replicas == 1) <= 600.0 + 300.0  # the need within one window
    hold = run_fleet(policy(scale_down=HOLD_DOWN), lambda t: HIGH if t < 600 else LOW, start=10, until=1500.0)
    assert sum(t.replicas for t in ticks) < sum(t.replicas for t in hold)
    assert "released linearly over 5m, still holds" in downs_message(ticks)


def downs_message(ticks: list[Tick]) -> str:
    return next(t.decision.message for prev, t in itertools.pairwise(ticks) if t.replicas < prev.replicas)


def test_restart_through_status_does_not_shorten_the_window() -> None:
    load = lambda t: HIGH if t < 600 else LOW  # noqa: E731
    straight = run_fleet(policy(), load, start=10, until=1500.0)
    restarted = run_fleet(policy(), load, start=10, until=1500.0, restart_at=750.0)
    assert [t.replicas for t in restarted] == [t.replicas for t in straight]


def test_restart_with_lost_state_waits_a_full_window_from_the_restart() -> None:
    load = lambda t: HIGH if t < 600 else LOW  # noqa: E731
    ticks = run_fleet(policy(scale_down=HOLD_DOWN), load, start=10, until=1500.0, restart_at=750.0, lose_state=True)
    first_down = next(t.at for t in ticks if t.replicas < 10)
    assert first_down == 750.0 + 300.0


def test_restart_with_lost_state_releases_the_count_it_found_linearly_from_the_restart() -> None:
    load = lambda t: HIGH if t < 600 else LOW  # noqa: E731
    ticks = run_fleet(policy(), load, start=10, until=1500.0, restart_at=750.0, lose_state=True)
    found = next(t.replicas for t in ticks if t.at == 740.0)  # what the lost state had stepped down to
    after = [t for t in ticks if t.at >= 750.0]
    assert after[0].replicas == found  # no scale-down on the first sample of a fresh state
    for t in after:  # released over one window from the restart, as if recommended then
        assert t.replicas >= math.ceil(1 + (found - 1) * max(0.0, 1 - (t.at - 750.0) / 300.0) - 1e-9)


def test_constant_load_settles_without_flapping() -> None:
    ticks = run_fleet(policy(), lambda t: 3.3, start=9, until=2000.0)
    seq = [t.replicas for t in ticks]
    assert all(b <= a for a, b in itertools.pairwise(seq))
    assert seq[-1] == 5  # ceil(3.3 / 0.8)


def test_missing_metrics_hold_and_keep_bounds() -> None:
    pol = policy(min_replicas=2, max_replicas=8)
    obs = observe(5, kv=None, waiting=None, state=MetricsState.MISSING)
    d = decide(obs, pol, ScalerState(), 0.0)
    assert (d.replicas, d.reason, d.metrics_available) == (5, Reason.METRICS_MISSING, False)
    assert d.message == "metrics missing: holding 5 replicas"
    d = decide(observe(12, kv=None, state=MetricsState.MISSING), pol, ScalerState(), 0.0)
    assert (d.replicas, d.reason) == (8, Reason.MAX_REPLICAS)
    d = decide(observe(1, kv=None, state=MetricsState.MISSING), pol, ScalerState(), 0.0)
    assert (d.replicas, d.reason) == (2, Reason.MIN_REPLICAS)


def test_stale_samples_hold_even_when_labelled_complete() -> None:
    obs = observe(5, kv=0.05, newest_sample_at=0.0)
    d = decide(obs, policy(scale_down=ScaleRule(0.0, None, None)), ScalerState(), 90.0)
    assert (d.replicas, d.reason, d.metrics_available) == (5, Reason.METRICS_STALE, False)
    assert "1m30s old > 1m" in d.message


def test_nan_and_inf_observations_are_missing_not_zero() -> None:
    free = policy(scale_down=ScaleRule(0.0, None, None))
    d = decide(observe(5, kv=float("nan"), waiting=float("inf")), free, ScalerState(), 0.0)
    assert (d.replicas, d.reason, d.metrics_available) == (5, Reason.METRICS_MISSING, False)


def test_schedule_floor_raises_even_while_metrics_are_missing() -> None:
    # 2026-11-30 is a Monday; 09:05 UTC is inside the 09:00 + 9h window.
    monday_0905 = 1796029200.0 + 300.0
    pol = policy(schedules=(Schedule("0 9 * * 1-5", 9 * 3600.0, 6),))
    d = decide(observe(2, kv=None, state=MetricsState.MISSING), pol, ScalerState(), monday_0905)
    assert (d.replicas, d.reason) == (6, Reason.SCHEDULE)
    d = decide(observe(2, kv=0.1), pol, ScalerState(), monday_0905)
    assert (d.replicas, d.reason) == (6, Reason.SCHEDULE)
    d = decide(observe(2, kv=0.5), pol, ScalerState(), monday_0905 + 10 * 3600.0)
    assert d.replicas == 2


def test_a_schedule_floor_is_ordered_one_measured_time_to_ready_before_it_starts() -> None:
    monday_0900 = 1796029200.0
    pol = policy(schedules=(Schedule("0 9 * * 1-5", 9 * 3600.0, 6),))
    d = decide(observe(2, kv=0.3), pol, ScalerState(time_to_ready=240.0), monday_0900 - 230.0)
    assert (d.replicas, d.reason) == (6, Reason.SCHEDULE)
    assert "starts in 3m50s, within a time-to-ready" in d.message
    d = decide(observe(2, kv=0.3), pol, ScalerState(time_to_ready=240.0), monday_0900 - 250.0)
    assert d.replicas == 2


def test_predictive_capacity_leads_by_the_measured_time_to_ready() -> None:
    from inferscale.scaling import RateSample

    history = [RateSample(60.0 * i, 1.0 + 0.01 * i) for i in range(60)]  # a steady ramp
    pol = policy(capacity_prior_rps=1.0, max_replicas=50)
    d = decide(observe(2, kv=0.8, request_rate=1.6), pol, ScalerState(time_to_ready=600.0), 3540.0, history)
    assert d.horizon == 600.0 and d.forecast_method == "holt"
    assert d.forecast_rps is not None and d.forecast_rps > 1.59 + 0.09
    reactive = decide(
        observe(2, kv=0.8, request_rate=1.6), policy(capacity_prior_rps=1.0, predictive=False), ScalerState(), 3540.0
    )
    assert reactive.horizon == 0.0


def test_the_capacity_utilization_target_sizes_the_capacity_signal() -> None:
    # 8 req/s on replicas of 1 req/s at the SLO: 9.4 at the default 85% (10), 11.4 at 70% (12)
    obs = observe(10, kv=0.5, request_rate=8.0)
    default = decide(obs, policy(capacity_prior_rps=1.0), ScalerState(), 0.0)
    lower = decide(obs, policy(capacity_prior_rps=1.0, target_capacity_utilization=0.7), ScalerState(), 0.0)
    assert (default.replicas, lower.replicas) == (10, 12)
    assert "at 70% = 11.43 → 12" in lower.message


def test_capacity_is_learned_only_from_loaded_slo_compliant_ticks() -> None:
    pol = policy(capacity_prior_rps=1.0)
    idle = decide(observe(4, kv=0.1, request_rate=0.4, ttft_p95=0.1, itl_mean=0.01), pol, ScalerState(), 0.0)
    assert idle.state.capacity_rps is None
    breach = decide(observe(4, kv=0.8, request_rate=8.0, ttft_p95=2.0), pol, ScalerState(), 0.0)
    assert breach.state.capacity_rps is None
    loaded = decide(observe(4, kv=0.8, request_rate=8.0, ttft_p95=0.2, itl_mean=0.02), pol, ScalerState(), 0.0)
    assert loaded.state.capacity_rps is not None
    assert 1.0 < loaded.state.capacity_rps <= 1.1  # moved toward 2 req/s per replica, by a bounded step


def test_a_queue_teaches_the_observed_rate_and_kv_only_a_lower_bound() -> None:
    # 4 replicas finish 8 req/s with a backlog (4 per replica, the policy's set-point, 2 s of queue)
    # at KV 40%: they give all they have (2 req/s each), so the estimate moves toward 2.
    pol = policy(capacity_prior_rps=3.0)
    obs = observe(4, kv=0.4, waiting=16.0, request_rate=8.0, ttft_p95=0.3, itl_mean=0.02)
    d = decide(obs, pol, ScalerState(), 0.0)
    assert d.state.capacity_rps is not None and 2.7 <= d.state.capacity_rps < 3.0
    assert d.state.capacity_factor == pytest.approx(d.state.capacity_rps / 3.0)
    # KV near target without a backlog: the rate carried is a lower bound, never extrapolated to the
    # KV target (near compute saturation KV grows much faster than the rate). A bound under the prior teaches
    # nothing: nothing is stored, and the next tick's figure is not called learned.
    for rate, expected in ((8.0, None), (11.0, None), (14.0, 3.0 + 0.1 * 0.5)):
        obs = observe(4, kv=0.7, request_rate=rate, ttft_p95=0.3, itl_mean=0.02)
        after = decide(obs, pol, ScalerState(), 0.0).state
        assert after.capacity_rps == (None if expected is None else pytest.approx(expected))
        told = "(learned: 1.02 × the prior)" if expected is not None else "(prior)"  # 3.05 over the prior's 3
        assert told in decide(obs, pol, after, 10.0).message


def test_a_breach_behind_a_backlog_lowers_the_estimate_it_cannot_raise() -> None:
    pol = policy(capacity_prior_rps=3.0)
    # 40 waiting at 8 req/s is 5 s of queue, TTFT 2 s: 2 req/s per replica is all they give, and it misses.
    over = observe(4, kv=0.9, waiting=40.0, request_rate=8.0, ttft_p95=2.0, itl_mean=0.02)
    assert decide(over, pol, ScalerState(), 0.0).state.capacity_rps == pytest.approx(3.0 - 0.1 * 1.0)
    faster = observe(4, kv=0.9, waiting=40.0, request_rate=16.0, ttft_p95=2.0, itl_mean=0.02)
    assert decide(faster, pol, ScalerState(), 0.0).state.capacity_rps is None  # above the prior: nothing taught
    # A breach without a backlog (long prompts' prefill) says nothing about capacity.
    prefill = observe(4, kv=0.1, waiting=1.0, request_rate=8.0, ttft_p95=2.0, itl_mean=0.02)
    assert decide(prefill, pol, ScalerState(), 0.0).state.capacity_rps is None


def test_a_few_waiting_at_low_kv_teach_nothing() -> None:
    # Hundreds of short requests per second leave a request or two waiting for the next step on
    # replicas far from full: that is not a capacity figure.
    pol = policy(capacity_prior_rps=300.0)
    obs = observe(4, kv=0.08, waiting=6.0, request_rate=400.0, ttft_p95=0.1, itl_mean=0.008)
    assert decide(obs, pol, ScalerState(), 0.0).state.capacity_rps is None


def test_scale_up_window_takes_the_lowest_recommendation() -> None:
    pol = policy(scale_up=ScaleRule(60.0, 100.0, 4, 15.0))
    ticks = run_fleet(pol, lambda t: 1.5 if t < 100 else 3.0, start=2, until=300.0)
    first_up = next(t for t in ticks if t.replicas > 2)
    assert first_up.at == 100.0 + 60.0  # the low run (ended when the high one began at t=100) left the window
    held = next(t for t in ticks if t.at == 100.0)
    assert held.decision.reason is Reason.UP_STABILIZING and "lowest recommendation in the last 1m" in (
        held.decision.message
    )


def test_a_backlog_at_the_set_point_that_drains_in_milliseconds_teaches_nothing() -> None:
    # 4 per replica at 1,200 short requests/s is 13 ms of queue: arrivals waiting for the next step,
    # not replicas giving all they have. The same count at 8 req/s (2 s of queue) is a capacity figure.
    pol = policy(capacity_prior_rps=300.0, slo_ttft_p95=0.5)
    fast = observe(4, kv=0.08, waiting=16.0, request_rate=1200.0, ttft_p95=0.1, itl_mean=0.008)
    assert decide(fast, pol, ScalerState(), 0.0).state.capacity_rps is None
    slow = observe(4, kv=0.08, waiting=16.0, request_rate=8.0, ttft_p95=0.3, itl_mean=0.02)
    learned = decide(slow, policy(capacity_prior_rps=3.0, slo_ttft_p95=0.5), ScalerState(), 0.0).state.capacity_rps
    assert learned is not None and 2.7 <= learned < 3.0


def _backlog_fleet(until: float) -> tuple[list[int], list[float]]:
    """8 replicas of 10 req/s each under 150 req/s: a backlog grows until new replicas, ready after
    180-240 s (staggered, as pods are), drain it. Returns replicas and waiting per 10 s tick."""
    pol, st = policy(max_replicas=100, capacity_prior_rps=None), ScalerState(time_to_ready=240.0)
    per_replica, arrival, dt = 10.0, 150.0, 10.0
    ready_at = [-1.0] * 8
    waiting, replicas, backlog = 0.0, [], []
    for t in (dt * i for i in range(int(until / dt) + 1)):
        ready = sum(1 for r in ready_at if r <= t)
        served = min(per_replica * ready * dt, waiting + arrival * dt)
        waiting += arrival * dt - served
        obs = observe(
            len(ready_at),
            kv=min(0.99, 0.8 * arrival / (per_replica * ready)),
            waiting=waiting,
            at=t,
            newest_sample_at=t,
            ready_replicas=ready,
            pending_replicas=len(ready_at) - ready,
            request_rate=served / dt,
            ttft_p95=0.1 + waiting / (per_replica * ready),
        )
        d = decide(obs, pol, st, t)
        st = d.state
        added = max(d.replicas - len(ready_at), 0)
        ready_at = ready_at[: d.replicas] + [t + 180.0 + 15.0 * ((len(ready_at) + k) % 5) for k in range(added)]
        replicas.append(d.replicas)
        backlog.append(waiting)
    return replicas, backlog


def test_a_backlog_orders_its_replicas_once_not_again_as_each_pending_one_turns_ready() -> None:
    # 15 replicas carry the load and ~22 drain the backlog built while the first ones start within a
    # time-to-ready. Re-asking 2x the ready count each time a pending replica turned Ready took this
    # fleet to 64 (a ServeGen replay: 22 -> 75); the pending now absorb the doubling.
    replicas, backlog = _backlog_fleet(1200.0)
    assert max(replicas) <= 40
    assert backlog[-1] == 0.0 and replicas[-1] >= 15


def test_capacity_is_not_learned_from_a_rate_that_spans_another_fleet_size_or_an_idle_minute() -> None:
    # 8 ready replicas complete 8 req/s behind a backlog that breaches the SLO: taken as is, capacity
    # at the SLO would be below 1 req/s per replica (prior 3). Right after 4 replicas turned Ready, or
    # 20 s into the backlog, that minute's rate was earned by a smaller or idle fleet: nothing learned.
    pol = policy(capacity_prior_rps=3.0)
    obs = observe(8, kv=0.9, waiting=200.0, request_rate=8.0, ttft_p95=5.0, itl_mean=0.02)
    now = 1000.0
    fleet_grew = ScalerState(last_tick=LastTick(now - 10, 4, now - 300, 150.0, now - 300))
    assert decide(obs, pol, fleet_grew, now).state.capacity_factor is None
    backlog_new = ScalerState(last_tick=LastTick(now - 10, 8, now - 300, 150.0, now - 20))
    assert decide(obs, pol, backlog_new, now).state.capacity_factor is None
    steady = ScalerState(last_tick=LastTick(now - 10, 8, now - 300, 150.0, now - 300))
    learned = decide(obs, pol, steady, now).state.capacity_factor
    assert learned is not None and learned < 1.0


def test_a_scale_down_is_sized_with_the_lowest_capacity_of_its_window() -> None:
    # The perf prior follows the request lengths tick by tick: 20 req/s per replica, but 10 for two
    # ticks at t=200-210 (long requests). Demand 60 req/s, then 80 from t=300: every recommendation of
    # the window is below the 10 replicas (4, 8 at t=200-210, then 5), so stabilization alone scales
    # down to 8 at t=300; at the window's lowest capacity 80 req/s needs 9.4 replicas, within the
    # dead-band of 10, until that low has aged out of the window (the capacity low keeps half-window
    # buckets: t=450).
    def run(prior_at: Callable[[float], float], down: ScaleRule) -> list[tuple[float, int]]:
        st, current, out = ScalerState(), 10, []
        for i in range(61):
            t = 10.0 * i
            obs = observe(
                current,
                kv=0.3,
                request_rate=60.0 if t < 300 else 80.0,
                ttft_p95=0.1,
                itl_mean=0.01,
                at=t,
                newest_sample_at=t,
            )
            d = decide(obs, policy(capacity_prior_rps=prior_at(t), predictive=False, scale_down=down), st, t)
            st = state_from_status(state_to_status(d.state))  # through status, as the operator keeps it
            current = d.replicas
            out.append((t, d.replicas))
        return out

    dip = run(lambda t: 10.0 if t in (200, 210) else 20.0, HOLD_DOWN)
    assert all(n == 10 for t, n in dip if t < 450)
    steady = run(lambda t: 20.0, HOLD_DOWN)
    assert min(n for t, n in steady if t <= 310) < 10  # without the dip the same load does scale down
    # Released linearly, the window's recommendations no longer hold the fleet by t=290: the capacity
    # low is what keeps the 8 that 80 req/s need at 10 req/s per replica, until it ages out.
    linear = ScaleRule(300.0, 50.0, None, 60.0, Release.LINEAR)
    dip, steady = run(lambda t: 10.0 if t in (200, 210) else 20.0, linear), run(lambda t: 20.0, linear)
    assert all(n >= 8 for t, n in dip if 290 <= t < 450)
    assert min(n for t, n in steady if 290 <= t < 450) < 8
