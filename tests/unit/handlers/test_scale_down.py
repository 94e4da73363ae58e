"""A scale-down first sets the Ready pods' deletion costs to the requests they hold, so the ReplicaSet
removes the idlest; a pod of unknown load is never taken for an idle one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.unit.handlers.test_reconcile import DEPLOYMENT, GOOD, NOW, FakeKube, engine_sample, ready_pod, svc

from inferscale.adapters.deletion_cost import (
    ANNOTATION,
    OWNER,
    deletion_costs,
    foreign_costs,
    removal_note,
    stale_costs,
)
from inferscale.adapters.kube import KubeError
from inferscale.adapters.observation import Workload, pod_loads
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot, PodSeries, parse_vector
from inferscale.handlers import scale_down
from inferscale.handlers.collector import Tick, slim
from inferscale.handlers.reconcile import reconcile
from inferscale.handlers.runtime import Runtime

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
    assert deletion_costs(["a", "b"], {}) == {}, "nothing known: nothing to steer by"


def test_the_event_names_the_pods_that_go_and_a_tie_as_a_group() -> None:
    costs = {"a": 7, "b": 0, "c": 2, "d": 8}
    assert removal_note(costs, 2, rollout=False).endswith("by requests held: b (0), c (2)")
    assert removal_note(costs, 0, rollout=False) == ""
    idle = {"a": 0, "b": 0, "c": 0, "d": 4}
    # the controller breaks the tie by node and Ready time, which the operator does not see
    assert removal_note(idle, 2, rollout=False).endswith("by requests held: 2 of a, b, c (0 each)")
    assert removal_note({**idle, "e": 1}, 3, rollout=False).endswith("by requests held: a (0), b (0), c (0)")
    assert removal_note({**idle, "e": 1}, 4, rollout=False).endswith("a (0), b (0), c (0), e (1)")
    many = {f"p{i:02d}": 0 for i in range(20)}
    assert removal_note(many, 4, rollout=False).endswith("4 of the 20 pods holding 0")
    assert "ReplicaSets (a rollout)" in removal_note(costs, 2, rollout=True)


def test_only_costs_that_changed_are_written() -> None:
    pods = [
        {"metadata": {"name": "a", "annotations": {ANNOTATION: "7"}}},
        {"metadata": {"name": "b", "annotations": {ANNOTATION: "3"}}},
        {"metadata": {"name": "c"}},
    ]
    assert stale_costs(pods, {"a": 7, "b": 0, "c": 2, "gone": 1}) == {"b": 0, "c": 2}
    assert stale_costs(pods, {}) == {"a": None, "b": None}, "no load known: old costs come off"


def test_the_collector_keeps_the_cost_of_a_pod_and_no_other_annotation() -> None:
    pod = {"metadata": {"name": "a", "annotations": {ANNOTATION: "4", OWNER: "4", "big": "x" * 1000}}, "status": {}}
    assert slim(pod, "pods")["metadata"]["annotations"] == {ANNOTATION: "4", OWNER: "4"}
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


def test_a_cost_inferscale_did_not_write_is_told_apart_by_its_missing_or_different_copy() -> None:
    pods = [
        {"metadata": {"name": "ours", "annotations": {ANNOTATION: "3", OWNER: "3"}}},
        {"metadata": {"name": "user", "annotations": {ANNOTATION: "100"}}},
        {"metadata": {"name": "edited", "annotations": {ANNOTATION: "50", OWNER: "3"}}},
        {"metadata": {"name": "none"}},
    ]
    assert foreign_costs(pods) == ["edited", "user"]


async def test_costs_someone_else_set_are_left_alone_and_the_event_says_who_ranks() -> None:
    kube = FakeKube()
    pods = [ready_pod(n) for n in PODS]
    pods[2]["metadata"]["annotations"] = {ANNOTATION: "1000"}  # an SRE keeps this pod on purpose
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    await reconcile(Runtime(kube=kube, default_interval=10.0, history={}), shrinking_tick(snapshot, pods), svc(SHRINK))  # type: ignore[arg-type]
    assert kube.scales() == [2] and cost_writes(kube) == {}
    (event,) = [e for e in kube.events() if e["reason"] == "ScaledDown"]
    assert f"pod-deletion-cost set on {PODS[2]}, not by inferscale" in event["message"]


async def test_costs_already_in_place_are_not_written_again() -> None:
    kube = FakeKube()
    pods = [ready_pod(n) for n in PODS]
    for pod, cost in zip(pods, ("15", "1", "6"), strict=True):
        pod["metadata"]["annotations"] = {ANNOTATION: cost, OWNER: cost}
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (0, 0), PODS[2]: (6, 0)})
    await reconcile(Runtime(kube=kube, default_interval=10.0, history={}), shrinking_tick(snapshot, pods), svc(SHRINK))  # type: ignore[arg-type]
    assert cost_writes(kube) == {PODS[1]: "0"}


async def test_the_pods_an_earlier_scale_down_ranked_are_cleared_when_no_load_is_known() -> None:
    kube = FakeKube()
    pods = [ready_pod(n) for n in PODS]
    pods[0]["metadata"]["annotations"] = {ANNOTATION: "0", OWNER: "0"}  # idle then, perhaps busy now
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    gauges_failed = FleetSnapshot(NOW, snapshot.pods, frozenset({"gauges"}))
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    await reconcile(rt, shrinking_tick(gauges_failed, pods), svc(SHRINK))
    patches = [b for m, p, b in kube.calls if m == "PATCH" and "/pods/" in p]
    assert patches == [{"metadata": {"annotations": {ANNOTATION: None, OWNER: None}}}]
    assert kube.scales() == [2]


async def test_a_fleet_short_of_ready_pods_loses_none_of_them_and_no_cost_is_written() -> None:
    kube = FakeKube()
    two = [ready_pod(n) for n in PODS[:2]]  # spec.replicas 3, one pod evicted and not yet replaced
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0)})
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    await reconcile(rt, shrinking_tick(snapshot, two), svc(SHRINK))
    assert kube.scales() == [2] and cost_writes(kube) == {}
    (event,) = [e for e in kube.events() if e["reason"] == "ScaledDown"]
    assert "idlest" not in event["message"]


class Throttled(FakeKube):
    """Answers the first `n` pod patches with a 429, as an API server under priority and fairness does."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.left = n

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        if "/pods/" in path and self.left > 0:
            self.left -= 1
            self.calls.append(("PATCH", path, body))
            raise KubeError(429, "too many requests")
        return await super().merge_patch(path, body, answer, strict)


