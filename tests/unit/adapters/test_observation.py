"""Every shape of Prometheus answer maps to a defined observation state; none becomes a zero."""

import math
from typing import Any

import pytest

from inferscale.adapters.observation import Workload, observe
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot, PodSeries, parse_vector
from inferscale.scaling.types import MetricsState

NOW = 1_000_000.0
W = Workload(namespace="llm", current_replicas=2, ready_pods=frozenset({"p0", "p1"}))


def sample(pod: str, value: Any, **labels: str) -> dict[str, Any]:
    return {"metric": {"namespace": "llm", "pod": pod, "model_name": "m", **labels}, "value": [NOW, str(value)]}


def snapshot(
    answers: dict[str, list[dict[str, Any]]], failed: frozenset[str] = frozenset(), errors: tuple[str, ...] = ()
) -> FleetSnapshot:
    """The snapshot the reader builds from these answers; a failed query's answer is not read."""
    pods: dict[tuple[str, str, str], PodSeries] = {}
    for name, result in answers.items():
        if name not in failed:
            parse_vector(name, result, pods)
    return FleetSnapshot(at=NOW, pods=pods, failed=failed, errors=errors)


def healthy(pods: tuple[str, ...] = ("p0", "p1")) -> dict[str, list[dict[str, Any]]]:
    gauges = []
    for p in pods:
        gauges += [
            sample(p, 0.9, __name__="vllm:kv_cache_usage_perc"),
            sample(p, 3, __name__="vllm:num_requests_waiting"),
            sample(p, 10, __name__="vllm:num_requests_running"),
        ]
    return {
        "gauges": gauges,
        "kv_peak": [sample(p, 0.95) for p in pods],
        "sample_time": [sample(p, NOW - 2) for p in pods],
        "ttft_buckets": [sample(p, v, le=le) for p in pods for le, v in (("0.25", 9.0), ("0.5", 10.0), ("+Inf", 10.0))],
        "itl_sum": [sample(p, 0.4) for p in pods],
        "itl_count": [sample(p, 10.0) for p in pods],
        "requests": [sample(p, 2.0) for p in pods],
    }


def test_a_pod_without_its_kv_peak_series_counts_at_its_instant_kv() -> None:
    # p1 is at 97% now; only p0's peak (60%) came back: the fleet's peak is at least 97%, which the
    # consolidation guard refuses to scale down from
    answers = healthy()
    kv, waiting, running = "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_requests_running"
    answers["gauges"] = [
        sample(p, v, __name__=name)
        for p, level in (("p0", 0.5), ("p1", 0.97))
        for name, v in ((kv, level), (waiting, 0), (running, 5))
    ]
    answers["kv_peak"] = [sample("p0", 0.6)]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.kv_cache_utilization_max == pytest.approx(0.97)


def test_complete_answer_aggregates_over_the_targets_pods() -> None:
    obs, why = observe(snapshot(healthy()), W, "m", 60)
    assert obs.state is MetricsState.COMPLETE and obs.pods_reporting == 2
    assert obs.kv_cache_utilization == pytest.approx(0.9) and obs.kv_cache_utilization_max == pytest.approx(0.95)
    assert obs.waiting == 6 and obs.running == 20 and obs.request_rate == 4
    assert obs.itl_mean == pytest.approx(0.04)
    assert obs.ttft_p95 == pytest.approx(0.25 + 0.25 * (19 - 18) / 2)
    assert obs.prompt_token_rate is None  # never queried here: unknown, not zero
    assert "2 of 2" in why


def test_other_namespaces_pods_and_models_are_ignored() -> None:
    answers = healthy()
    answers["gauges"].append(
        {
            "metric": {"namespace": "other", "pod": "p0", "model_name": "m", "__name__": "vllm:num_requests_waiting"},
            "value": [NOW, "100"],
        }
    )
    answers["gauges"].append(sample("p1", 50, __name__="vllm:num_requests_waiting", model_name="other-model"))
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.waiting == 6


def test_prometheus_down_is_missing() -> None:
    obs, why = observe(FleetSnapshot(NOW, {}, frozenset(QUERIES), ("gauges: ConnectionError",)), W, "m", 60)
    assert obs.state is MetricsState.MISSING and obs.kv_cache_utilization is None and obs.waiting is None
    assert "Prometheus did not answer" in why


