from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from inferscale.perf import replica_capacity_rps, replica_profile
from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import _Latency, _on_grid, _table, cancel_newest, run_fluid, ttft_quantile
from inferscale.sim.outage import PROMETHEUS_DOWN, Outage
from inferscale.sim.run import RunConfig, Workload, run_policy
from inferscale.sim.traces import RatePoint

PROFILE = replica_profile("llama-3.1-8b", "h100-80gb")
CAPACITY = replica_capacity_rps(PROFILE, 500, 100, 0.5, 0.05)


class Fixed:
    interval = 10.0

    def __init__(self, replicas: int) -> None:
        self.name = f"fixed-{replicas}"
        self.replicas = replicas
        self.seen: list[Observation] = []

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        self.seen.append(obs)
        return self.replicas


def cfg(initial: int, ttr: str = "120s") -> RunConfig:
    return RunConfig(
        EngineConfig.from_profile(PROFILE), PROFILE.gpus, 0.5, 0.05, TimeToReady.parse(ttr), initial, warmup=10.0
    )


def flat(rate: float, hours: float = 2.0) -> list[RatePoint]:
    return [RatePoint(600.0 * i, rate, 500.0, 100.0) for i in range(int(hours * 6))]


def test_enough_replicas_meet_the_slo_and_bill_their_lifetime() -> None:
    replicas = 4
    r = run_fluid(flat(0.8 * replicas * CAPACITY), 7200.0, Fixed(replicas), PROFILE, cfg(replicas))
    assert r.scores.slo_attainment > 0.999 and r.scores.unfinished == 0
    assert r.scores.gpu_hours == pytest.approx(replicas * 2.0)
    assert r.scores.requests == pytest.approx(0.8 * replicas * CAPACITY * 7200, rel=1e-6)


def test_too_few_replicas_build_a_backlog_and_miss() -> None:
    policy = Fixed(2)
    r = run_fluid(flat(4 * CAPACITY), 7200.0, policy, PROFILE, cfg(2))
    assert r.scores.slo_attainment < 0.05 and r.scores.unfinished > 0
    late = policy.seen[-1]
    assert late.waiting is not None and late.waiting > 1000
    assert late.kv_cache_utilization is not None and late.kv_cache_utilization > 0.5
    # The frontend sees the offered load; completions only what two replicas serve.
    assert late.arrival_rate == pytest.approx(4 * CAPACITY)
    assert late.request_rate is not None and late.request_rate < 0.6 * 4 * CAPACITY


def test_a_window_whose_requests_fit_no_replica_is_served_by_none_and_billed() -> None:
    # a 600,000-token request does not fit one replica's KV cache: the engine refuses it at request level, and
    # the fluid replay counts the window's requests as missed instead of dividing by a capacity of zero
    huge = [RatePoint(0.0, CAPACITY, 500.0, 100.0), RatePoint(600.0, 1.0, 600_000.0, 100.0)]
    r = run_fluid(huge, 1200.0, Fixed(2), PROFILE, cfg(2))
    fits = CAPACITY * 600.0
    assert r.scores.requests == pytest.approx(fits + 600.0, abs=1.0)
    assert r.scores.slo_attainment == pytest.approx(fits / (fits + 600.0), rel=0.01)
    assert r.scores.gpu_hours == pytest.approx(2 * 1200.0 / 3600.0)


def test_new_replicas_serve_only_after_their_time_to_ready() -> None:
    r = run_fluid(flat(CAPACITY), 3600.0, Fixed(6), PROFILE, cfg(2, ttr="300s"))
    ready = dict(zip(r.timeline.at, r.timeline.ready, strict=True))
    provisioned = dict(zip(r.timeline.at, r.timeline.provisioned, strict=True))
    assert ready[60.0] == 2 and provisioned[60.0] == 6
    assert ready[300.0] == 2 and ready[360.0] == 6
    # Billing starts at creation (t = 10 s), not at Ready.
    assert r.scores.gpu_hours == pytest.approx((2 * 3600 + 4 * 3590) / 3600)


