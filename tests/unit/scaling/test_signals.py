"""Per-signal recommendations through `decide`, HPA replica-calculator tables included."""

from __future__ import annotations

import pytest
from tests.unit.scaling.helpers import observe, policy

from inferscale.scaling import LastTick, MetricsState, Reason, Recommendation, ScalerState, ScaleRule, decide, signals
from inferscale.scaling.signals import Usage, hpa_ratio

# No stabilization, no rate limits: these tables test the signals alone.
FREE = {
    "scale_up": ScaleRule(0.0, None, None),
    "scale_down": ScaleRule(0.0, None, None),
    "max_replicas": 100,
    "slo_ttft_p95": None,
    "slo_itl_mean": None,
}


def rec(decision: object, signal: Reason) -> object:
    found = [r for r in decision.recommendations if r.signal is signal]  # type: ignore[attr-defined]
    assert len(found) == 1, decision
    return found[0]


@pytest.mark.parametrize(
    ("current", "kv", "wanted", "expected"),
    [
        (2, 0.95, 3, 3),  # ceil(2 x 0.95 / 0.8) = ceil(2.375)
        (4, 1.0, 5, 5),
        (10, 0.4, 5, 5),
        (10, 0.8, 10, 10),  # on target
        (10, 0.85, 10, 10),  # ratio 1.0625: inside the 10% dead-band
        (10, 0.73, 10, 10),  # ratio 0.9125: inside
        (10, 0.70, 9, 9),  # ratio 0.875: outside, ceil(8.75)
        (3, 0.0, 0, 1),  # idle: the signal asks for none, min replicas keeps one
    ],
)
def test_kv_cache_is_hpa_ratio_on_ready_replicas(current: int, kv: float, wanted: int, expected: int) -> None:
    d = decide(observe(current, kv=kv), policy(**FREE), ScalerState(), 0.0)
    assert rec(d, Reason.KV_CACHE).replicas == wanted  # type: ignore[attr-defined]
    assert d.replicas == expected


def test_float_noise_in_the_kv_ratio_adds_no_replica() -> None:
    # 3 x 0.1 / 0.3 is 1.0000000000000002 in floats, exactly 1 in arithmetic: one replica, not two
    assert 3 * 0.1 / 0.3 > 1.0
    assert signals.ceil_count(3 * 0.1 / 0.3) == 1
    d = decide(observe(3, kv=0.1), policy(**{**FREE, "target_kv_cache": 0.3}), ScalerState(), 0.0)
    assert rec(d, Reason.KV_CACHE).replicas == 1  # type: ignore[attr-defined]
    assert d.replicas == 1


def test_kv_message_names_observed_target_and_result() -> None:
    d = decide(observe(2, kv=0.95), policy(**FREE), ScalerState(), 0.0)
    assert d.reason is Reason.KV_CACHE
    assert d.message == "KV cache 95% > 80% target on 2 ready replicas → 3"


@pytest.mark.parametrize(
    ("current", "waiting", "expected"),
    # ceil(waiting / target), the dead-band around it, and at most twice the ready replicas (2, 40).
    [(2, 40.0, 4), (2, 12.0, 3), (5, 30.0, 8), (5, 20.0, 5), (5, 21.0, 5), (5, 23.0, 6)],
)
def test_queue_wants_waiting_per_replica_at_target(current: int, waiting: float, expected: int) -> None:
    d = decide(observe(current, kv=0.8, waiting=waiting), policy(**FREE), ScalerState(), 0.0)
    assert rec(d, Reason.QUEUE).replicas == expected  # type: ignore[attr-defined]


def test_a_failed_query_holds_a_scale_down_and_names_the_query() -> None:
    # KV at 40% asks for 5 of 10; the TTFT histogram's query failed, so what its signal would ask is unknown
    failed = observe(10, kv=0.4, failed_queries=frozenset({"ttft_buckets"}))
    d = decide(failed, policy(**FREE), ScalerState(), 0.0)
    assert d.replicas == 10 and Reason.METRICS_MISSING in d.limits
    assert "no scale-down while a query failed or answered in part (ttft_buckets) → 10" in d.message
    assert decide(observe(10, kv=0.4), policy(**FREE), ScalerState(), 0.0).replicas == 5
    # a scale-up is never held by it
    assert (
        decide(observe(2, kv=0.95, failed_queries=frozenset({"itl_sum"})), policy(**FREE), ScalerState(), 0.0).replicas
        == 3
    )