def test_empty_answer_is_missing() -> None:
    obs, why = observe(snapshot({}), W, "m", 60)
    assert obs.state is MetricsState.MISSING and "no vLLM metrics" in why


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "-Inf", "garbage"])
def test_non_finite_values_are_dropped_not_zeroed(bad: str) -> None:
    answers = healthy()
    answers["gauges"] = [
        sample(p, bad, __name__=n)
        for p in ("p0", "p1")
        for n in ("vllm:kv_cache_usage_perc", "vllm:num_requests_waiting")
    ]
    answers["kv_peak"] = [sample(p, bad) for p in ("p0", "p1")]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.kv_cache_utilization is None and obs.waiting is None
    assert obs.state is MetricsState.MISSING or obs.pods_reporting == 0


def test_some_pods_missing_is_partial() -> None:
    obs, why = observe(snapshot(healthy(("p0",))), W, "m", 60)
    assert obs.state is MetricsState.PARTIAL and obs.pods_reporting == 1 and obs.waiting == 3
    assert "1 of 2" in why


def test_old_samples_are_stale() -> None:
    answers = healthy()
    answers["sample_time"] = [sample(p, NOW - 300) for p in ("p0", "p1")]
    obs, why = observe(snapshot(answers), W, "m", 60)
    assert obs.state is MetricsState.STALE and obs.newest_sample_at == NOW - 300
    assert "300s old" in why


def test_no_ready_pods_is_missing() -> None:
    w = Workload(namespace="llm", current_replicas=2, ready_pods=frozenset(), pending_replicas=2)
    obs, why = observe(snapshot(healthy()), w, "m", 60)
    assert obs.state is MetricsState.MISSING and obs.pending_replicas == 2 and "no Ready pods" in why


def test_data_parallel_engines_of_one_pod_add_up() -> None:
    answers = healthy(("p0",))
    answers["gauges"] += [
        sample("p0", 4, __name__="vllm:num_requests_waiting", engine="1"),
        sample("p0", 0.5, __name__="vllm:kv_cache_usage_perc", engine="1"),
    ]
    w = Workload(namespace="llm", current_replicas=1, ready_pods=frozenset({"p0"}))
    obs, _ = observe(snapshot(answers), w, "m", 60)
    assert obs.waiting == 7 and obs.kv_cache_utilization == pytest.approx(0.9)


def test_no_requests_in_the_window_leaves_latency_unknown() -> None:
    answers = healthy()
    answers["ttft_buckets"] = [sample(p, 0.0, le=le) for p in ("p0", "p1") for le in ("0.25", "+Inf")]
    answers["itl_count"] = [sample(p, 0.0) for p in ("p0", "p1")]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.ttft_p95 is None and obs.itl_mean is None
    assert not math.isnan(obs.kv_cache_utilization or 0)


def test_per_request_tpot_series_answer_in_the_ttft_query_and_stay_apart() -> None:
    # One query answers both histograms; the per-request TPOT series carry histogram="tpot".
    assert "vllm:request_time_per_output_token_seconds_bucket" in QUERIES["ttft_buckets"]
    answers = healthy()
    answers["ttft_buckets"] += [
        sample(p, v, le=le, histogram="tpot")
        for p in ("p0", "p1")
        for le, v in (("0.05", 1.0), ("0.1", 10.0), ("+Inf", 10.0))
    ]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.ttft_p95 == pytest.approx(0.25 + 0.25 * (19 - 18) / 2)  # unchanged by the TPOT series
    assert obs.tpot_p95 == pytest.approx(0.05 + 0.05 * (19 - 2) / 18)


def test_engines_without_the_per_request_tpot_histogram_leave_it_unknown() -> None:
    obs, _ = observe(snapshot(healthy()), W, "m", 60)
    assert obs.tpot_p95 is None


def sglang_healthy(pods: tuple[str, ...] = ("p0", "p1")) -> dict[str, list[dict[str, Any]]]:
    """What the queries return for SGLang pods: its names, tagged dialect="sglang" by the queries."""
    tag = {"dialect": "sglang"}
    gauges = []
    for p in pods:
        gauges += [
            sample(p, 0.9, __name__="sglang:token_usage", **tag),
            sample(p, 3, __name__="sglang:num_queue_reqs", **tag),
            sample(p, 10, __name__="sglang:num_running_reqs", **tag),
        ]
    return {
        "gauges": gauges,
        "kv_peak": [sample(p, 0.95, **tag) for p in pods],
        "sample_time": [sample(p, NOW - 2, **tag) for p in pods],
        "ttft_buckets": [
            sample(p, v, le=le, **tag) for p in pods for le, v in (("0.25", 9.0), ("0.5", 10.0), ("+Inf", 10.0))
        ],
        "itl_sum": [sample(p, 0.4, **tag) for p in pods],
        "itl_count": [sample(p, 10.0, **tag) for p in pods],
        "requests": [sample(p, 2.0, **tag) for p in pods],
    }


