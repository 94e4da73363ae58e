"""A scale-down first sets the Ready pods' deletion costs to the requests they hold, so the ReplicaSet
removes the idlest; a pod of unknown load is never taken for an idle one."""

from __future__ import annotations

from typing import Any

from tests.unit.handlers.test_reconcile import DEPLOYMENT, GOOD, NOW, FakeKube, engine_sample, ready_pod, svc

from inferscale.adapters.deletion_cost import ANNOTATION, deletion_costs, likely_removed, stale_costs
from inferscale.adapters.observation import Workload, pod_loads
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot, PodSeries, parse_vector
from inferscale.handlers.collector import Tick, slim
from inferscale.handlers.reconcile import Runtime, reconcile

PODS = ["llm-7d9f8c6b5-b2x4q", "llm-7d9f8c6b5-c2x4q", "llm-7d9f8c6b5-d2x4q"]


def fleet(held: dict[str, tuple[float, float]], at: float = NOW, age: float = 2.0) -> FleetSnapshot:
    """Each pod's (running, waiting), fresh unless `age` says otherwise; a quiet KV cache."""
    pods: dict[tuple[str, str, str], PodSeries] = {}
    for name, (running, waiting) in held.items():
        gauges = [
            engine_sample(name, 0.05, __name__="vllm:kv_cache_usage_perc"),
            engine_sample(name, waiting, __name__="vllm:num_requests_waiting"),
            engine_sample(name, running, __name__="vllm:num_requests_running"),
        ]
        parse_vector("gauges", gauges, pods)
        parse_vector("sample_time", [engine_sample(name, at - age)], pods)
        parse_vector("requests", [engine_sample(name, 1.0)], pods)
    return FleetSnapshot(at, pods, frozenset())


def shrinking_tick(snapshot: FleetSnapshot, pods: list[dict[str, Any]] | None = None) -> Tick:
    deployment = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 3}}
    t = Tick(at=NOW, seq=1, deployments={("ns", "llm"): deployment}, pods={"ns": pods or [ready_pod(n) for n in PODS]})
    t.fleet[()] = snapshot
    return t


SHRINK = {**GOOD, "replicas": {"min": 1, "max": 2}}  # 3 replicas over a max of 2: one must go now


def cost_writes(kube: FakeKube) -> dict[str, str]:
    return {
        p.rsplit("/", 1)[-1]: b["metadata"]["annotations"][ANNOTATION]
        for m, p, b in kube.calls
        if m == "PATCH" and "/pods/" in p
    }


def test_costs_are_the_requests_held_and_an_unknown_load_costs_more_than_any_known() -> None:
    costs = deletion_costs(["a", "b", "c", "d"], {"a": 7.0, "b": 0.0, "c": 2.4})
    assert costs == {"a": 7, "b": 0, "c": 2, "d": 8}
    assert likely_removed(costs, 2) == ["b", "c"]
    assert likely_removed(costs, 0) == []
    assert deletion_costs(["a", "b"], {}) == {}, "nothing known: nothing to steer by"


def test_only_costs_that_changed_are_written() -> None:
    pods = [
        {"metadata": {"name": "a", "annotations": {ANNOTATION: "7"}}},
        {"metadata": {"name": "b", "annotations": {ANNOTATION: "3"}}},
        {"metadata": {"name": "c"}},
    ]
    assert stale_costs(pods, {"a": 7, "b": 0, "c": 2, "gone": 1}) == {"b": 0, "c": 2}


def test_the_collector_keeps_the_cost_of_a_pod_and_no_other_annotation() -> None:
    pod = {"metadata": {"name": "a", "annotations": {ANNOTATION: "4", "big": "x" * 1000}}, "status": {}}
    assert slim(pod, "pods")["metadata"]["annotations"] == {ANNOTATION: "4"}
    assert "annotations" not in slim({"metadata": {"name": "a", "annotations": {"big": "x"}}}, "pods")["metadata"]


