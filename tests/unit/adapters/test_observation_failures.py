"""One failed Prometheus query among answered ones: the observation holds, and says which query failed."""

from dataclasses import replace
from typing import Any

from tests.unit.adapters.test_observation import NOW, W, healthy, sample, snapshot

from inferscale.adapters.observation import observe
from inferscale.adapters.prometheus import FleetSnapshot
from inferscale.handlers.status import metrics_condition
from inferscale.scaling import Policy, Reason, ScalerState, ScaleRule, TimedReplicas, decide
from inferscale.scaling.types import MetricsState


def _snapshot(answers: dict[str, list[dict[str, Any]]], failed: str) -> FleetSnapshot:
    return snapshot(answers, frozenset({failed}), (f"{failed}: Timeout",))


def test_a_failed_sample_time_query_is_stale_not_fresh() -> None:
    answers = healthy()
    answers["sample_time"] = [sample(p, NOW - 240) for p in ("p0", "p1")]  # the gauges are 4 minutes old
    answers["gauges"] = [
        sample(p, v, __name__=name)
        for p in ("p0", "p1")
        for name, v in (
            ("vllm:kv_cache_usage_perc", 0.1),
            ("vllm:num_requests_waiting", 0),
            ("vllm:num_requests_running", 1),
        )
    ]
    obs, why = observe(_snapshot(answers, "sample_time"), W, "m", 60.0)
    assert obs.state is MetricsState.STALE
    assert "sample_time" in why and "failed" in why
    # a service recommended 1 for the whole window would otherwise be scaled down on those gauges
    state = ScalerState(recommendations=(TimedReplicas(NOW - 900, 2), TimedReplicas(NOW - 600, 1)))
    d = decide(obs, Policy(1, 8), state, NOW)
    assert d.replicas == 2 and d.reason is Reason.METRICS_STALE


def test_a_failed_gauges_query_names_the_query_instead_of_a_sample_age() -> None:
    obs, why = observe(_snapshot(healthy(), "gauges"), W, "m", 60.0)
    assert obs.state is MetricsState.STALE
    assert "gauges" in why and "failed" in why and "old" not in why


def _gauges(values: dict[str, dict[str, float | str]]) -> list[dict[str, Any]]:
    return [sample(p, v, __name__=name) for p, by_name in values.items() for name, v in by_name.items()]


def test_a_pod_missing_the_queue_gauge_is_not_counted_as_an_idle_one() -> None:
    answers = healthy()
    kv, waiting, running = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"
    answers["gauges"] = _gauges({"p0": {kv: 0.3, waiting: 0, running: 3}, "p1": {kv: 0.3, waiting: "NaN", running: 3}})
    obs, why = observe(snapshot(answers), W, "m", 60.0)
    assert obs.state is MetricsState.PARTIAL and obs.pods_reporting == 1 and obs.waiting == 0
    assert "1 of 2" in why
    # p1's queue is unknown, not empty: a light load on p0 must not shrink the fleet through a window
    state = ScalerState(recommendations=(TimedReplicas(NOW - 900, 2),))
    for t in range(0, 420, 15):
        d = decide(replace(obs, at=NOW + t, newest_sample_at=NOW + t - 2), Policy(1, 8), state, NOW + t)
        assert d.replicas == 2, d.message
        state = d.state


def test_pods_lacking_a_gauge_everywhere_are_missing_and_named() -> None:
    answers = healthy()
    answers["gauges"] = _gauges({p: {"vllm:kv_cache_usage_perc": 0.3} for p in ("p0", "p1")})
    obs, why = observe(snapshot(answers), W, "m", 60.0)
    assert obs.state is MetricsState.MISSING and obs.waiting is None
    assert "without vllm:num_requests_waiting" in why


def test_gauges_without_a_sample_time_are_of_unknown_age() -> None:
    answers = healthy()
    answers["sample_time"] = [sample("p0", NOW - 2)]  # p1's gauges could be Prometheus's lookback
    obs, _ = observe(snapshot(answers), W, "m", 60.0)
    assert obs.state is MetricsState.PARTIAL and obs.pods_reporting == 1
    answers["sample_time"] = []
    obs, why = observe(snapshot(answers), W, "m", 60.0)
    assert obs.state is MetricsState.STALE and "vllm:num_requests_running" in why


def test_a_failed_latency_query_holds_a_fleet_whose_load_would_let_it_shrink() -> None:
    # the TTFT histogram's query times out (the slowest of a tick): its signal is unknown, not met
    kv, waiting, running = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"
    answers = healthy()
    answers["gauges"] = _gauges({p: {kv: 0.1, waiting: 0, running: 1} for p in ("p0", "p1")})  # a light load
    answers["kv_peak"] = [sample(p, 0.15) for p in ("p0", "p1")]
    del answers["ttft_buckets"]
    obs, why = observe(_snapshot(answers, "ttft_buckets"), W, "m", 60.0)
    assert obs.state is MetricsState.COMPLETE and obs.ttft_p95 is None
    assert obs.failed_queries == frozenset({"ttft_buckets"}) and "unknown this tick: ttft_buckets" in why
    no_window = Policy(1, 8, scale_down=ScaleRule(0.0, None, None))
    d = decide(obs, no_window, ScalerState(), NOW)
    assert d.replicas == 2 and "no scale-down while a query failed or answered in part (ttft_buckets)" in d.message
    answered, _ = observe(snapshot(answers), W, "m", 60.0)  # the same load, the query answered (empty: idle)
    assert decide(answered, no_window, ScalerState(), NOW).replicas == 1