def test_partial_metrics_follow_hpa_missing_metrics_case() -> None:
    # TestReplicaCalcMissingMetrics: 4 replicas, 2 report 0.4 and 0.095 of target 1.0 -> 3.
    obs = observe(4, kv=(0.4 + 0.095) / 2, waiting=None, pods_reporting=2, state=MetricsState.PARTIAL)
    r = hpa_ratio(Usage(0.4 + 0.095, 2, 4), target=1.0, tolerance=0.1, current=4)
    assert r.replicas == 3
    d = decide(obs, policy(**FREE, target_kv_cache=1.0), ScalerState(), 0.0)
    # The queue metric is missing, so HPA's rule holds: no scale-down on partial metric sets.
    assert d.replicas == 4 and Reason.METRICS_MISSING in d.limits
    d = decide(
        observe(4, kv=(0.4 + 0.095) / 2, waiting=0.0, pods_reporting=2, state=MetricsState.PARTIAL),
        policy(**FREE, target_kv_cache=1.0),
        ScalerState(),
        0.0,
    )
    assert d.replicas == 3


@pytest.mark.parametrize(
    ("usage", "expected", "held"),
    [
        # Scale-up, missing pods at 0%: 2 of 4 report 2x the target; over 4 pods that is exactly 1x: hold.
        (Usage(2.0, 2, 4), 4, True),
        # 2 of 4 report 3x the target: over 4 pods 1.5x -> 6.
        (Usage(3.0, 2, 4), 6, False),
        # Scale-down, missing pods at 100%: 1 of 4 reports 0 -> (0 + 3 x 0.5) / 2 = 0.75 -> 3.
        (Usage(0.0, 1, 4), 3, False),
        # 1 of 4 reports 0.8x; with 3 pods at 100% the ratio is 0.95, inside the dead-band: hold.
        (Usage(0.4, 1, 4), 4, True),
    ],
)
def test_hpa_partial_rules(usage: Usage, expected: int, held: bool) -> None:
    r = hpa_ratio(usage, target=0.5, tolerance=0.1, current=4)
    assert (r.replicas, r.held) == (expected, held)


def test_direction_flip_after_filling_missing_pods_holds() -> None:
    # Reporting pods at 1.2x target ask for more; counting the 3 silent pods as 0% asks for fewer.
    r = hpa_ratio(Usage(1.2, 1, 4), target=1.0, tolerance=0.1, current=4)
    assert r.held and r.replicas == 4


@pytest.mark.parametrize(
    ("ttft", "current", "expected"),
    [
        (0.6, 4, 5),  # 1.2x the 500ms SLO -> ceil(4.8)
        (5.0, 4, 8),  # 10x: capped at doubling
        (0.51, 10, 11),  # just above: at least one more
    ],
)
def test_ttft_above_slo_asks_for_proportionally_more(ttft: float, current: int, expected: int) -> None:
    pol = policy(**{**FREE, "slo_ttft_p95": 0.5})
    d = decide(observe(current, kv=0.7, ttft_p95=ttft), pol, ScalerState(), 0.0)  # loaded: KV >= 75% of target
    assert rec(d, Reason.SLO_TTFT).replicas == expected  # type: ignore[attr-defined]
    assert d.replicas == expected and d.slo_met is False


def test_a_breach_on_replicas_that_are_not_loaded_recommends_nothing() -> None:
    # Long prompts: TTFT is their prefill, not a queue. More replicas would not lower it.
    pol = policy(**{**FREE, "slo_ttft_p95": 0.5})
    d = decide(observe(14, kv=0.06, waiting=1.0, ttft_p95=1.7), pol, ScalerState(), 0.0)
    assert not [r for r in d.recommendations if r.signal is Reason.SLO_TTFT]
    assert d.slo_met is False and d.replicas < 14
    # the latency is a window's, the load this tick's: the message says which figures read idle
    told = "TTFT P95 1700ms > SLO 500ms on replicas that are not loaded now (KV cache 6%, 1 waiting): more replicas"
    assert told in d.message
    # 14 long prompts waiting at 30 req/s: 0.47 s of queue in every TTFT, more replicas lower it.
    queued = decide(observe(14, kv=0.06, waiting=14.0, ttft_p95=1.7, request_rate=30.0), pol, ScalerState(), 0.0)
    assert rec(queued, Reason.SLO_TTFT).replicas == 28  # type: ignore[attr-defined]