def test_a_pod_with_stale_or_partial_gauges_has_no_known_load() -> None:
    workload = Workload("ns", 3, frozenset(PODS))
    loads = pod_loads(fleet({PODS[0]: (3, 1), PODS[1]: (0, 0)}), workload, "m", stale_after=60.0)
    assert loads == {PODS[0]: 4.0, PODS[1]: 0.0}
    assert pod_loads(fleet({PODS[0]: (3, 1)}, age=120.0), workload, "m", stale_after=60.0) == {}
    assert pod_loads(FleetSnapshot(NOW, {}, frozenset(QUERIES)), workload, "m", stale_after=60.0) == {}
    gauges_failed = fleet({PODS[0]: (3, 1)})
    assert pod_loads(FleetSnapshot(NOW, gauges_failed.pods, frozenset({"gauges"})), workload, "m", 60.0) == {}


async def test_a_scale_down_sets_the_costs_before_the_scale_and_names_the_pod_that_goes() -> None:
    kube = FakeKube()
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    await reconcile(Runtime(kube=kube, default_interval=10.0, history={}), shrinking_tick(snapshot), svc(SHRINK))  # type: ignore[arg-type]
    assert kube.scales() == [2]
    assert cost_writes(kube) == {PODS[0]: "15", PODS[1]: "1", PODS[2]: "6"}
    writes = [p for m, p, _ in kube.calls if m == "PATCH" and ("/pods/" in p or p.endswith("/scale"))]
    assert writes[-1].endswith("/scale"), "the costs are in place before the ReplicaSet picks a pod"
    (event,) = [e for e in kube.events() if e["reason"] == "ScaledDown"]
    assert f"{PODS[1]} (1)" in event["message"] and PODS[0] not in event["message"]


async def test_a_pod_that_does_not_report_is_kept_over_every_pod_that_does() -> None:
    kube = FakeKube()
    snapshot = fleet({PODS[0]: (12, 3), PODS[2]: (6, 0)})  # PODS[1] is Ready but reports nothing
    await reconcile(Runtime(kube=kube, default_interval=10.0, history={}), shrinking_tick(snapshot), svc(SHRINK))  # type: ignore[arg-type]
    assert cost_writes(kube)[PODS[1]] == "16"
    assert kube.scales() == [2]


async def test_costs_already_in_place_are_not_written_again() -> None:
    kube = FakeKube()
    pods = [ready_pod(n) for n in PODS]
    for pod, cost in zip(pods, ("15", "1", "6"), strict=True):
        pod["metadata"]["annotations"] = {ANNOTATION: cost}
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (0, 0), PODS[2]: (6, 0)})
    await reconcile(Runtime(kube=kube, default_interval=10.0, history={}), shrinking_tick(snapshot, pods), svc(SHRINK))  # type: ignore[arg-type]
    assert cost_writes(kube) == {PODS[1]: "0"}


async def test_a_refused_cost_write_still_scales_down_and_is_announced_once() -> None:
    kube = FakeKube(fail={"/pods/": 403})
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert kube.scales() == [2]
    (warning,) = [e for e in kube.events() if e["reason"] == "DeletionCostFailed"]
    assert (
        warning["type"] == "Warning"
        and "could not set controller.kubernetes.io/pod-deletion-cost on 3 of 3" in (warning["message"])
    )
    rt.last_decided.clear()
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert len([e for e in kube.events() if e["reason"] == "DeletionCostFailed"]) == 1


async def test_without_the_option_no_pod_is_touched() -> None:
    kube = FakeKube()
    rt = Runtime(kube=kube, default_interval=10.0, history={}, deletion_cost=False)  # type: ignore[arg-type]
    await reconcile(rt, shrinking_tick(fleet({PODS[0]: (12, 3), PODS[1]: (1, 0)})), svc(SHRINK))
    assert kube.scales() == [2] and cost_writes(kube) == {}


async def test_a_scale_up_touches_no_pod() -> None:
    kube = FakeKube()
    grow = {**GOOD, "replicas": {"min": 4, "max": 6}}
    await reconcile(
        Runtime(kube=kube, default_interval=10.0, history={}), shrinking_tick(fleet({PODS[0]: (1, 0)})), svc(grow)
    )  # type: ignore[arg-type]
    assert kube.scales() == [4] and cost_writes(kube) == {}