async def test_a_throttled_cost_write_puts_the_scale_down_off_one_tick_and_no_more() -> None:
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    kube = Throttled(1)
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert kube.scales() == [], "a busy pod could still carry an old low cost"
    status = kube.statuses()[-1]
    assert status["scaler"]["scaleEvents"] == [], "the scale recorded ahead is taken back"
    rt.last_decided.clear()
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK, status))
    assert kube.scales() == [2]
    # throttled at every attempt: the second tick scales down anyway, with a Warning
    always = Throttled(100)
    rt = Runtime(kube=always, default_interval=10.0, history={})  # type: ignore[arg-type]
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    rt.last_decided.clear()
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert always.scales() == [2]
    assert [e["reason"] for e in always.events() if e["type"] == "Warning"] == ["DeletionCostFailed"]


class Hanging(FakeKube):
    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        if "/pods/" in path:
            await asyncio.sleep(3600)
        return await super().merge_patch(path, body, answer, strict)


async def test_cost_writes_that_hang_hold_the_scale_down_no_longer_than_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scale_down, "DEADLINE", 0.05)
    kube = Hanging()
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert kube.scales() == []
    rt.last_decided.clear()
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert kube.scales() == [2]
    (warning,) = [e for e in kube.events() if e["reason"] == "DeletionCostFailed"]
    assert "timed out after 0.05s" in warning["message"]


async def test_a_bug_in_the_cost_writes_does_not_cost_the_scale_down(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any, **kw: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(scale_down, "write_costs", broken)
    kube = FakeKube()
    snapshot = fleet({PODS[0]: (12, 3), PODS[1]: (1, 0), PODS[2]: (6, 0)})
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    await reconcile(rt, shrinking_tick(snapshot), svc(SHRINK))
    assert kube.scales() == [2]


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
    assert "may remove a busier pod than the idlest" in warning["message"]
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