def test_a_per_request_tpot_breach_on_batching_replicas_asks_for_more_at_any_kv() -> None:
    # Short answers decoded next to long prefills: 10% KV, the fleet's ITL mean under target, yet the
    # P95 request streams at 90 ms per token. Four requests per replica share their steps.
    pol = policy(**{**FREE, "slo_itl_mean": 0.05, "slo_tpot_p95": 0.05})
    obs = observe(4, kv=0.1, running=16.0, itl_mean=0.03, tpot_p95=0.09)
    d = decide(obs, pol, ScalerState(), 0.0)
    r = rec(d, Reason.SLO_TPOT)
    assert r.replicas == 8  # type: ignore[attr-defined]  # 1.8x, capped at doubling
    assert "TPOT P95 90ms > SLO 50ms on 4 ready replicas" in r.message  # type: ignore[attr-defined]
    assert d.replicas == 8 and d.slo_met is False


def test_a_per_request_tpot_breach_without_batching_recommends_nothing() -> None:
    # One request per replica: its own steps are as fast as the GPU allows, company is not the cause.
    pol = policy(**{**FREE, "slo_tpot_p95": 0.05})
    d = decide(observe(4, kv=0.1, running=4.0, tpot_p95=0.09), pol, ScalerState(), 0.0)
    assert not [r for r in d.recommendations if r.signal is Reason.SLO_TPOT]
    told = "on replicas that neither batch nor are loaded now (1.0 running per replica, KV cache 10%"
    assert f"TPOT P95 90ms > SLO 50ms {told}" in d.message
    assert d.slo_met is False


def test_per_request_tpot_is_ignored_unless_the_policy_sets_its_slo() -> None:
    pol = policy(**{**FREE, "slo_itl_mean": 0.05})
    d = decide(observe(4, kv=0.1, running=16.0, itl_mean=0.03, tpot_p95=0.09), pol, ScalerState(), 0.0)
    assert not [r for r in d.recommendations if r.signal in (Reason.SLO_ITL, Reason.SLO_TPOT)]
    assert d.slo_met is True


@pytest.mark.parametrize(
    ("kv", "backlog", "expected"),
    # loaded from 75% of the 80% KV target, 60%: 0.61 is, 0.59 is not (0.6 itself is 0.6000000000000001
    # in floats, too close to call); a backlog is load at any KV
    [(0.61, False, True), (0.59, False, False), (0.59, True, True), (None, False, False)],
)
def test_replicas_are_loaded_from_three_quarters_of_the_kv_target(
    kv: float | None, backlog: bool, expected: bool
) -> None:
    assert signals.loaded(kv, 0.8, backlog) is expected


@pytest.mark.parametrize(
    ("running", "ready", "expected"),
    [(8.0, 4, True), (7.9, 4, False), (None, 4, False), (2.0, 0, False)],
)
def test_batching_means_two_requests_per_ready_replica(running: float | None, ready: int, expected: bool) -> None:
    assert signals.batching(running, ready) is expected


def test_a_breach_behind_a_queue_that_drains_in_milliseconds_recommends_nothing() -> None:
    # 14 short requests waiting at 800 req/s: 18 ms of queue. The 2-minute TTFT P95 still shows
    # a burst that has drained; more replicas would not lower today's TTFT.
    pol = policy(**{**FREE, "slo_ttft_p95": 0.5})
    d = decide(observe(4, kv=0.02, waiting=14.0, ttft_p95=4.0, request_rate=800.0), pol, ScalerState(), 0.0)
    assert not [r for r in d.recommendations if r.signal is Reason.SLO_TTFT]
    assert "not loaded" in d.message