@pytest.mark.parametrize("rate", [1.0, 2.0])
def test_gpu_utilization_is_the_busy_fraction_the_request_level_engine_reports(rate: float) -> None:
    """HPA reads the same metric in both modes: the share of time an engine steps, averaged over a
    minute. One replica with Poisson arrivals of 500/100 tokens is busy about half the time at 1 rps,
    while its mean batch is 0.67 (which min(1, batch) would report) and 1.3 at 2 rps (read as 1.0)."""
    rng = np.random.default_rng(0)
    n = rng.poisson(rate * 1800)
    requests = Workload(
        "poisson", np.sort(rng.uniform(0, 1800, n)), np.full(n, 500, np.int64), np.full(n, 100, np.int64), 1800.0
    )
    level, fluid = Fixed(1), Fixed(1)
    run_policy(requests, level, cfg(1))
    run_fluid([RatePoint(0.0, rate, 500.0, 100.0)], 1800.0, fluid, PROFILE, cfg(1))

    def mean_util(policy: Fixed) -> float:
        utils = [o.gpu_utilization for o in policy.seen if o.at >= 120 and o.gpu_utilization is not None]
        return sum(utils) / len(utils)

    batch = [o.running for o in fluid.seen if o.at >= 120 and o.running is not None]
    assert mean_util(fluid) == pytest.approx(mean_util(level), abs=0.05)
    assert min(1.0, sum(batch) / len(batch)) - mean_util(level) > 0.15


def test_the_latencies_a_policy_sees_span_the_histograms_two_minutes() -> None:
    # 115 s at a P95 of 100 ms, then one 5-s step at 10 s: the operator's 2-minute histogram shows a P95 well under
    # the new step's (the step holds 1/24 of the window's requests), where the step's own value reached a
    # policy at once
    latency = _Latency(5.0)
    for _ in range(23):
        latency.add(0.1, 0.02, 10.0)
    latency.add(10.0, 0.04, 10.0)
    p95 = latency.ttft_p95()
    assert p95 is not None and 0.1 < p95 < 2.0
    assert latency.itl_mean() == pytest.approx((23 * 0.02 + 0.04) / 24)
    for _ in range(24):  # two minutes later the window holds only the new load
        latency.add(10.0, 0.04, 10.0)
    assert latency.ttft_p95() == pytest.approx(10.0, rel=1e-6)
    assert _Latency(5.0).ttft_p95() is None and _Latency(5.0).itl_mean() is None  # nothing served: unknown


def test_the_scores_ttft_quantiles_are_the_requests_not_the_steps_p95s() -> None:
    # a steady load: every step has one P95; under the exponential tail the attainment assumes, P99 sits at
    # ln 100 / ln 20 of it (the steps' P95s read P99 = P95)
    r = run_fluid(flat(0.8 * 4 * CAPACITY), 7200.0, Fixed(4), PROFILE, cfg(4))
    p95, p99 = r.scores.ttft_p95_s, r.scores.ttft_p99_s
    assert p95 is not None and p99 is not None
    assert p99 == pytest.approx(p95 * math.log(100) / math.log(20), rel=1e-3)
    # a tenth of the requests at a P95 of 10 s: their tail, not the worst steps' P95, sets the requests' P95
    assert ttft_quantile([(0.1, 90.0), (10.0, 10.0)], 0.95) == pytest.approx(2.314, abs=1e-3)
    # requests nobody served wait a fixed time: 5% waited 30 s, so the P99 is that wait
    assert ttft_quantile([(0.1, 95.0)], 0.99, [(30.0, 5.0)]) == pytest.approx(30.0)
    assert ttft_quantile([(0.1, 99.5)], 0.99, [(30.0, 0.5)]) < 0.2
    assert math.isnan(ttft_quantile([], 0.95))


def test_the_fluid_timeline_records_the_ttft_the_policy_observes() -> None:
    outage = Outage(PROMETHEUS_DOWN, 1800.0, 2400.0)
    policy = Fixed(4)
    policy.name = "keda-queue"  # a policy that reads Prometheus
    r = run_fluid(flat(2 * CAPACITY), 3600.0, policy, PROFILE, replace(cfg(4), outage=outage))
    inside = [p for at, p in zip(r.timeline.at, r.timeline.ttft_p95, strict=True) if outage.covers(at)]
    assert inside and all(p is None for p in inside)  # Prometheus holds nothing: nothing observed
    after = [p for at, p in zip(r.timeline.at, r.timeline.ttft_p95, strict=True) if at >= 2400.0 + 120.0]
    assert after and all(p is not None and p < 0.5 for p in after)


