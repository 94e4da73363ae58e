"""The operator's per-service series follow the services: a condition the status dropped, or a service deleted,
leaves no series behind to hold an alert firing."""

from __future__ import annotations

from typing import Any

from tests.unit.handlers.test_reconcile import GOOD, NOW, FakeKube, runtime, saturated_tick, svc, tick

from inferscale.handlers import metrics
from inferscale.handlers.metrics import REGISTRY
from inferscale.handlers.reconcile import reconcile


def _condition(ns: str, name: str, kind: str) -> float | None:
    return REGISTRY.get_sample_value("inferscale_condition", {"namespace": ns, "name": name, "type": kind})


def _not_ready(ns: str, name: str, reason: str) -> float | None:
    return REGISTRY.get_sample_value("inferscale_not_ready", {"namespace": ns, "name": name, "reason": reason})


def _in(ns: str, body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["namespace"] = ns
    return body


async def test_a_condition_the_status_no_longer_has_leaves_the_gauge() -> None:
    kube = FakeKube()
    at = saturated_tick(2, NOW)
    at.deployments = {("m1", "llm"): at.deployments[("ns", "llm")]}
    at.pods = {"m1": at.pods["ns"]}
    await reconcile(runtime(kube), at, _in("m1", svc(GOOD)))
    assert _condition("m1", "llm", "CapacityBlocked") == 0 and _condition("m1", "llm", "Ready") == 1
    # the target is deleted: the status now carries Ready=False (TargetNotFound) and not CapacityBlocked
    assert _not_ready("m1", "llm", "TargetNotFound") is None
    await reconcile(runtime(FakeKube()), tick(at=NOW + 10, deployments={}), _in("m1", svc(GOOD)))
    assert _condition("m1", "llm", "Ready") == 0
    assert _condition("m1", "llm", "CapacityBlocked") is None
    # and why, for an alert that tells a refused scale or a missing target from a Deployment scaled to 0 by hand
    assert _not_ready("m1", "llm", "TargetNotFound") == 1
    await reconcile(runtime(FakeKube()), at, _in("m1", svc(GOOD)))  # the target is back: no reason left
    assert _not_ready("m1", "llm", "TargetNotFound") is None


def test_a_service_no_longer_listed_loses_its_series_unless_its_namespace_went_unread() -> None:
    for ns in ("m2", "m3"):
        metrics.set_conditions(
            ns, "llm", [("MetricsAvailable", False, "MetricsMissing"), ("Ready", False, "ScaleFailed")]
        )
        metrics.DESIRED.labels(ns, "llm").set(3)
        metrics.DECISIONS.labels(ns, "llm", "KVCache").inc()
    metrics.forget_services({("m2", "llm")}, lambda ns: ns == "m3")  # m3 could not be listed: kept
    assert _condition("m3", "llm", "MetricsAvailable") == 0
    metrics.forget_services({("m2", "llm")}, lambda ns: False)  # m3's service is gone
    assert _condition("m3", "llm", "MetricsAvailable") is None
    assert _not_ready("m3", "llm", "ScaleFailed") is None
    assert REGISTRY.get_sample_value("inferscale_desired_replicas", {"namespace": "m3", "name": "llm"}) is None
    labels = {"namespace": "m3", "name": "llm", "reason": "KVCache"}
    assert REGISTRY.get_sample_value("inferscale_decisions_total", labels) is None
    assert _condition("m2", "llm", "MetricsAvailable") == 0  # the listed one keeps its own
    assert REGISTRY.get_sample_value("inferscale_desired_replicas", {"namespace": "m2", "name": "llm"}) == 3


def test_a_service_has_one_model_series_the_one_it_was_last_decided_on() -> None:
    def model(name: str, pods: str = "vllm-.+") -> float | None:
        return REGISTRY.get_sample_value(
            "inferscale_service_model", {"namespace": "m4", "name": "s", "model_name": name, "pods": pods}
        )

    metrics.set_model("m4", "s", "llama", "vllm-.+")
    metrics.set_model("m4", "s", "qwen", "vllm-.+")  # the spec's model.name edited
    assert (model("llama"), model("qwen")) == (None, 1)
    metrics.set_model("m4", "s", "qwen", "qwen-.+")  # and its scaleTargetRef
    assert (model("qwen"), model("qwen", "qwen-.+")) == (None, 1)
    metrics.forget_services(set(), lambda ns: False)
    assert model("qwen", "qwen-.+") is None