@pytest.mark.parametrize(
    ("waiting", "rate", "slo", "expected"),
    [
        (14.0, 800.0, 0.5, False),  # 18 ms of queue
        (14.0, 30.0, 0.5, True),  # 470 ms
        (62.0, 500.0, 0.5, False),  # 124 ms: just under a quarter of the SLO
        (63.0, 500.0, 0.5, True),  # 126 ms
        (14.0, None, 0.5, False),  # no rate: the set-point (4 per replica on 4) decides
        (16.0, None, 0.5, True),
        (16.0, 0.0, 0.5, True),  # nothing completes: a stuck queue, the set-point decides
        (14.0, 30.0, None, False),  # no TTFT SLO: the set-point decides
        (None, 30.0, 0.5, False),
    ],
)
def test_a_queue_delays_when_it_adds_a_quarter_of_the_ttft_slo(
    waiting: float | None, rate: float | None, slo: float | None, expected: bool
) -> None:
    assert signals.delaying(waiting, rate, slo, 4.0, 4) is expected


def test_slo_breach_never_recommends_below_current_even_with_pending_replicas() -> None:
    pol = policy(**{**FREE, "slo_itl_mean": 0.05})
    obs = observe(
        6, kv=0.1, waiting=8.0, ready_replicas=2, pending_replicas=4, itl_mean=0.06
    )  # a backlog at the set-point
    d = decide(obs, pol, ScalerState(), 0.0)
    assert d.replicas == 6


def test_overloaded_ready_replicas_never_ask_to_remove_starting_ones() -> None:
    # HPA: not-ready pods count as 0% on a scale-up; the direction flips, so it holds.
    obs = observe(5, kv=0.95, waiting=30.0, ready_replicas=2, pods_reporting=2, pending_replicas=3)
    d = decide(obs, policy(**FREE), ScalerState(), 0.0)
    assert d.replicas == 5 and d.reason is Reason.SCALE_UP_PENDING
    assert all(r.replicas == 5 for r in d.recommendations)
    assert "the 3 replicas not Ready yet cover it" in rec(d, Reason.KV_CACHE).message  # type: ignore[attr-defined]


def test_met_slo_recommends_nothing() -> None:
    pol = policy(**{**FREE, "slo_ttft_p95": 0.5, "slo_itl_mean": 0.05})
    d = decide(observe(4, kv=0.8, ttft_p95=0.2, itl_mean=0.01), pol, ScalerState(), 0.0)
    assert not [r for r in d.recommendations if r.signal in (Reason.SLO_TTFT, Reason.SLO_ITL)]
    assert d.slo_met is True


def test_slo_met_is_unknown_without_latency() -> None:
    d = decide(observe(4, kv=0.8), policy(), ScalerState(), 0.0)
    assert d.slo_met is None


def test_pending_replicas_are_supply_on_the_way() -> None:
    # 2 ready at 95% need 3; one more is already starting: no new replica, and the reason says so.
    obs = observe(3, kv=0.95, ready_replicas=2, pods_reporting=2, pending_replicas=1)
    d = decide(obs, policy(**FREE), ScalerState(), 0.0)
    assert d.replicas == 3
    assert d.reason is Reason.SCALE_UP_PENDING
    assert "the 1 replica not Ready yet covers it" in d.message and "pending" not in d.message  # said once


@pytest.mark.parametrize(
    ("rate", "capacity", "expected"),
    [(10.0, 1.0, 13), (8.5, 1.0, 11), (0.1, 2.0, 1)],  # ceil(rate / (capacity x the default 0.8))
)
def test_capacity_signal_divides_demand_by_capacity_with_headroom(rate: float, capacity: float, expected: int) -> None:
    pol = policy(**{**FREE, "capacity_prior_rps": capacity, "predictive": False})
    d = decide(observe(1, kv=0.1, request_rate=rate), pol, ScalerState(), 0.0)
    assert rec(d, Reason.CAPACITY).replicas == expected  # type: ignore[attr-defined]


def test_learned_capacity_replaces_the_prior() -> None:
    pol = policy(**{**FREE, "capacity_prior_rps": 1.0, "predictive": False})
    d = decide(observe(1, kv=0.1, request_rate=8.5), pol, ScalerState(capacity_rps=2.0), 0.0)
    assert rec(d, Reason.CAPACITY).replicas == 6  # type: ignore[attr-defined]  # 8.5 / (2.0 x 0.8) = 5.3
    assert "learned" in rec(d, Reason.CAPACITY).message  # type: ignore[attr-defined]


def test_no_capacity_signal_without_a_capacity_figure() -> None:
    d = decide(observe(1, kv=0.1, request_rate=8.5), policy(**FREE), ScalerState(), 0.0)
    assert not [r for r in d.recommendations if r.signal is Reason.CAPACITY]