def test_a_busy_pod_without_a_request_counter_holds_the_fleet_and_teaches_nothing() -> None:
    # p1 holds requests but its counter series is missing (relabelled away, a broken exporter): the 2 req/s
    # of p0 alone is half the fleet's rate, and a light KV load would otherwise let the fleet shrink
    kv, waiting, running = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"
    answers = healthy()
    answers["gauges"] = _gauges({p: {kv: 0.1, waiting: 0, running: 1} for p in ("p0", "p1")})
    answers["kv_peak"] = [sample(p, 0.15) for p in ("p0", "p1")]
    answers["requests"] = [sample("p0", 2.0)]
    obs, why = observe(snapshot(answers), W, "m", 60.0)
    assert obs.state is MetricsState.COMPLETE and obs.request_rate == 2.0
    assert obs.partial_rates == frozenset({"requests"}) and "busy pods without requests" in why
    no_window = Policy(1, 8, scale_down=ScaleRule(0.0, None, None))
    d = decide(obs, no_window, ScalerState(), NOW)
    assert d.replicas == 2 and "no scale-down while busy pods do not report their request rate" in d.message
    # an idle pod without the counter has served nothing yet (SGLang creates the series on the first request)
    answers["gauges"] = _gauges({"p0": {kv: 0.1, waiting: 0, running: 1}, "p1": {kv: 0.0, waiting: 0, running: 0}})
    idle, why = observe(snapshot(answers), W, "m", 60.0)
    assert idle.partial_rates == frozenset() and "without" not in why
    assert decide(idle, no_window, ScalerState(), NOW).replicas == 1


def _loaded_within_slo() -> tuple[dict[str, Any], Policy]:
    """Two pods at 80% KV with no queue, every request within the TTFT SLO: a tick that teaches capacity."""
    kv, waiting, running = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"
    answers = healthy()
    answers["gauges"] = _gauges({p: {kv: 0.8, waiting: 0, running: 8} for p in ("p0", "p1")})
    answers["ttft_buckets"] = [sample(p, v, le=le) for p in ("p0", "p1") for le, v in (("0.25", 10.0), ("+Inf", 10.0))]
    return answers, Policy(1, 8, capacity_prior_rps=1.0)


def test_a_partial_request_rate_is_not_a_capacity_sample() -> None:
    # a loaded, SLO-compliant fleet teaches its rate per replica; with one busy pod's counter missing
    # the rate covers half the fleet and would halve the learned capacity
    answers, pol = _loaded_within_slo()
    whole, _ = observe(snapshot(answers), W, "m", 60.0)
    assert decide(whole, pol, ScalerState(), NOW).state.capacity_rps is not None  # the control: it learns
    answers["requests"] = [sample("p0", 2.0)]
    partial, _ = observe(snapshot(answers), W, "m", 60.0)
    assert partial.partial_rates == frozenset({"requests"})
    assert decide(partial, pol, ScalerState(), NOW).state.capacity_rps is None


def test_a_partial_answer_holds_a_scale_down_and_says_why() -> None:
    # a Thanos querier answered the request rate from the stores that answered: p1's 2 req/s may be missing
    kv, waiting, running = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"
    answers = healthy()
    answers["gauges"] = _gauges({p: {kv: 0.1, waiting: 0, running: 1} for p in ("p0", "p1")})
    answers["kv_peak"] = [sample(p, 0.15) for p in ("p0", "p1")]
    warning = "requests: No StoreAPIs matched for this query"
    snap = replace(snapshot(answers), partial=frozenset({"requests"}), warnings=(warning,))
    obs, why = observe(snap, W, "m", 60.0)
    assert obs.failed_queries == frozenset({"requests"}) and f"answered in part: {warning}" in why
    no_window = Policy(1, 8, scale_down=ScaleRule(0.0, None, None))
    d = decide(obs, no_window, ScalerState(), NOW)
    assert d.replicas == 2 and "answered in part (requests)" in d.message
    whole, _ = observe(snapshot(answers), W, "m", 60.0)  # the same answers without the warning
    assert decide(whole, no_window, ScalerState(), NOW).replicas == 1


def test_a_partial_latency_answer_is_no_capacity_sample_and_the_condition_says_partial() -> None:
    # the TTFT query, the slowest, answered without a store's pods (perhaps the ones over the SLO): the fleet reads
    # loaded and within the SLO, which would raise the learned capacity on half the evidence
    answers, pol = _loaded_within_slo()
    whole, why = observe(snapshot(answers), W, "m", 60.0)
    assert decide(whole, pol, ScalerState(), NOW).state.capacity_rps is not None  # the control: it learns
    assert metrics_condition(whole, why).reason == "MetricsComplete"
    warning = "ttft_buckets: store 10.0.0.3:10901 did not answer"
    snap = replace(snapshot(answers), partial=frozenset({"ttft_buckets"}), warnings=(warning,))
    partial, why = observe(snap, W, "m", 60.0)
    assert decide(partial, pol, ScalerState(), NOW).state.capacity_rps is None
    condition = metrics_condition(partial, why)
    assert (condition.status, condition.reason) == ("True", "MetricsPartial")
    assert warning in condition.message and "no scale-down" in condition.message
