"""The decision's count on partial data, and the reason and words it gives for it: each names the signal or
guard that set the count, with the numbers that set it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from tests.unit.scaling.helpers import observe, policy

from inferscale.scaling import (
    MetricsState,
    Reason,
    Release,
    ScalerState,
    ScaleRule,
    TimedReplicas,
    decide,
    guards,
    state_from_status,
    state_to_status,
)
from inferscale.scaling.capacity import remember_low, window_low
from inferscale.scaling.types import CapacityLow, LastTick, ScaleEvent

NOW = 1000.0
NO_SLO = {"slo_ttft_p95": None, "slo_itl_mean": None}


@pytest.mark.parametrize(
    ("partial", "expected"),
    [
        ({}, 10),  # the control: all 10 pods report their 8 req/s, and the capacity signal holds the fleet
        ({"state": MetricsState.PARTIAL, "pods_reporting": 5}, 10),  # five report nothing: 40 req/s is half of it
        ({"partial_rates": frozenset({"requests"})}, 10),
    ],
)
def test_a_request_rate_some_pods_do_not_report_never_shrinks_the_fleet(partial: dict[str, Any], expected: int) -> None:
    pol = policy(capacity_prior_rps=10.0, scale_down=ScaleRule(300.0, 100.0, None, 60.0, Release.LINEAR), **NO_SLO)
    old = ScalerState(recommendations=(TimedReplicas(0.0, 10), TimedReplicas(100.0, 1)))  # none in the window
    rate = 80.0 if not partial else 40.0
    d = decide(observe(10, kv=0.4, at=NOW, newest_sample_at=NOW, request_rate=rate, **partial), pol, old, NOW)
    assert d.replicas == expected, d.message
    if "state" in partial:
        assert "no scale-down on the request rate of 5 of 10 Ready pods" in d.message


@pytest.mark.parametrize(("reporting", "expected"), [(8, 1), (4, 4), (3, 8), (1, 8)])
def test_idle_pods_shrink_the_fleet_only_when_at_least_half_of_it_reports(reporting: int, expected: int) -> None:
    """HPA's rule (silent pods at the target on the way down) from half the fleet or more; from fewer, the
    word of a few idle pods does not walk the fleet down while the others say nothing."""
    pol = policy(scale_down=ScaleRule(0.0, 100.0, None, 60.0, Release.HOLD), **NO_SLO)
    state = MetricsState.COMPLETE if reporting == 8 else MetricsState.PARTIAL
    obs = observe(8, kv=0.0, waiting=0.0, at=NOW, newest_sample_at=NOW, pods_reporting=reporting, state=state)
    d = decide(obs, pol, ScalerState(recommendations=(TimedReplicas(0.0, 8),)), NOW)
    assert d.replicas == expected, d.message
    if expected == 8:
        assert Reason.METRICS_MISSING in d.limits
        assert f"no scale-down while only {reporting} of 8 Ready pods report" in d.message


def test_a_scale_up_is_named_for_the_signal_that_set_it_not_for_one_the_tolerance_held() -> None:
    # KV 87.2% on 20 replicas is within the 10% tolerance (holds 20, raw 22); the capacity signal asks for 21
    pol = policy(max_replicas=40, capacity_prior_rps=10.0, **NO_SLO)
    d = decide(observe(20, kv=0.872, request_rate=164.0, newest_sample_at=0.0), pol, ScalerState(), 0.0)
    assert (d.current, d.replicas) == (20, 21)
    assert d.reason is Reason.CAPACITY and d.state.scale_events[-1].reason == Reason.CAPACITY.value


def test_a_count_the_tolerance_held_is_named_within_tolerance() -> None:
    # KV 85% on 4 replicas: ratio 0.85 / 0.8 = 1.0625 asks for ceil(4.25) = 5, inside the 10% dead-band: hold 4
    d = decide(observe(4, kv=0.85, newest_sample_at=0.0), policy(**NO_SLO), ScalerState(), 0.0)
    assert d.replicas == 4
    assert d.reason is Reason.WITHIN_TOLERANCE and d.limits == (Reason.WITHIN_TOLERANCE,)
    assert "within 10% tolerance → hold 4" in d.message


def test_the_scale_down_window_names_the_count_it_holds_not_the_current_one() -> None:
    # 10 was recommended until 10 s ago, a rate limit left the fleet at 6: the window holds 10, so 6 stays
    pol = policy(scale_down=ScaleRule(300.0, 100.0, None, 60.0, Release.HOLD), **NO_SLO)
    state = ScalerState(recommendations=(TimedReplicas(940.0, 10), TimedReplicas(990.0, 6)))
    d = decide(observe(6, kv=0.4, at=NOW, newest_sample_at=NOW), pol, state, NOW)
    assert d.replicas == 6 and "highest recommendation in the last 5m is 10 → 6" in d.message
    linear = policy(scale_down=ScaleRule(300.0, 100.0, None, 60.0, Release.LINEAR), **NO_SLO)
    d = decide(observe(6, kv=0.4, at=NOW, newest_sample_at=NOW), linear, state, NOW)
    assert d.replicas == 6 and "10 recommended 10s ago, released linearly over 5m, still holds 10 → 6" in d.message
    # nothing recommended yet (a service watched long ago, its record lost): the window holds what it found,
    # which no signal asked for ("6 recommended 0s ago" said one had)
    watched = ScalerState(last_tick=LastTick(NOW - 10, 6, NOW - 600, 0.0, watched_since=NOW - 600))
    d = decide(observe(6, kv=0.4, at=NOW, newest_sample_at=NOW), linear, watched, NOW)
    assert "scale-down stabilizing: the 6 replicas found, nothing recommended before, released" in d.message, d


def test_the_scale_up_window_names_its_lowest_recommendation() -> None:
    pol = policy(scale_up=ScaleRule(120.0, 100.0, 4, 15.0), **NO_SLO)
    state = ScalerState(recommendations=(TimedReplicas(940.0, 3), TimedReplicas(960.0, 5)))
    d = decide(observe(5, kv=1.0, at=NOW, newest_sample_at=NOW), pol, state, NOW)
    assert d.replicas == 5 and "lowest recommendation in the last 2m is 3 → 5" in d.message


def test_a_hold_for_pods_not_reporting_is_not_called_tolerance() -> None:
    # one of four reports 90%: alone a scale-up, with the three silent ones at 0% (HPA's rule) a scale-down
    obs = observe(4, kv=0.9, pods_reporting=1, state=MetricsState.PARTIAL, newest_sample_at=0.0)
    d = decide(obs, policy(**NO_SLO), ScalerState(), 0.0)
    (kv,) = [r for r in d.recommendations if r.signal is Reason.KV_CACHE]
    assert kv.replicas == 4 and "tolerance" not in kv.message and "turn it around → hold 4" in kv.message


def test_a_capacity_low_read_back_too_small_to_divide_by_is_dropped() -> None:
    state = state_from_status(
        {
            "capacityLow": {"since": 990.0, "low": 5e-324, "before": None},
            "recommendations": [{"at": 0.0, "replicas": 4}, {"at": 100.0, "replicas": 1}],
        }
    )
    assert state.capacity_low is None
    pol = policy(capacity_prior_rps=10.0, target_capacity_utilization=0.5, **NO_SLO)
    d = decide(observe(4, kv=0.1, request_rate=1.0, at=NOW, newest_sample_at=NOW), pol, state, NOW)
    assert d.replicas < 4  # decided, not a ZeroDivisionError on every scale-down tick


def test_a_clock_stepped_back_keeps_the_capacity_low() -> None:
    low = CapacityLow(since=NOW, low=5.0, before=4.0)
    assert window_low(remember_low(low, NOW - 10, 20.0, 150.0)) == 4.0  # an NTP step of 10 s back
    far = remember_low(low, NOW - 1000, 20.0, 150.0)  # a date further ahead than a bucket: a broken clock's
    assert (far.since, far.low, far.before) == (NOW - 1000, 20.0, None)


@pytest.mark.parametrize(
    "blip",
    [
        {"state": MetricsState.MISSING, "kv_cache_utilization": None, "waiting": None},  # Prometheus did not answer
        {"kv_cache_utilization": None, "failed_queries": frozenset({"gauges"})},  # one query failed
    ],
)
@pytest.mark.parametrize("release", [Release.HOLD, Release.LINEAR])
def test_a_blip_in_the_data_leaves_the_scale_down_window_and_an_outage_restarts_it(
    blip: dict[str, Any], release: Release
) -> None:
    # 10 replicas at 76% KV until t=600, then one replica's worth: the window lets the fleet down from t=900 on
    pol = policy(scale_down=ScaleRule(300.0, 50.0, None, 60.0, release), **NO_SLO)

    def first_scale_down(blind: tuple[float, float] | None) -> tuple[float, int]:
        st, current, t = ScalerState(), 10, 0.0
        while True:
            kv = min(1.0, (7.6 if t < 600 else 0.8) / current)
            gone = blind is not None and blind[0] <= t <= blind[1]
            obs = observe(current, kv=kv, at=t, newest_sample_at=t, **(blip if gone else {}))
            d = decide(obs, pol, st, t)
            if d.replicas < current:
                return t, d.replicas
            assert d.replicas == current
            st, t = d.state, t + 10.0

    clean = first_scale_down(None)
    assert first_scale_down((clean[0] - 20.0, clean[0] - 20.0)) == clean  # was 300 s later: counted as a 10
    if release is Release.HOLD:  # its window ends at t=900, long after the drop was seen
        assert first_scale_down((clean[0] - 70.0, clean[0] - 20.0)) == clean  # less than staleAfter: still a blip
        # two minutes without data: the windows after it read a few scrapes, and a scale-down waits one window
        at, _ = first_scale_down((clean[0] - 140.0, clean[0] - 20.0))
        assert at >= clean[0] - 20.0 + 300.0


def test_a_tick_whose_ttft_is_unknown_teaches_no_capacity_at_the_slo() -> None:
    # 16 waiting at 8 req/s: the queue alone adds 2 s to a 500 ms TTFT target, but no first token was in the window
    pol = policy(capacity_prior_rps=1.0)
    for ttft, itl in ((None, 0.02), (0.3, None)):
        st = ScalerState()
        for i in range(12):
            obs = observe(4, kv=0.4, waiting=16.0, at=10.0 * i, newest_sample_at=10.0 * i, request_rate=8.0)
            d = decide(replace(obs, ttft_p95=ttft, itl_mean=itl), pol, st, 10.0 * i)
            st = d.state
        assert st.capacity_factor is None and st.capacity_rps is None  # was learned up to 1.52 req/s per replica
    known = observe(4, kv=0.4, waiting=16.0, request_rate=8.0, ttft_p95=0.3, itl_mean=0.02)
    st = ScalerState()
    for i in range(12):  # the control: within both SLOs behind that backlog, the fleet is at capacity
        d = decide(replace(known, at=10.0 * i, newest_sample_at=10.0 * i), pol, st, 10.0 * i)
        st = d.state
    assert (st.capacity_factor or 1.0) > 1.0


def test_a_comparison_that_decided_a_count_reads_true_as_printed() -> None:
    kv = decide(
        observe(10, kv=0.804, at=NOW, newest_sample_at=NOW), policy(tolerance=0.0, **NO_SLO), ScalerState(), NOW
    )
    assert kv.replicas == 11 and "KV cache 80.4% > 80% target" in kv.message  # was "80% > 80%"
    slow = observe(10, kv=0.8, at=NOW, newest_sample_at=NOW, ttft_p95=0.5004, itl_mean=0.01, waiting=40.0)
    ttft = decide(replace(slow, request_rate=20.0), policy(), ScalerState(), NOW)
    assert ttft.replicas == 11 and "TTFT P95 500.4ms > SLO 500ms" in ttft.message
    plain = decide(observe(10, kv=0.95, at=NOW, newest_sample_at=NOW), policy(**NO_SLO), ScalerState(), NOW)
    assert "KV cache 95% > 80% target" in plain.message  # apart already: no decimals added


def test_a_scale_down_held_by_the_dead_band_says_what_the_demand_needs() -> None:
    pol = policy(capacity_prior_rps=10.0, scale_down=ScaleRule(300.0, 100.0, None, 60.0, Release.HOLD), **NO_SLO)
    low = CapacityLow(NOW - 10, 5.0, None)  # 5 req/s per replica at the window's low: 36 req/s needs 9 at 80%
    st = ScalerState(recommendations=(TimedReplicas(0.0, 10), TimedReplicas(100.0, 1)), capacity_low=low)
    d = decide(observe(10, kv=0.3, at=NOW, newest_sample_at=NOW, request_rate=36.0), pol, st, NOW)
    assert d.replicas == 10 and d.reason is Reason.CONSOLIDATION_REFUSED
    assert "needs 9, within 10% of 10 → 10" in d.message  # it said "needs 10"
    # the low spans the 10 s of its bucket, not the 5-minute window it was said to
    assert "at the lowest capacity of the last 10s (5.00 req/s per replica)" in d.message
    # a low that remembers the bucket before its own covers that bucket too (half the window, 2m30s)
    before = replace(st, capacity_low=CapacityLow(NOW - 10, 7.0, 3.0))
    d = decide(observe(10, kv=0.3, at=NOW, newest_sample_at=NOW, request_rate=36.0), pol, before, NOW)
    assert "at the lowest capacity of the last 2m40s (3.00 req/s per replica) needs 15, more than the 10" in d.message


def _warming_fleet(restart_at: float | None = None, state: ScalerState | None = None) -> list[tuple[float, int, str]]:
    """A `make demo` run's start: 5 warm replicas, traffic that began with the watch. For half a minute the KV
    cache reads 24% (its requests are still arriving) and asks for 2; from then on 74%, what the load needs: 5."""
    pol = policy(scale_down=ScaleRule(60.0, None, None, 30.0, Release.LINEAR), predictive=False)
    st, current, out = state or ScalerState(), 5, []
    for i in range(19):
        t = 5.0 * i
        if restart_at is not None and t == restart_at:
            st = state_from_status(json.loads(json.dumps(state_to_status(st))))  # an operator restart
        kv = 0.24 if t < 30 else 0.74
        d = decide(observe(current, kv=kv, at=t, newest_sample_at=t), pol, st, t)
        st, current = d.state, d.replicas
        out.append((t, d.replicas, d.message))
    return out


def test_a_new_service_does_not_scale_down_while_its_first_minute_of_traffic_fills_the_gauges() -> None:
    ticks = _warming_fleet()
    assert [n for _, n, _ in ticks] == [5] * len(ticks)
    held = [m for t, _, m in ticks if 0 < t < 30]
    assert all("→ 2; no scale-down in the first 1m of watching this service" in m for m in held), held
    assert "(20s so far)" in dict((t, m) for t, _, m in ticks)[20.0]
    # a reason of its own: the log tells the end of the first minute from a scale-down window that follows it
    pol = policy(scale_down=ScaleRule(60.0, None, None, 30.0, Release.LINEAR), predictive=False)
    st = decide(observe(5, kv=0.24, at=0.0, newest_sample_at=0.0), pol, ScalerState(), 0.0).state
    second = decide(observe(5, kv=0.24, at=5.0, newest_sample_at=5.0), pol, st, 5.0)
    assert second.reason is Reason.NEWLY_WATCHED and "first 1m of watching" in second.message, second
    # the same first minute through an operator restart at t=30: the watch began at t=0, not at the restart
    assert [n for _, n, _ in _warming_fleet(restart_at=30.0)] == [5] * len(ticks)


def test_a_service_watched_before_the_record_was_kept_scales_down_as_it_did() -> None:
    # a status written before lastTick.watchedSince existed: the watch began long ago, the gauges are full
    old = ScalerState(last_tick=LastTick(-5.0, 5, -600.0, 0.0))
    ticks = _warming_fleet(state=old)
    assert dict((t, n) for t, n, _ in ticks)[20.0] == 4  # what the run did: 5 - (5 - 2) x 20s / 1m
    assert not any("first 1m of watching" in m for _, _, m in ticks)


def test_the_first_minute_of_the_watch_records_what_the_signals_asked_so_the_window_runs_from_its_start() -> None:
    # the first tick finds 4 replicas whose KV cache asks for 4; from t=5 it asks for 1. Held ticks that recorded
    # nothing would let the run of 4 last through the minute: a Hold window of 100 s then ended at 160 s, not 105
    pol = policy(scale_down=ScaleRule(100.0, None, None, 10.0, Release.HOLD), predictive=False)
    st, current, first_down = ScalerState(), 4, None
    for i in range(50):
        t = 5.0 * i
        d = decide(observe(current, kv=0.75 if t == 0 else 0.05, at=t, newest_sample_at=t), pol, st, t)
        st, current = d.state, d.replicas
        if current < 4 and first_down is None:
            first_down = t
    assert first_down == 105.0


@pytest.mark.parametrize(
    ("measured", "held"),
    [
        (60.0, False),  # a 1-minute start-up: the window is 2m, and 8 was last asked 2m30s ago
        (None, True),  # nothing measured yet: the prior's 3m and a minute
        (240.0, True),  # a 4-minute start-up: 5m, HPA's default
    ],
)
def test_an_unset_scale_down_window_is_the_time_to_ready_and_a_minute(measured: float | None, held: bool) -> None:
    pol = policy(
        scale_down=ScaleRule(240.0, 100.0, None, 60.0, Release.HOLD),
        down_window_follows_ttr=True,
        time_to_ready_prior=180.0,
        **NO_SLO,
    )
    old = ScalerState(
        recommendations=(TimedReplicas(NOW - 200.0, 8), TimedReplicas(NOW - 150.0, 1)), time_to_ready=measured
    )
    d = decide(observe(8, kv=0.0, waiting=0.0, at=NOW, newest_sample_at=NOW), pol, old, NOW)
    if not held:
        assert d.replicas < 8, d.message
        return
    window = "5m" if measured == 240.0 else "4m"
    assert d.replicas == 8 and d.reason is Reason.STABILIZING, d.message
    assert f"highest recommendation in the last {window} (time-to-ready + 1m) is 8" in d.message


def test_a_scale_down_window_the_spec_sets_does_not_follow_the_time_to_ready() -> None:
    pol = policy(scale_down=ScaleRule(300.0, 100.0, None, 60.0, Release.HOLD), **NO_SLO)
    old = ScalerState(
        recommendations=(TimedReplicas(NOW - 200.0, 8), TimedReplicas(NOW - 150.0, 1)), time_to_ready=60.0
    )
    d = decide(observe(8, kv=0.0, waiting=0.0, at=NOW, newest_sample_at=NOW), pol, old, NOW)
    assert d.replicas == 8 and "highest recommendation in the last 5m is 8" in d.message, d.message


def test_a_breach_behind_pending_replicas_is_told_slo_first_with_every_signal_pressing() -> None:
    # 20 Ready of 41 at KV 99%, 14,520 waiting, TTFT P95 13 s: every signal asks for the 41 on their way. The
    # record kept one sentence, the first in list order (the KV cache's), and the breach appeared nowhere.
    obs = observe(
        41, kv=0.99, waiting=14_520.0, ready_replicas=20, pods_reporting=20, pending_replicas=21,
        ttft_p95=13.4, itl_mean=0.059, running=20 * 256.0,
    )  # fmt: skip
    d = decide(obs, policy(slo_ttft_p95=0.5, slo_itl_mean=0.05, max_replicas=100), ScalerState(), 0.0)
    assert d.replicas == 41 and d.reason is Reason.SCALE_UP_PENDING
    assert d.message.startswith("TTFT P95 13400ms > SLO 500ms"), d.message
    told = d.message.split("; also ")[1:]
    assert [t.split(" ")[:2] for t in told] == [["ITL", "mean"], ["14520", "waiting"], ["KV", "cache"]]
    assert all(t.endswith("(asks 41)") for t in told)
    assert d.message.count("cover") == 1  # the pending replicas, said once
    assert "ordered" not in d.message  # no scale event accounts for them: when they are due is not known


@pytest.mark.parametrize(
    ("now", "told"),
    [
        (
            700.0,
            "21 pending replicas already cover it; the oldest ordered 2m ago, due in about 2m30s (time-to-ready 4m30s)",
        ),
        (
            900.0,
            "21 pending replicas already cover it; the oldest ordered 5m20s ago, 50s past the time-to-ready of 4m30s",
        ),
    ],
)
def test_a_hold_on_pending_replicas_says_when_they_are_due(now: float, told: str) -> None:
    # ordered 20 -> 30 at 580 s, 30 -> 41 at 620 s (and, before, a scale-down that ordered nothing)
    events = (ScaleEvent(300.0, 22, 20, "x"), ScaleEvent(580.0, 20, 30, "x"), ScaleEvent(620.0, 30, 41, "x"))
    obs = observe(
        41, kv=0.99, waiting=14_520.0, ready_replicas=20, pods_reporting=20, pending_replicas=21,
        ttft_p95=13.4, itl_mean=0.059, running=20 * 256.0, at=now, newest_sample_at=now,
    )  # fmt: skip
    pol = policy(slo_ttft_p95=0.5, slo_itl_mean=0.05, max_replicas=100, time_to_ready_prior=270.0)
    d = decide(obs, pol, ScalerState(scale_events=events), now)
    assert d.reason is Reason.SCALE_UP_PENDING and told in d.message, d.message


def test_the_oldest_pending_replica_is_the_oldest_of_the_newest_scale_ups_that_add_up_to_them() -> None:
    events = [ScaleEvent(100.0, 2, 6, "x"), ScaleEvent(200.0, 6, 4, "x"), ScaleEvent(300.0, 4, 7, "x")]
    assert guards.ordered_at(events, 3) == 300.0
    assert guards.ordered_at(events, 4) == 100.0  # the fourth is of the first order
    assert guards.ordered_at(events, 8) is None  # more than the events order: a rollout's, a restart's
    assert guards.ordered_at([], 1) is None
    assert guards.ordered_at(events, 0) is None  # nothing pending is ordered at no time


def test_a_signal_told_beside_the_winner_keeps_the_cap_that_set_its_count() -> None:
    # 10 Ready, 5,000 waiting and TTFT at 40x its SLO: both ask for twice the Ready replicas, the most a tick may
    obs = observe(10, kv=0.99, waiting=5_000.0, ttft_p95=20.0, itl_mean=0.02, request_rate=100.0)
    d = decide(obs, policy(slo_ttft_p95=0.5, slo_itl_mean=0.05, max_replicas=100), ScalerState(), 0.0)
    assert d.replicas == 20 and d.reason is Reason.SLO_TTFT, d.message
    assert "on 10 ready replicas (asks 20, at most 2x the ready replicas per tick)" in d.message, d.message