def test_a_queue_over_target_that_drains_within_the_ttft_slo_is_a_burst_and_holds() -> None:
    pol = policy(**{**FREE, "slo_ttft_p95": 0.5})
    # 121 waiting on 8 replicas (15 each vs 4) at 457 req/s: 0.26 s of work, gone long before a
    # replica ordered now is Ready.
    burst = decide(observe(8, kv=0.1, waiting=121.0, request_rate=457.0), pol, ScalerState(), 0.0)
    assert rec(burst, Reason.QUEUE).replicas == 8  # type: ignore[attr-defined]
    assert "a burst that drains in 0.26s" in burst.message and burst.replicas == 8
    # The same queue at 100 req/s is 1.2 s of work: a shortage, the queue signal doubles.
    short = decide(observe(8, kv=0.1, waiting=121.0, request_rate=100.0), pol, ScalerState(), 0.0)
    assert rec(short, Reason.QUEUE).replicas == 16  # type: ignore[attr-defined]
    # 0.6 s of work at 200 req/s: 1.21x the SLO asks for 1.21x the ready replicas, not the 2x cap.
    longer = decide(observe(8, kv=0.1, waiting=121.0, request_rate=200.0), pol, ScalerState(), 0.0)
    assert rec(longer, Reason.QUEUE).replicas == 10  # type: ignore[attr-defined]
    assert "drains in 0.60s, 1.21x the TTFT SLO" in longer.message
    # Without a completion rate the drain time is unknown: the set-point rules.
    unknown = decide(observe(8, kv=0.1, waiting=121.0), pol, ScalerState(), 0.0)
    assert rec(unknown, Reason.QUEUE).replicas == 16  # type: ignore[attr-defined]


def test_a_backlog_that_the_replicas_on_the_way_drain_orders_no_more() -> None:
    # the m-mid slice at 14:00: 28 ready complete 1,120 req/s (40 each) with 19,287 waiting and 13
    # pending; 30 replicas keep up and drain it within the 270-s time-to-ready, and 41 are on the way
    pol = policy(**{**FREE, "time_to_ready_prior": 270.0, "slo_ttft_p95": 0.5})
    obs = observe(
        41,
        kv=0.99,
        waiting=19_287.0,
        ready_replicas=28,
        pods_reporting=28,
        pending_replicas=13,
        request_rate=1_120.0,
        ttft_p95=30.0,
    )
    d = decide(obs, pol, ScalerState(), 0.0)
    assert d.replicas == 41, d.message  # doubling the ready less the pending asked for 43
    assert "30 drain the backlog within a time-to-ready → hold 41" in rec(d, Reason.QUEUE).message  # type: ignore[attr-defined]
    # the winner said what the pending replicas do: the decision does not say it again
    assert d.reason is Reason.SCALE_UP_PENDING and "already cover" not in d.message, d.message


def test_backlog_need_keeps_up_with_arrivals_and_drains_the_queue_within_the_horizon() -> None:
    # 10 ready finish 100 req/s (10 each); 150 arrive; 12,000 waiting drain over 240 s at 50 req/s.
    assert signals.backlog_need(12_000.0, 100.0, 10, 150.0, 240.0) == 20
    # a backlog means at least the completion rate arrives, whatever a stale forecast says
    assert signals.backlog_need(0.0, 100.0, 10, 50.0, 240.0) == 10
    assert signals.backlog_need(0.0, 100.0, 10, None, 240.0) == 10
    unknown: list[tuple[float | None, float | None, int]] = [(None, 100.0, 10), (10.0, None, 10), (10.0, 0.0, 10)]
    for waiting, rate, ready in [*unknown, (10.0, 100.0, 0)]:
        assert signals.backlog_need(waiting, rate, ready, 150.0, 240.0) is None


def test_pending_replicas_absorb_an_overload_ask_up_to_what_drains_the_backlog() -> None:
    ask = Recommendation(Reason.QUEUE, 42, 900.0, 4.0, "900 waiting on 21 ready replicas → 42")
    # 36 on the way (15 pending); 24 drain the backlog
    held = signals.behind_pending(ask, 36, 15, 24)
    assert held.replicas == 36 and held.signal is Reason.QUEUE and "hold 36" in held.message
    assert signals.behind_pending(ask, 36, 15, 40).replicas == 40  # the backlog needs more
    assert signals.behind_pending(ask, 23, 5, 20).replicas == 23  # a first ask the pending already cover
    assert signals.behind_pending(ask, 36, 0, 24) is ask  # nothing pending: the ask stands
    assert signals.behind_pending(ask, 36, 15, None) is ask  # unknown need: the ask stands