def test_sglang_pods_observe_like_vllm_pods_under_engine_sglang() -> None:
    assert all("sglang:" in QUERIES[name] for name in QUERIES)  # every family asks for both dialects
    obs, why = observe(snapshot(sglang_healthy()), W, "m", 60, engine="sglang")
    vllm, _ = observe(snapshot(healthy()), W, "m", 60)
    assert obs.state is MetricsState.COMPLETE and "2 of 2" in why
    fields = ("kv_cache_utilization", "kv_cache_utilization_max", "waiting", "running", "request_rate")
    assert [getattr(obs, f) for f in fields] == [getattr(vllm, f) for f in fields]
    assert (obs.ttft_p95, obs.itl_mean) == (vllm.ttft_p95, vllm.itl_mean)


@pytest.mark.parametrize(
    ("answers", "engine", "says"),
    [
        (
            sglang_healthy(),
            "vllm",
            "no vLLM metrics for the 2 Ready pod(s) in llm with model_name='m'; they export SGLang metrics",
        ),
        (
            healthy(),
            "sglang",
            "no SGLang metrics for the 2 Ready pod(s) in llm with model_name='m'; they export vLLM metrics",
        ),
    ],
)
def test_pods_answering_in_the_other_dialect_are_missing_and_named(
    answers: dict[str, list[dict[str, Any]]], engine: str, says: str
) -> None:
    obs, why = observe(snapshot(answers), W, "m", 60, engine=engine)
    assert obs.state is MetricsState.MISSING and obs.waiting is None
    assert says in why and why.endswith("set spec.engine")


def test_a_bucket_written_two_ways_is_one_bucket() -> None:
    # through an upgrade to Prometheus 3 a bucket's rate is split between le="0.5" and le="0.50"-style spellings
    answers = healthy()
    answers["ttft_buckets"] = [
        sample(p, v, le=le)
        for p in ("p0", "p1")
        for le, v in (("0.25", 9.0), ("0.5", 4.0), ("0.50", 6.0), ("+Inf", 10.0))
    ]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.ttft_p95 == pytest.approx(0.25 + 0.25 * (19 - 18) / 2)  # as with one le="0.5" at 10


def test_prefix_cache_hits_answer_in_the_prompt_query_and_are_summed_only_when_every_pod_counts_them() -> None:
    answers = healthy()
    answers["prompt_tokens"] = [sample(p, 4000.0) for p in ("p0", "p1")] + [
        sample(p, 3000.0, inferscale_part="cached") for p in ("p0", "p1")
    ]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.prompt_token_rate == 8000.0  # unchanged by the cached series
    assert obs.cached_prompt_token_rate == 6000.0
    answers["prompt_tokens"].pop()  # p1 runs a vLLM without the counter: p0's hits alone are no fleet's
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.prompt_token_rate == 8000.0 and obs.cached_prompt_token_rate is None
    assert obs.partial_rates == frozenset()  # the prompts themselves are whole


def test_engines_that_do_not_count_prefix_cache_hits_leave_them_unknown() -> None:
    answers = healthy()
    answers["prompt_tokens"] = [sample(p, 4000.0) for p in ("p0", "p1")]
    obs, _ = observe(snapshot(answers), W, "m", 60)
    assert obs.prompt_token_rate == 8000.0 and obs.cached_prompt_token_rate is None


def test_nothing_found_in_an_answer_given_in_part_says_so_not_only_that_the_pods_report_nothing() -> None:
    warning = "No StoreAPIs matched for this query: store 10.0.0.7:10901 unavailable"
    snap = FleetSnapshot(NOW, {}, frozenset(), partial=frozenset(QUERIES), warnings=(f"gauges: {warning}",))
    obs, why = observe(snap, W, "m", 60)
    assert obs.state is MetricsState.MISSING
    assert (
        why == f"no vLLM metrics for the 2 Ready pod(s) in llm with model_name='m'; answered in part: gauges: {warning}"
    )
