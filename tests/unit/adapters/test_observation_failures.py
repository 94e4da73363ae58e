"""One failed Prometheus query among answered ones: the observation holds, and says which query failed."""

from typing import Any

from tests.unit.adapters.test_observation import NOW, W, healthy, sample, snapshot

from inferscale.adapters.observation import observe
from inferscale.adapters.prometheus import FleetSnapshot
from inferscale.scaling import Policy, Reason, ScalerState, TimedReplicas, decide
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