def test_arrival_rate_adds_the_queue_growth_to_the_completions() -> None:
    assert signals.arrival_rate(10.0, 300.0, (0.0, 100.0), 10.0, 60.0) == pytest.approx(30.0)
    assert signals.arrival_rate(10.0, 50.0, (0.0, 100.0), 10.0, 60.0) == 10.0  # draining: never below completions
    assert signals.arrival_rate(10.0, 300.0, (0.0, 100.0), 120.0, 60.0) == 10.0  # too old to be a growth rate
    assert signals.arrival_rate(10.0, 300.0, None, 10.0, 60.0) == 10.0
    assert signals.arrival_rate(None, 300.0, (0.0, 100.0), 10.0, 60.0) is None


def test_a_surge_on_an_idle_fleet_is_sized_by_arrivals_not_completions() -> None:
    # one replica that completed 13 req/s over the last minute; 20,000 requests piled up in 10 s
    # a 60-s time-to-ready makes the drain term worth replicas of its own (at 240 s it rounds away)
    pol = policy(capacity_prior_rps=190.0, max_replicas=100, time_to_ready_prior=60.0)
    before = ScalerState(last_tick=LastTick(0.0, 1, -600.0, 0.0))
    obs = observe(1, kv=0.6, waiting=20_000.0, request_rate=13.0, ttft_p95=30.0, itl_mean=0.02)
    d = decide(obs, pol, before, 10.0)
    cap = next(r for r in d.recommendations if r.signal is Reason.CAPACITY)
    # arrivals 13 + 2,000/s, plus 20,000 drained within a time-to-ready, at 80% of 190 req/s per replica:
    # ceil((13 + 2,000 + 333.3) / 152) = ceil(15.4) = 16; the arrivals alone would be ceil(13.2) = 14
    assert cap.replicas == 16
    # without the previous tick only what is waiting adds to the completions: ceil((13 + 333.3) / 152) = 3,
    # where the completions alone would be 1
    fresh = decide(obs, pol, ScalerState(), 10.0)
    assert next(r for r in fresh.recommendations if r.signal is Reason.CAPACITY).replicas == 3
    # behind the backlog the ask stands at once, and is remembered for the next tick
    assert d.state.last_tick == LastTick(10.0, 1, -600.0, 20_000.0, 10.0, capacity_ask=cap.replicas)


def test_a_ratio_over_a_vanishing_target_asks_for_the_most_replicas_not_an_overflow() -> None:
    # kvCacheUtilization 1e-310 is a fraction in (0, 1]: the ratio is infinite, and math.ceil of it raised
    # OverflowError on every tick of the service
    ratio = hpa_ratio(Usage(total=0.5, reporting=2, ready=2), 1e-310, 0.1, current=2)
    assert ratio.replicas == signals.MAX_COUNT
    d = decide(observe(2, kv=0.5), policy(target_kv_cache=1e-310, max_replicas=8), ScalerState(), 0.0)
    assert d.replicas > 2 and d.reason is Reason.RATE_LIMITED  # as far up as the scale-up limit lets it


def test_the_backlog_need_behind_pending_replicas_counts_the_queue_s_growth_as_arrivals() -> None:
    # 10 Ready finish 200 req/s while the queue grew from 1,000 to 2,000 in 10 s: 300 arrive. Without a forecast
    # the need read the completions alone: (200 + 2,000 / 270 s) / 20 per replica = 11, where 16 keep up
    pol = policy(**{**FREE, "time_to_ready_prior": 270.0})
    obs = observe(12, kv=0.99, waiting=2_000.0, ready_replicas=10, pods_reporting=10, pending_replicas=2,
                  request_rate=200.0, at=10.0, newest_sample_at=10.0)  # fmt: skip
    st = ScalerState(last_tick=LastTick(0.0, 10, -600.0, 1_000.0, watched_since=-600.0))
    d = decide(obs, pol, st, 10.0)
    assert "with 2 pending, 16 drain the backlog within a time-to-ready → 16" in rec(d, Reason.QUEUE).message  # type: ignore[attr-defined]