def test_a_window_no_replica_can_hold_is_refused_not_queued_for_the_next() -> None:
    # vLLM refuses a prompt that can never fit the KV cache: missed and gone, as the request-level engine counts it
    normal = RatePoint(0.0, 0.7 * 4 * CAPACITY, 500.0, 100.0)
    alone = run_fluid([normal, normal._replace(t=600.0)], 1200.0, Fixed(4), PROFILE, cfg(4)).scores
    policy = Fixed(4)
    curve = [normal._replace(mean_input=600_000.0), normal._replace(t=600.0)]
    after = run_fluid(curve, 1200.0, policy, PROFILE, cfg(4)).scores
    n = 0.7 * 4 * CAPACITY * 600
    assert after.unfinished == round(n)  # the refused window, all of it
    assert after.slo_attainment * after.requests == pytest.approx(alone.slo_attainment * n, rel=0.01)
    assert all(o.waiting is not None and o.waiting < 100 for o in policy.seen if o.at > 600.0)  # no phantom queue
    assert after.itl_mean_s == pytest.approx(alone.itl_mean_s, rel=1e-6)  # of the requests served


def test_the_ttft_p95_a_policy_sees_is_prometheus_s_interpolation_over_vllm_s_buckets() -> None:
    # a steady P95 of 3 s under the exponential tail: 91.8% of requests at or under 2.5 s, 99.3% under 5 s;
    # histogram_quantile places the 95th percentile by linear interpolation between those bounds
    latency = _Latency(5.0)
    for _ in range(24):
        latency.add(3.0, 0.02, 10.0)
    at_2_5, at_5 = 1 - 0.05 ** (2.5 / 3.0), 1 - 0.05 ** (5.0 / 3.0)
    assert latency.ttft_p95() == pytest.approx(2.5 + 2.5 * (0.95 - at_2_5) / (at_5 - at_2_5), rel=1e-9)
    assert latency.ttft_p95() == pytest.approx(3.571, abs=1e-3)  # over a 3.5-s target, as a cluster reads it


def test_a_backlog_the_fleet_drains_within_the_grace_is_not_unfinished() -> None:
    # the last minute 1% over what 4 replicas serve: its backlog drains in under a second of the 120 s the
    # request-level replay gives requests in flight at the end; 4 times over, most of it does not
    most = _table(PROFILE, _on_grid(500.0), _on_grid(100.0)).mu_max  # what a replica serves at most
    for over, unfinished in ((1.01, False), (4.0, True)):
        curve = [RatePoint(0.0, 0.7 * 4 * most, 500.0, 100.0), RatePoint(60.0, over * 4 * most, 500.0, 100.0)]
        r = run_fluid(curve, 120.0, Fixed(4), PROFILE, cfg(4))
        assert (r.scores.unfinished > 0) is unfinished


def test_a_scale_down_cancels_the_youngest_pending_replicas_as_a_replicaset_does() -> None:
    # (ready_at, creation serial): the youngest (3) is due before the second (2), whose start is slower
    pending = [(100.0, 1), (300.0, 2), (200.0, 3)]
    heapq.heapify(pending)
    assert cancel_newest(pending, 1) == 1
    assert sorted(pending) == [(100.0, 1), (300.0, 2)]  # not the one due last
    assert pending[0] == (100.0, 1)  # still a heap: the next Ready is the earliest
    assert cancel_newest(pending, 5) == 2 and pending == []  # the rest come off the Ready replicas
    assert cancel_newest(pending, 0) == 0


class Timetable(Fixed):
    """{from_time: replicas}, as test_run's Scripted."""

    def __init__(self, plan: dict[int, int]) -> None:
        super().__init__(0)
        self.plan = plan

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        self.seen.append(obs)
        return self.plan[max(t for t in self.plan if t <= now)]


def test_a_fluid_timeline_row_counts_the_minute_it_closes_and_no_decision_is_made_at_the_end() -> None:
    policy = Timetable({0: 2, 120: 5, 360: 3, 600: 9})
    r = run_fluid(flat(0.5 * CAPACITY, hours=1.0), 600.0, policy, PROFILE, cfg(2, ttr="50s"))
    assert r.timeline.provisioned == [2, 2, 5, 5, 5, 5, 3, 3, 3, 3]  # the ask at 120 is the next row's
    assert r.scores.scale_actions == 2  # the 9 asked for at 600, the replay's end, is no action
    assert sum(r.timeline.provisioned) * 60 * PROFILE.gpus == pytest.approx(r.scores.gpu_hours * 3600)
