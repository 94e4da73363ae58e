"""The reconcile step against a recording fake of the Kubernetes client: what it writes, and that a
bad object or a failing API never raises out of it (a crash loop would stop every other service)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from tests.unit.handlers.objects import merged, svc

from inferscale.adapters.kube import KubeError
from inferscale.adapters.pod_metrics import Read
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot, PodSeries, parse_vector
from inferscale.adapters.workload import rfc3339
from inferscale.api.status import InferenceServiceStatus
from inferscale.handlers.collector import Tick
from inferscale.handlers.metrics import REGISTRY
from inferscale.handlers.rate_history import RateHistory
from inferscale.handlers.reconcile import managed_deployment, reconcile
from inferscale.handlers.runtime import Runtime
from inferscale.scaling.types import Decision, Reason, Recommendation

NOW = 1_800_000_000.0


class FakeKube:
    """Records writes; `fail` maps a path fragment to the HTTP status it answers with."""

    def __init__(self, fail: dict[str, int] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.fail = fail or {}
        self.strict: list[str] = []  # paths written with fieldValidation=Strict
        self.answers: dict[str, dict[str, Any]] = {}  # a path fragment -> what a merge patch there answers

    def _check(self, path: str) -> None:
        for frag, status in self.fail.items():
            if frag in path:
                raise KubeError(status, f"injected {status}")

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        self.calls.append(("PATCH", path, body))
        if strict:
            self.strict.append(path)
        self._check(path)
        return next((a for frag, a in self.answers.items() if frag in path), {})

    async def json_patch(self, path: str, ops: Any, strict: bool = False) -> None:
        self.calls.append(("PATCH", path, ops))
        if strict:
            self.strict.append(path)
        self._check(path)

    async def create(self, path: str, body: Any, strict: bool = False) -> dict[str, Any]:
        self.calls.append(("POST", path, body))
        if strict:
            self.strict.append(path)
        self._check(path)
        return dict(body)

    def statuses(self) -> list[dict[str, Any]]:
        return [b["status"] for m, p, b in self.calls if m == "PATCH" and p.endswith("/status")]

    def events(self) -> list[dict[str, Any]]:
        return [b for m, p, b in self.calls if m == "POST" and p.endswith("/events")]

    def scales(self) -> list[int]:
        return [b["spec"]["replicas"] for m, p, b in self.calls if m == "PATCH" and p.endswith("/scale")]


GOOD = {"model": {"name": "m"}, "scaleTargetRef": {"name": "llm"}, "replicas": {"min": 1, "max": 4}}
DEPLOYMENT = {
    "metadata": {"name": "llm", "namespace": "ns", "uid": "d1"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llm"}}},
}


def tick(**kw: Any) -> Tick:
    t = Tick(at=NOW, seq=1, deployments={("ns", "llm"): DEPLOYMENT})
    t.fleet[()] = FleetSnapshot(NOW, {}, frozenset(QUERIES), ("down",))  # Prometheus unreachable
    for k, v in kw.items():
        setattr(t, k, v)
    return t


def runtime(kube: FakeKube) -> Runtime:
    return Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]


async def test_a_spec_that_slipped_past_the_schema_becomes_a_condition_and_an_event() -> None:
    kube = FakeKube()
    bad = svc({**GOOD, "replicas": {"min": 5, "max": 2}, "engine": "tgi"})
    assert await reconcile(runtime(kube), tick(), bad) is None
    (status,) = kube.statuses()
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec"
    assert "replicas.min must be less than or equal to replicas.max" in ready["message"]
    assert "engine" in ready["message"]
    (event,) = kube.events()
    assert event["type"] == "Warning" and event["reason"] == "InvalidSpec"
    assert kube.scales() == []


async def test_a_service_no_longer_decided_drops_the_figures_of_its_last_decision() -> None:
    # a dashboard would show the last desired count as today's for as long as the spec stays invalid
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(FakeKube()), tick(), svc(spec))
    labels = {"namespace": "ns", "name": "llm"}
    assert REGISTRY.get_sample_value("inferscale_desired_replicas", labels) == 3
    await reconcile(runtime(FakeKube()), tick(), svc({**spec, "replicas": {"min": 5, "max": 2}}))
    for gauge in ("desired", "current", "ready"):
        assert REGISTRY.get_sample_value(f"inferscale_{gauge}_replicas", labels) is None


async def test_the_same_problem_is_not_announced_twice() -> None:
    kube = FakeKube()
    bad = svc({**GOOD, "replicas": {"min": 5, "max": 2}})
    await reconcile(runtime(kube), tick(), bad)
    again = svc(bad["spec"], kube.statuses()[0])
    await reconcile(runtime(kube), tick(), again)
    assert len(kube.events()) == 1 and len(kube.statuses()) == 1  # nothing new to write either


async def test_an_edited_spec_that_is_still_invalid_is_announced_again() -> None:
    kube = FakeKube()
    bad = svc({**GOOD, "replicas": {"min": 5, "max": 2}})
    await reconcile(runtime(kube), tick(), bad)
    edited = svc({**GOOD, "engine": "tgi"}, kube.statuses()[0])
    edited["metadata"]["generation"] = 2
    await reconcile(runtime(kube), tick(), edited)
    first, second = kube.events()
    assert "replicas.min" in first["message"] and "engine" in second["message"]


async def test_a_service_whose_tick_fails_says_so_in_status_and_an_event(monkeypatch: pytest.MonkeyPatch) -> None:
    from inferscale.handlers import operator

    async def broken(*_: Any) -> None:
        raise RuntimeError("an answer nothing expected")

    class Collector:
        interval, last_success = 10.0, None

        async def refresh(self) -> Tick:
            return tick(services=[svc(GOOD)])

    monkeypatch.setattr(operator, "reconcile", broken)
    kube = FakeKube()
    await operator.Loop(Collector(), runtime(kube)).tick()  # type: ignore[arg-type]
    ready = next(c for c in kube.statuses()[0]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ReconcileError"
    assert "RuntimeError: an answer nothing expected" in ready["message"] and "tries again" in ready["message"]
    (event,) = kube.events()
    assert event["type"] == "Warning" and event["reason"] == "ReconcileError"
    assert kube.scales() == []


async def test_a_failed_tick_keeps_what_the_last_good_tick_said_in_the_other_conditions() -> None:
    from inferscale.handlers.reconcile import report_failure

    kube = FakeKube()
    await reconcile(runtime(kube), tick(), svc(GOOD))
    good = kube.statuses()[-1]
    kube = FakeKube()
    await report_failure(runtime(kube), svc(GOOD, good), NOW + 10, RuntimeError("boom"))
    written = {c["type"]: c for c in kube.statuses()[-1]["conditions"]}
    before = {c["type"]: c for c in good["conditions"]}
    assert written["Ready"]["reason"] == "ReconcileError"
    assert set(written) == set(before)
    assert written["MetricsAvailable"] == before["MetricsAvailable"]  # unchanged, its transition time too
    assert [e["reason"] for e in kube.events()] == ["ReconcileError"]  # nothing else announced again


async def test_prometheus_down_holds_and_says_so() -> None:
    kube = FakeKube()
    decision = await reconcile(runtime(kube), tick(), svc(GOOD))
    assert decision is not None and decision.replicas == 2 and not decision.changed
    status = kube.statuses()[-1]
    metrics = next(c for c in status["conditions"] if c["type"] == "MetricsAvailable")
    assert metrics["status"] == "False" and "Prometheus did not answer" in metrics["message"]
    assert kube.scales() == []
    assert any(e["reason"] == "MetricsMissing" for e in kube.events())


async def test_a_missing_target_is_reported_not_raised() -> None:
    kube = FakeKube()
    await reconcile(runtime(kube), tick(deployments={}), svc(GOOD))
    ready = next(c for c in kube.statuses()[0]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "TargetNotFound"


async def test_a_failing_api_never_raises_out_of_reconcile() -> None:
    kube = FakeKube(fail={"/events": 503})
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}  # below min: it must scale to 3
    decision = await reconcile(runtime(kube), tick(), svc(spec))
    assert decision is not None and kube.scales() == [3]
    failing = FakeKube(fail={"/status": 500, "/events": 503})
    assert await reconcile(runtime(failing), tick(), svc(spec)) is not None
    # the scale is recorded in status before it is made: with status refused, it is put off, and said so
    assert failing.scales() == []
    assert any(m == "POST" and b.get("reason") == "ScaleDeferred" for m, p, b in failing.calls if "/events" in p)


async def test_the_scale_event_is_in_status_before_the_scale_is_made() -> None:
    kube = FakeKube()
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), svc(spec))
    writes = [(p.rsplit("/", 1)[-1], b) for m, p, b in kube.calls if m == "PATCH"]
    assert [w for w, _ in writes] == ["status", "scale", "status"]
    (event,) = writes[0][1]["status"]["scaler"]["scaleEvents"]
    assert (event["from"], event["to"]) == (2, 3)


async def test_without_a_record_of_the_scale_event_nothing_is_scaled() -> None:
    # the rate limits count recorded events: a scale the status cannot remember could be repeated at once
    kube = FakeKube(fail={"/status": 500})
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), svc(spec))
    assert kube.scales() == []
    assert [e["reason"] for e in kube.events() if e["type"] == "Warning"].count("ScaleDeferred") == 1


async def test_a_scale_refused_twice_in_a_row_leaves_no_scale_event_behind() -> None:
    # the second tick's status says nothing new (the same refused decision), yet the scale event recorded
    # ahead of its refused scale must be taken back, or it would rate-limit the next real one
    versioned = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "resourceVersion": "42"}}
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    left: dict[str, Any] = {}
    for at in (NOW, NOW + 10):
        kube = FakeKube(fail={"/scale": 409})
        await reconcile(runtime(kube), tick(at=at, deployments={("ns", "llm"): versioned}), svc(spec, dict(left)))
        assert kube.scales() == [3]
        for written in kube.statuses():  # what the API server holds after the tick's merge patches
            left.update(written)
    assert left["scaler"]["scaleEvents"] == []


async def test_a_scale_refused_as_a_conflict_tick_after_tick_is_said_once_in_ready() -> None:
    versioned = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "resourceVersion": "42"}}
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    kube, status = FakeKube(fail={"/scale": 409}), {}
    rt = runtime(kube)
    readies = []
    for i in range(5):
        await reconcile(rt, tick(at=NOW + 10 * i, deployments={("ns", "llm"): versioned}), svc(spec, status))
        status = merged(status, kube.statuses()[-1])
        readies.append(next(c["reason"] for c in status["conditions"] if c["type"] == "Ready"))
    assert kube.scales() == [3] * 5  # a race each time: tried again at the next tick, as before
    assert readies == ["Scaling", "Scaling", "ScaleConflict", "ScaleConflict", "ScaleConflict"]
    assert [e["reason"] for e in kube.events() if e["type"] == "Warning"].count("ScaleConflict") == 1


async def test_a_scale_the_api_server_sets_to_another_count_is_not_made_again_every_tick() -> None:
    kube, status = FakeKube(), {}
    kube.answers["/scale"] = {"spec": {"replicas": 3}}  # a mutating webhook caps it
    rt = runtime(kube)
    spec = {**GOOD, "replicas": {"min": 4, "max": 8}}
    for i in range(8):
        await reconcile(rt, tick(at=NOW + 10 * i), svc(spec, status))
        status = merged(status, kube.statuses()[-1])
    assert 1 < len(kube.scales()) <= 3  # 70 s: tried at 0, after 30 s, after 60 more at the soonest
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ScaleAltered"
    assert ready["message"].startswith("asked Deployment llm for 4 replicas, the API server set 3")
    assert not [e for e in kube.events() if e["reason"] == "ScaledUp"] and status["scaler"]["scaleEvents"] == []
    assert [e["reason"] for e in kube.events() if e["type"] == "Warning"].count("ScaleAltered") == 1


@pytest.mark.parametrize("refusal", [422, 403])
async def test_status_writes_refused_for_good_are_announced_once_not_every_tick(refusal: int) -> None:
    kube = FakeKube(fail={"/status": refusal})
    rt = runtime(kube)
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}  # would scale 2 -> 3, with Prometheus down
    for i in range(6):
        await reconcile(rt, tick(at=NOW + 10 * i), svc(spec))
    assert kube.scales() == []  # never without the record of its event
    assert sorted(e["reason"] for e in kube.events()) == ["MetricsMissing", "ScaleDeferred"]


async def test_a_deployment_recreated_after_a_404_is_scaled_at_once_not_after_the_old_ones_refusal() -> None:
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    kube, status = FakeKube(fail={"/scale": 404}), {}  # deleted between the list and the scale
    rt = runtime(kube)
    await reconcile(rt, tick(at=NOW), svc(spec, status))
    status = merged(status, kube.statuses()[-1])
    kube.fail = {}
    recreated = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "uid": "d2"}}
    await reconcile(rt, tick(at=NOW + 10, deployments={("ns", "llm"): recreated}), svc(spec, status))
    assert kube.scales() == [3, 3]
    assert "ScaleFailed" not in [c["reason"] for c in kube.statuses()[-1]["conditions"]]


async def test_advisory_mode_records_no_scale_event_ahead() -> None:
    kube = FakeKube()
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}, "mode": "Advisory"}
    await reconcile(runtime(kube), tick(), svc(spec))
    assert kube.scales() == []
    assert all(set(s) != {"scaler"} for s in kube.statuses())
    assert kube.statuses()[-1]["scaler"]["scaleEvents"] == []


class Crash(BaseException):
    """The process dies here (SIGKILL, an OOM kill): nothing after it runs."""


class KilledAfterScaling(FakeKube):
    """The operator dies at its first status write after a write to /scale."""

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        if path.endswith("/status") and self.scales():
            raise Crash
        return await super().merge_patch(path, body, answer, strict)


def saturated_tick(ready: int, at: float) -> Tick:
    """`ready` Ready pods, each with a full KV cache and 20 waiting: more replicas are wanted at any count."""
    names = [f"llm-7d9f8c6b5-x{i}x4q" for i in range(ready)]
    pods: dict[tuple[str, str, str], PodSeries] = {}
    for name in names:
        gauges = [
            engine_sample(name, 0.95, __name__="vllm:kv_cache_usage_perc"),
            engine_sample(name, 20, __name__="vllm:num_requests_waiting"),
            engine_sample(name, 30, __name__="vllm:num_requests_running"),
        ]
        parse_vector("gauges", gauges, pods)
        parse_vector("sample_time", [engine_sample(name, at - 2)], pods)
        parse_vector("requests", [engine_sample(name, 5.0)], pods)
    deployment = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": ready}}
    t = Tick(at=at, seq=1, deployments={("ns", "llm"): deployment}, pods={"ns": [ready_pod(n) for n in names]})
    t.fleet[()] = FleetSnapshot(at, pods, frozenset())
    return t


def idle_tick(ready: int, at: float) -> Tick:
    """`ready` Ready pods with a nearly empty KV cache and no queue: one replica would do."""
    t = saturated_tick(ready, at)
    for series in t.fleet[()].pods.values():
        series.values.update({"vllm:kv_cache_usage_perc": 0.05, "vllm:num_requests_waiting": 0.0, "requests": 0.1})
    return t


OLD_STATE = {"scaler": {"recommendations": [{"at": NOW - 900, "replicas": 1}], "scaleEvents": []}}


@pytest.mark.parametrize(
    ("kept", "news"),
    [
        ({"targetName": "llm-blue"}, "moved from Deployment llm-blue to llm"),  # a blue/green cut-over
        ({"targetName": "llm", "targetUID": "d0"}, "Deployment llm was recreated"),  # a Helm reinstall
    ],
)
async def test_another_deployments_decision_state_does_not_scale_the_new_one_down(
    kept: dict[str, str], news: str
) -> None:
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}}
    kube = FakeKube()
    await reconcile(runtime(kube), idle_tick(8, NOW), svc(spec, {**OLD_STATE, **kept}))
    assert kube.scales() == []
    (event,) = [e for e in kube.events() if e["reason"] == "TargetChanged"]
    assert news in event["message"]
    status = kube.statuses()[-1]
    assert (status["targetName"], status["targetUID"]) == ("llm", "d1")
    # the same state on its own Deployment is honoured: that window asked for 1 all along
    again = FakeKube()
    await reconcile(runtime(again), idle_tick(8, NOW), svc(spec, {**OLD_STATE, "targetName": "llm", "targetUID": "d1"}))
    assert again.scales() and again.scales()[0] < 8
    assert not [e for e in again.events() if e["reason"] == "TargetChanged"]


async def test_a_deployment_scaled_to_zero_by_hand_is_left_alone_until_scaled_back() -> None:
    spec = {**GOOD, "replicas": {"min": 2, "max": 8}}
    zero = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 0}}
    kube, body = FakeKube(), svc(spec)
    rt = runtime(kube)
    for at in (NOW, NOW + 10):
        await reconcile(rt, tick(at=at, deployments={("ns", "llm"): zero}), body)
        body = svc(spec, merged({}, {"status": kube.statuses()[-1]})["status"])
    assert kube.scales() == []
    (event,) = [e for e in kube.events() if e["reason"] == "ScalingDisabled"]
    assert "scaled to 0" in event["message"]
    (ready,) = [c for c in kube.statuses()[-1]["conditions"] if c["type"] == "Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "ScalingDisabled")
    await reconcile(rt, tick(at=NOW + 20), body)  # scaled back to 2 by hand: decided on again
    (ready,) = [c for c in kube.statuses()[-1]["conditions"] if c["type"] == "Ready"]
    assert ready["reason"] != "ScalingDisabled" and "decision" in kube.statuses()[-1]


def stuck_pod(name: str, placed_ago: float) -> dict[str, Any]:
    """Running, on a node for `placed_ago` seconds, never Ready and never restarted (an image that does not pull)."""
    pod = ready_pod(name)
    pod["metadata"]["creationTimestamp"] = rfc3339(NOW - placed_ago - 5)
    placed = {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(NOW - placed_ago)}
    ready = {"type": "Ready", "status": "False", "lastTransitionTime": rfc3339(NOW - placed_ago + 1)}
    pod["status"] = {"phase": "Running", "conditions": [placed, ready]}
    return pod


@pytest.mark.parametrize(("placed_ago", "scales"), [(60.0, []), (3600.0, [6])])
async def test_a_pod_stuck_long_after_placement_is_no_replica_on_its_way_and_is_named(
    placed_ago: float, scales: list[int]
) -> None:
    # saturated on 3 Ready pods of 4: the fourth, on a node for a minute, covers the need the tick asks now (a
    # scale-up on capacity waits); on a node for an hour, it never will
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}}
    t = saturated_tick(3, NOW)
    t.pods["ns"].append(stuck_pod("llm-7d9f8c6b5-zzzzz", placed_ago))
    t.deployments[("ns", "llm")] = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 4}}
    kube = FakeKube()
    await reconcile(runtime(kube), t, svc(spec))
    assert kube.scales() == scales
    (cond,) = [c for c in kube.statuses()[-1]["conditions"] if c["type"] == "PodsStuck"]
    warnings = [e["reason"] for e in kube.events() if e["type"] == "Warning"]
    if scales:
        assert cond["status"] == "True" and "(llm-7d9f8c6b5-zzzzz) have been on a node for more than" in cond["message"]
        assert "NotReadyLongAfterPlacement" in warnings
    else:
        assert cond["status"] == "False" and "NotReadyLongAfterPlacement" not in warnings


async def test_crash_looping_pods_are_named_in_a_condition_and_one_warning() -> None:
    spec = {**GOOD, "replicas": {"min": 1, "max": 16}}
    kube, body = FakeKube(), svc(spec)
    rt = runtime(kube)
    for at in (NOW, NOW + 10):
        t = saturated_tick(4, at)
        looping = {"phase": "Running", "conditions": [], "restarts": 6}
        t.pods["ns"] = [*t.pods["ns"], *({**ready_pod(f"llm-7d9f8c6b5-l{i}x4q"), "status": looping} for i in range(2))]
        t.deployments[("ns", "llm")] = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 6}}
        await reconcile(rt, t, body)
        body = svc(spec, merged({}, {"status": kube.statuses()[-1]})["status"])
    st = kube.statuses()[-1]
    assert (st["pendingReplicas"], st["restartingReplicas"]) == (2, 2)
    (cond,) = [c for c in st["conditions"] if c["type"] == "PodsRestarting"]
    assert (
        cond["status"] == "True"
        and "2 pod(s) of Deployment llm are not Ready after a container restart" in cond["message"]
    )
    assert [e["type"] for e in kube.events() if e["reason"] == "NotReadyAfterRestart"] == ["Warning"]


async def test_an_operator_killed_between_the_scale_and_its_status_keeps_the_rate_limit_when_restarted() -> None:
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}, "behavior": {"scaleUp": {"maxIncrease": 1, "period": "60s"}}}
    kube = KilledAfterScaling()
    with pytest.raises(Crash):
        await reconcile(runtime(kube), saturated_tick(2, NOW), svc(spec))
    assert kube.scales() == [3]
    # what a restarted operator reads: the status as the API server holds it (merge patches, in order)
    left: dict[str, Any] = {}
    for written in kube.statuses():
        left.update(written)
    restarted = FakeKube()
    await reconcile(runtime(restarted), saturated_tick(3, NOW + 10), svc(spec, left))
    assert restarted.scales() == [], "a second step of the 1-pod-per-60s limit, 10 s after the first"
    (decision,) = [s["decision"] for s in restarted.statuses()]
    assert decision["reason"] == "RateLimited"
    again = FakeKube()
    await reconcile(runtime(again), saturated_tick(3, NOW + 61), svc(spec, left))
    assert again.scales() == [4]


def blind_tick(ready: int, at: float) -> Tick:
    """`ready` Ready pods, and Prometheus not answering."""
    t = idle_tick(ready, at)
    t.fleet[()] = FleetSnapshot(at, {}, frozenset(QUERIES), ("down",))
    return t


async def test_the_log_has_a_line_per_scale_and_per_hold_that_is_news_not_per_tick(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}, "behavior": {"scaleUp": {"maxIncrease": 1, "period": "60s"}}}
    kube, status = FakeKube(), {}
    rt = runtime(kube)
    with caplog.at_level(logging.INFO, logger="inferscale"):
        ups = (saturated_tick(2, NOW), saturated_tick(3, NOW + 10), saturated_tick(3, NOW + 61))
        blind = (blind_tick(4, NOW + 90), blind_tick(4, NOW + 100))
        for t in (*ups, idle_tick(4, NOW + 70), idle_tick(4, NOW + 80), *blind, idle_tick(4, NOW + 110)):
            await reconcile(rt, t, svc(spec, status))
            status = merged(status, kube.statuses()[-1])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ns/llm: ")]
    assert kube.scales() == [3, 4]
    # silent: the tick at +10 s (held at 3 by the rate limit, as decided at +0), the one at +80 (as at +70), and
    # the second tick without metrics
    assert len(lines) == 5, lines
    assert lines[0].startswith("ns/llm: scaled 2 → 3 (RateLimited): ")
    assert lines[1].startswith("ns/llm: scaled 3 → 4 (")
    assert lines[2].startswith("ns/llm: holds 4 (ScaleDownStabilizing): ")  # the limit no longer holds it back
    assert lines[3].startswith("ns/llm: holds 4 (MetricsMissing): ")
    assert lines[4].startswith("ns/llm: holds 4 (ScaleDownStabilizing): ")  # the metrics are back


async def test_a_routine_hold_after_a_scale_is_in_status_not_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}}
    kube, status = FakeKube(), {}
    rt = runtime(kube)
    with caplog.at_level(logging.INFO, logger="inferscale"):
        for t in (saturated_tick(2, NOW), idle_tick(4, NOW + 70), idle_tick(4, NOW + 80)):
            await reconcile(rt, t, svc(spec, status))
            status = merged(status, kube.statuses()[-1])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ns/llm: ")]
    assert kube.scales() == [4]
    assert status["decision"]["reason"] == "ScaleDownStabilizing"
    assert len(lines) == 1 and lines[0].startswith("ns/llm: scaled 2 → 4 (QueueBacklog): "), lines


async def test_a_restarted_operator_tells_where_it_stands_once(caplog: pytest.LogCaptureFixture) -> None:
    kube, status = FakeKube(), {}
    with caplog.at_level(logging.INFO, logger="inferscale"):
        for rt, ticks in ((runtime(kube), (0, 70, 80)), (runtime(kube), (90, 100))):
            for at in ticks:
                await reconcile(rt, idle_tick(2, NOW + at), svc(GOOD, status))
                status = merged(status, kube.statuses()[-1])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ns/llm: ")]
    assert kube.scales() == []
    # once on the first tick, and once on the restarted one's first: the same decision, in a new process
    assert [line.split(":", 2)[1] for line in lines] == [" holds 2 (ScaleDownStabilizing)"] * 2, lines


async def test_a_hold_while_the_slo_is_missed_is_logged_once_a_minute_not_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = {**GOOD, "replicas": {"min": 1, "max": 2}}
    kube, status = FakeKube(), {}
    rt = runtime(kube)

    def breached(at: float) -> Tick:  # at max replicas, every token 100 ms apart against the 50 ms ITL SLO
        t = saturated_tick(2, at)
        for series in t.fleet[()].pods.values():
            series.values.update({"itl_sum": 10.0, "itl_count": 100.0})
        return t

    with caplog.at_level(logging.INFO, logger="inferscale"):
        for t in (*(breached(NOW + s) for s in range(0, 140, 10)), idle_tick(2, NOW + 140), idle_tick(2, NOW + 150)):
            await reconcile(rt, t, svc(spec, status))
            status = merged(status, kube.statuses()[-1])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ns/llm: ")]
    assert kube.scales() == []
    # +0, +60 and +120 s while the mean ITL is over its SLO; then one line for the change, none for its repeat
    assert [line.split(":", 2)[1] for line in lines[:3]] == [" holds 2 (MaxReplicas)"] * 3, lines
    assert all("ITL mean 100ms > SLO 50ms" in line for line in lines[:3]), lines
    assert len(lines) == 4 and "(MaxReplicas)" not in lines[3], lines


@pytest.mark.parametrize("refusal", [403, 422, 429])
async def test_a_refused_scale_write_is_not_recorded_as_a_scale_event(refusal: int) -> None:
    kube = FakeKube(fail={"/scale": refusal})
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), svc(spec))
    status = kube.statuses()[-1]
    assert status["scaler"]["scaleEvents"] == [] and "lastScaleTime" not in status
    assert any(e["reason"] == "ScaleFailed" for e in kube.events())


async def test_a_scale_refused_every_tick_is_a_condition_announced_once_not_an_event_per_tick() -> None:
    """RBAC without deployments/scale, or a webhook that rejects it: Ready says why until it succeeds."""
    kube = FakeKube(fail={"/scale": 403})
    rt = runtime(kube)
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}}
    for i in range(8):
        await reconcile(rt, saturated_tick(2, NOW + 10 * i), svc(spec, _held(kube)))
        ready = next(c for c in _held(kube)["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "ScaleFailed")
        assert "could not scale llm to 4" in ready["message"]
    # tried at 0 s, again 30 s later, then 60 s after that: not twice (a record and its retraction) every tick
    assert len(kube.scales()) == 2
    assert [e["reason"] for e in kube.events()] == ["ScaleFailed"]
    del kube.fail["/scale"]  # the permission granted: the next try goes through and Ready turns back
    await reconcile(rt, saturated_tick(2, NOW + 90), svc(spec, _held(kube)))
    ready = next(c for c in _held(kube)["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Scaling")
    assert [e["reason"] for e in kube.events()] == ["ScaleFailed", "ScaledUp"] and rt.refused_scales == {}


def _held(kube: FakeKube) -> dict[str, Any]:
    """The status as the API server holds it after the tick's merge patches, in order."""
    left: dict[str, Any] = {}
    for written in kube.statuses():
        left.update(written)
    return left


@pytest.mark.parametrize("unanswered", [0, 500, 504])
@pytest.mark.parametrize(("down", "landed"), [(True, True), (True, False), (False, True), (False, False)])
async def test_a_scale_without_a_clear_answer_is_settled_on_the_target_at_the_next_tick(
    unanswered: int, down: bool, landed: bool
) -> None:
    # the PATCH timed out, or the server failed (after etcd took it, or a failing webhook's 500 before): the
    # Deployment may be at the new count or not. Counted as made when it did not land, the limit (one step a
    # minute) would hold the retry for a minute with the fleet saturated; taken back when it did, the next tick
    # would count the limit from the new count and take a second step ten seconds after the first
    kube = FakeKube(fail={"/scale": unanswered})
    rt = runtime(kube)
    behavior = {"scaleDown": {"maxDecrease": "50%"}} if down else {"scaleUp": {"maxIncrease": 1, "period": "60s"}}
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}, "behavior": behavior}
    before, after = (8, 4) if down else (3, 4)
    load = idle_tick if down else saturated_tick
    await reconcile(rt, load(before, NOW), svc(spec, OLD_STATE if down else None))
    assert kube.scales() == [after]
    left = _held(kube)
    assert len(left["scaler"]["scaleEvents"]) == 1 and "lastScaleTime" not in left
    (event,) = [e for e in kube.events() if e["reason"] == "ScaleUnconfirmed"]
    assert f"scaling llm to {after} got no clear answer" in event["message"]
    left["scaler"]["lastTick"]["watchedSince"] = NOW - 3600  # watched long before: past its first minute
    rt.kube = again = FakeKube()  # type: ignore[assignment]
    await reconcile(rt, load(after if landed else before, NOW + 10), svc(spec, left))
    if landed:  # no second step inside the period; the scale is told now that the target shows it
        assert again.scales() == []
        (told,) = [e for e in again.events() if e["reason"] in ("ScaledUp", "ScaledDown")]
        assert told["reason"] == ("ScaledDown" if down else "ScaledUp") and "landed" in told["message"]
        history = _held(again)["history"]
        assert [(h["from"], h["to"]) for h in history] == [(before, after)]
    else:  # it did not land: tried again at once
        assert again.scales() == [after]


def with_version(t: Tick, version: str) -> Tick:
    deployment = t.deployments[("ns", "llm")]
    t.deployments[("ns", "llm")] = {**deployment, "metadata": {**deployment["metadata"], "resourceVersion": version}}
    return t


HALVING = {**GOOD, "replicas": {"min": 1, "max": 8}, "behavior": {"scaleDown": {"maxDecrease": "50%"}}}


async def unanswered_scale_down(unanswered: int) -> tuple[Runtime, dict[str, Any]]:
    """8 -> 4 on an idle fleet, its /scale unanswered; the status it leaves, watched long before."""
    rt = runtime(first := FakeKube(fail={"/scale": unanswered}))
    await reconcile(rt, idle_tick(8, NOW), svc(HALVING, OLD_STATE))
    left = _held(first)
    left["scaler"]["lastTick"]["watchedSince"] = NOW - 3600
    return rt, left


async def test_an_unanswered_scale_down_a_lagging_cache_hides_keeps_its_record_until_the_target_shows_it() -> None:
    # 8 -> 4 lands unanswered; the next tick's cache still shows 8, so the retry is refused (409) on its version:
    # with the record gone, the tick after would count the limit from 4 and step to 2 twenty seconds in
    rt, left = await unanswered_scale_down(504)
    rt.kube = lagging = FakeKube(fail={"/scale": 409})  # type: ignore[assignment]
    await reconcile(rt, with_version(idle_tick(8, NOW + 10), "7"), svc(HALVING, left))
    assert lagging.scales() == [4]
    left = {**left, **_held(lagging)}
    assert [(e["from"], e["to"]) for e in left["scaler"]["scaleEvents"]] == [(8, 4)]
    rt.kube = caught_up = FakeKube()  # type: ignore[assignment]
    await reconcile(rt, idle_tick(4, NOW + 20), svc(HALVING, left))
    assert caught_up.scales() == [], "a second 50% step down inside the period"
    assert [e["reason"] for e in caught_up.events()] == ["ScaledDown"]  # told, now that the target shows it


async def test_an_unanswered_scale_that_landed_is_told_before_the_scale_that_follows_it() -> None:
    rt, left = await unanswered_scale_down(0)
    rt.kube = then = FakeKube()  # type: ignore[assignment]
    await reconcile(rt, saturated_tick(4, NOW + 10), svc(HALVING, left))  # landed, and the load came back at once
    assert then.scales() and then.scales()[0] > 4
    history = _held(then)["history"]
    assert [(h["from"], h["to"]) for h in history][:1] == [(8, 4)] and "landed" in history[0]["message"]
    assert [e["reason"] for e in then.events() if e["reason"].startswith("Scaled")] == ["ScaledDown", "ScaledUp"]


async def test_the_scale_write_is_conditional_on_the_deployment_the_decision_started_from() -> None:
    # a 409 means the Deployment moved since the cache read it (our own last write not yet seen, a
    # kubectl scale): nothing is recorded and no warning is posted; the next tick decides again
    kube = FakeKube(fail={"/scale": 409})
    versioned = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "resourceVersion": "42"}}
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(deployments={("ns", "llm"): versioned}), svc(spec))
    (patch,) = [b for m, p, b in kube.calls if m == "PATCH" and p.endswith("/scale")]
    assert patch == {"spec": {"replicas": 3}, "metadata": {"resourceVersion": "42"}}
    status = kube.statuses()[-1]
    assert status["scaler"]["scaleEvents"] == [] and "lastScaleTime" not in status
    assert not any(e["reason"] == "ScaleFailed" for e in kube.events())


async def test_what_is_kept_of_services_and_pods_the_cluster_no_longer_has_is_dropped() -> None:
    rt = runtime(FakeKube())
    for i in range(3):  # services created and deleted, each with its own uid
        body = svc(GOOD)
        body["metadata"]["uid"] = f"u{i}"
        await reconcile(rt, tick(), body)
    rt.refused_costs.add("u0")
    rt.refused_releases.add("pod-gone")
    # a pod's /metrics read through an outage that ended long ago: dropped on the next tick, whatever it decides
    rt.pod_reads.keep("ns", "llm-7d9f8c6b5-x2x4q", Read(NOW - 600.0, {}))
    assert set(rt.last_decided) == {"u0", "u1", "u2"}
    kept = svc(GOOD)
    kept["metadata"]["uid"] = "u2"

    from inferscale.handlers import operator

    class Collector:
        interval, last_success = 10.0, None

        def __init__(self) -> None:
            self.unreadable: dict[str, str] = {}

        async def refresh(self) -> Tick:
            return tick(services=[kept], unreadable=self.unreadable)

    collector = Collector()
    collector.unreadable = {"other": "403"}  # a namespace not read: its services' uids are not known this tick
    await operator.Loop(collector, rt).tick()  # type: ignore[arg-type]
    assert set(rt.last_decided) == {"u0", "u1", "u2"} and rt.refused_releases == {"pod-gone"}
    assert rt.pod_reads.kept() == set()
    collector.unreadable = {}
    await operator.Loop(collector, rt).tick()  # type: ignore[arg-type]
    assert set(rt.last_decided) == {"u2"} and rt.refused_costs == set() and rt.refused_releases == set()


def flat(value: float) -> RateHistory:
    """Ten minutes of a steady rate, as the collector keeps it."""
    history = RateHistory(100)
    history.extend((NOW - 600.0 + 60.0 * i, value) for i in range(10))
    return history


async def test_a_service_forecasts_from_the_history_of_its_own_selector_group() -> None:
    kube = FakeKube()
    history = {((("pool", "a"),), "ns", "m", "llm"): flat(10.0)}
    rt = Runtime(kube=kube, default_interval=10.0, history=history)  # type: ignore[arg-type]
    mine = await reconcile(rt, tick(), svc({**GOOD, "metrics": {"selector": {"pool": "a"}}}))
    assert mine is not None and mine.forecast_rps == pytest.approx(10.0)
    other = await reconcile(runtime(kube), tick(), svc({**GOOD, "metrics": {"selector": {"pool": "b"}}}))
    assert other is not None and other.forecast_rps is None


async def test_a_history_that_stopped_an_hour_ago_gives_no_forecast_rather_than_its_old_peak() -> None:
    stopped = RateHistory(100)
    stopped.extend((NOW - 4200.0 + 60.0 * i, 500.0) for i in range(10))  # its range queries failed since
    rt = Runtime(kube=FakeKube(), default_interval=10.0, history={((), "ns", "m", "llm"): stopped})  # type: ignore[arg-type]
    decision = await reconcile(rt, tick(), svc(GOOD))
    assert decision is not None and decision.forecast_rps is None
    assert rt.kube.statuses()[-1]["forecast"] == {"requestRate": None, "horizon": "3m", "method": None}  # type: ignore[attr-defined]
    kube = FakeKube()
    fresh = Runtime(kube=kube, default_interval=10.0, history={((), "ns", "m", "llm"): flat(500.0)})  # type: ignore[arg-type]
    decision = await reconcile(fresh, tick(), svc(GOOD))
    assert decision is not None and decision.forecast_rps == pytest.approx(500.0)
    # the status says how the figure was made: ten minutes of one-minute points are enough for a trend
    assert kube.statuses()[-1]["forecast"]["method"] == "holt"


def ready_pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "llm"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


@pytest.mark.parametrize(
    ("pod", "rate"),
    [
        ("llm-7d9f8c6b5-x2x4q", 75.0),  # its own Deployment's traffic, not the canary's beside it
        ("llm-truncated-by-kubernetes", 100.0),  # a name that does not say its Deployment: the model's
    ],
)
async def test_a_service_forecasts_from_its_own_deployments_history(pod: str, rate: float) -> None:
    history = {((), "ns", "m", "llm"): flat(75.0), ((), "ns", "m", "llm-canary"): flat(25.0)}
    history[((), "ns", "m", None)] = flat(100.0)
    rt = Runtime(kube=FakeKube(), default_interval=10.0, history=history)  # type: ignore[arg-type]
    decision = await reconcile(rt, tick(pods={"ns": [ready_pod(pod)]}), svc(GOOD))
    assert decision is not None and decision.forecast_rps == pytest.approx(rate)


@pytest.mark.parametrize("pods", [[], ["llm-7d9f8c6b5-x2x4q"]])
async def test_a_deployment_without_a_history_of_its_own_has_no_forecast_not_the_models(pods: list[str]) -> None:
    # a canary just created: the stable fleet's traffic is not its own (with no pod Ready yet either)
    history = {((), "ns", "m", "llm-stable"): flat(75.0), ((), "ns", "m", None): flat(75.0)}
    rt = Runtime(kube=FakeKube(), default_interval=10.0, history=history)  # type: ignore[arg-type]
    decision = await reconcile(rt, tick(pods={"ns": [ready_pod(p) for p in pods]}), svc(GOOD))
    assert decision is not None and decision.forecast_rps is None


def starting_pod(name: str, created: float, ready_at: float | None, lost_at: float | None = None) -> dict[str, Any]:
    became = rfc3339(ready_at if ready_at is not None else lost_at if lost_at is not None else created)
    ready = {"type": "Ready", "status": "True" if ready_at is not None else "False", "lastTransitionTime": became}
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "llm"}, "creationTimestamp": rfc3339(created)},
        "status": {"phase": "Running" if ready_at is not None else "Pending", "conditions": [ready]},
    }


async def test_the_lead_is_the_first_ready_of_each_pod_it_watched_start_through_a_readiness_flap() -> None:
    # Two node pools: two pods start in 60 s (image cached), two in 400 s (pulled). Then a slow one's
    # readiness probe flaps, and its Ready time moves to 1,900 s after its creation.
    kube = FakeKube()
    rt, status = runtime(kube), {}
    ready_after = {"llm-a": 60.0, "llm-b": 60.0, "llm-c": 400.0, "llm-d": 400.0}
    flap_at = NOW + 1900.0

    def pods(at: float) -> list[dict[str, Any]]:
        out = []
        for name, start in ready_after.items():
            became = NOW + start if at >= NOW + start else None
            if name == "llm-d" and at >= flap_at:
                became = flap_at
            out.append(starting_pod(name, NOW, became))
        return out

    measured = {}
    for at in [NOW + 10.0 * i for i in range(250)]:
        await reconcile(rt, tick(at=at, pods={"ns": pods(at)}), svc(GOOD, status))
        status = merged(status, kube.statuses()[-1])
        measured[at] = status["timeToReady"].get("measured")
    assert measured[NOW + 300.0] == "1m"  # only the fast pool is Ready
    # the slow pool is a start the replicas must be led by, not a flap to filter out (it read 60s)
    assert measured[NOW + 400.0] == "6m40s" and measured[NOW + 2400.0] == "6m40s"
    assert status["timeToReady"]["starts"] == [{"pod": n, "seconds": s} for n, s in ready_after.items()]
    assert InferenceServiceStatus.model_validate(status).time_to_ready is not None
    # a pod deleted leaves the record with it
    rt2 = runtime(FakeKube())
    await reconcile(rt2, tick(at=NOW + 2500.0, pods={"ns": pods(NOW + 2500.0)[:3]}), svc(GOOD, status))
    left = rt2.kube.statuses()[-1]["timeToReady"]  # type: ignore[attr-defined]
    assert [s["pod"] for s in left["starts"]] == ["llm-a", "llm-b", "llm-c"] and left["measured"] == "6m40s"


async def test_pods_ready_before_the_operator_saw_them_are_measured_without_their_readiness_flaps() -> None:
    # Adopting a fleet that has run for a day: three pods started in 3 minutes, one Ready time moved by a flap
    # half an hour after its creation. The operator did not watch them start, so the flap is filtered.
    kube = FakeKube()
    created = NOW - 86_400.0
    pods = [starting_pod(f"llm-{i}", created, created + 180.0) for i in range(3)]
    pods.append(starting_pod("llm-3", created, created + 1800.0))
    await reconcile(runtime(kube), tick(pods={"ns": pods}), svc(GOOD))
    ttr = kube.statuses()[-1]["timeToReady"]
    assert (ttr["measured"], ttr["samples"], ttr["starts"]) == ("3m", 4, [])
    # nor does an old pod losing its readiness become a start the operator watches
    pods[0] = starting_pod("llm-0", created, None, lost_at=NOW - 10.0)
    await reconcile(runtime(kube), tick(pods={"ns": pods}), svc(GOOD))
    assert kube.statuses()[-1]["timeToReady"]["watching"] == []


async def test_a_service_ticking_faster_than_the_operator_watches_starts_over_two_operator_ticks() -> None:
    # behavior.interval 5s under a 60-s --interval: the service decides every 60 s, so a pod it first sees is
    # one it watched start if it is at most max(WITNESS_FLOOR 60 s, 2 x 60 s) = 120 s old. A pod created 100 s
    # ago, Ready 90 s after, is a watched start (kept); at the service's own 5 s it would read as adopted.
    kube = FakeKube()
    rt = Runtime(kube=kube, default_interval=60.0, history={})  # type: ignore[arg-type]
    pod = starting_pod("llm-a", NOW - 100.0, NOW - 10.0)
    await reconcile(rt, tick(pods={"ns": [pod]}), svc({**GOOD, "behavior": {"interval": "5s"}}))
    ttr = kube.statuses()[-1]["timeToReady"]
    assert ttr["starts"] == [{"pod": "llm-a", "seconds": 90.0}] and ttr["measured"] == "1m30s"


async def test_an_hpa_on_the_target_means_no_writes_to_scale() -> None:
    kube = FakeKube()
    hpa = {
        "metadata": {"name": "cpu", "namespace": "ns"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llm"}},
    }
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(hpas=[hpa]), svc(spec))
    assert kube.scales() == []
    conflict = next(c for c in kube.statuses()[0]["conditions"] if c["type"] == "Conflict")
    assert conflict["status"] == "True" and "HorizontalPodAutoscaler/cpu" in conflict["message"]


async def test_a_problem_told_anew_is_written_and_announced_and_the_last_decision_leaves_status() -> None:
    """Another autoscaler replaces the first: status names the one in the way now, an Event says so, and the
    figures of the last decision (desired, observed, the decision) no longer read as today's."""
    spec = {**GOOD, "replicas": {"min": 1, "max": 8}}
    kube = FakeKube()
    await reconcile(runtime(kube), saturated_tick(2, NOW), svc(spec))
    status: dict[str, Any] = {}
    for written in kube.statuses():
        status = merged(status, written)
    assert status["desiredReplicas"] > 2 and "observed" in status and "decision" in status

    def other(kind: str) -> dict[str, Any]:
        target = {"kind": "Deployment", "name": "llm"}
        return {"metadata": {"name": kind, "namespace": "ns"}, "spec": {"scaleTargetRef": target}}

    for i, (hpas, scaled_objects, named) in enumerate(
        [([other("team-a")], [], "HorizontalPodAutoscaler/team-a"), ([], [other("team-b")], "ScaledObject/team-b")]
    ):
        at = saturated_tick(2, NOW + 600 * (i + 1))
        at.hpas, at.scaled_objects = hpas, scaled_objects
        kube = FakeKube()
        await reconcile(runtime(kube), at, svc(spec, status))
        assert kube.scales() == [] and len(kube.statuses()) == 1
        for written in kube.statuses():
            status = merged(status, written)
        conflict = next(c for c in status["conditions"] if c["type"] == "Conflict")
        assert named in conflict["message"]
        assert [e["reason"] for e in kube.events()] == ["Conflict"] and named in kube.events()[0]["message"]
        assert not {"desiredReplicas", "observed", "recommendations", "forecast", "decision"} & set(status)
        assert status["replicas"] >= 2 and "scaler" in status and status.get("history")
    again = saturated_tick(2, NOW + 1800)  # the same problem told the same way: nothing new
    again.scaled_objects = [other("team-b")]
    kube = FakeKube()
    await reconcile(runtime(kube), again, svc(spec, status))
    assert kube.statuses() == [] and kube.events() == []


async def test_advisory_mode_decides_and_reports_beside_an_hpa_it_does_not_fight() -> None:
    kube = FakeKube()
    hpa = {
        "metadata": {"name": "cpu", "namespace": "ns"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "llm"}},
    }
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}, "mode": "Advisory"}
    decision = await reconcile(runtime(kube), tick(hpas=[hpa]), svc(spec))
    assert decision is not None and decision.replicas == 3 and kube.scales() == []
    conditions = {c["type"]: c for c in kube.statuses()[-1]["conditions"]}
    conflict = conditions["Conflict"]
    assert conflict["status"] == "False" and conflict["reason"] == "AdvisoryBesideAutoscaler"
    assert "would scale to 3" in conditions["Advisory"]["message"]
    assert "HorizontalPodAutoscaler/cpu" in conditions["Advisory"]["message"]


async def test_an_advisory_service_names_a_newer_active_one_that_scales_its_target() -> None:
    advisory = svc({**GOOD, "mode": "Advisory"})
    newer = svc(GOOD)
    newer["metadata"] = {**newer["metadata"], "name": "llm-2", "uid": "u2", "creationTimestamp": "2026-02-01T00:00:00Z"}
    kube = FakeKube()
    await reconcile(runtime(kube), tick(services=[advisory, newer]), advisory)
    conditions = {c["type"]: c for c in kube.statuses()[-1]["conditions"]}
    assert conditions["Conflict"]["reason"] == "AdvisoryBesideAutoscaler"
    assert "InferenceService/llm-2" in conditions["Advisory"]["message"]


async def test_an_older_service_with_an_invalid_spec_or_in_advisory_mode_does_not_block_a_newer_one() -> None:
    invalid = svc({**GOOD, "replicas": {"min": 5, "max": 2}})
    advisory = svc({**GOOD, "mode": "Advisory"})
    advisory["metadata"] = {**advisory["metadata"], "name": "llm-0", "uid": "u0"}
    newer = svc({**GOOD, "replicas": {"min": 3, "max": 4}})
    newer["metadata"] = {**newer["metadata"], "name": "llm-2", "uid": "u2", "creationTimestamp": "2026-02-01T00:00:00Z"}
    kube = FakeKube()
    await reconcile(runtime(kube), tick(services=[invalid, advisory, newer]), newer)
    assert kube.scales() == [3]


@pytest.mark.parametrize(
    "status",
    [{"scaler": "garbage"}, {"scaler": {"recommendations": [{"at": "x"}]}}, {"conditions": "nope", "history": 7}],
)
async def test_garbage_in_status_does_not_crash(status: dict[str, Any]) -> None:
    kube = FakeKube()
    decision = await reconcile(runtime(kube), tick(), svc(GOOD, status))
    assert decision is not None and decision.replicas == 2 and kube.scales() == []  # no metrics: held
    written = kube.statuses()[-1]
    assert written["scaler"]["recommendations"] == []  # the garbage dropped; a tick without data records none
    assert isinstance(written["conditions"], list)


MANAGED = {
    "model": {"name": "m"},
    "replicas": {"min": 1, "max": 4},
    "template": {"spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "argz": ["x"]}]}},
}


async def test_the_managed_deployment_is_created_and_updated_with_strict_field_validation() -> None:
    kube = FakeKube()
    await reconcile(runtime(kube), tick(deployments={}), svc(MANAGED))
    assert kube.strict == ["/apis/apps/v1/namespaces/ns/deployments"]
    owned = {
        "metadata": {"name": "llm", "namespace": "ns", "ownerReferences": [{"uid": "u1", "controller": True}]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}}},
    }
    # the server refuses the template's unknown field: the user hears why the pods keep the old template
    kube = FakeKube(fail={"/deployments/llm": 400})
    rt = runtime(kube)
    for at in (NOW, NOW + 10):  # every tick tries again; the refusal is announced once
        await reconcile(rt, tick(at=at, deployments={("ns", "llm"): owned}), svc(MANAGED))
    assert kube.strict == ["/apis/apps/v1/namespaces/ns/deployments/llm"] * 2
    (failed,) = [e for e in kube.events() if e["reason"] == "UpdateFailed"]
    assert failed["type"] == "Warning" and "keep the old one" in failed["message"]
    changed = {**MANAGED, "template": {"spec": {"containers": [{"name": "vllm", "image": "vllm:v2", "argz": []}]}}}
    await reconcile(rt, tick(at=NOW + 20, deployments={("ns", "llm"): owned}), svc(changed))
    assert len([e for e in kube.events() if e["reason"] == "UpdateFailed"]) == 2  # a new template: news


def _json_patched(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902's add and replace, on object members: what the API server makes of the operator's patch."""
    out = copy.deepcopy(obj)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        *parents, last = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
        node = out
        for key in parents:
            node = node[key]
        assert op["op"] == "add" or last in node, op  # replace needs the member to exist
        node[last] = copy.deepcopy(op["value"])
    return out


@pytest.mark.parametrize("annotated", [True, False])
async def test_a_key_taken_out_of_the_template_leaves_the_managed_deployment(annotated: bool) -> None:
    # a nodeSelector pinned the pods to a zone out of GPUs: taking it out of the spec must move them, where a
    # merge patch kept it on the Deployment and wrote the new template's hash as if applied
    container = [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]
    old = {"spec": {"containers": container, "nodeSelector": {"pool": "zone-b"}, "priorityClassName": "batch"}}
    new = {"metadata": {"labels": {"team": "a"}}, "spec": {"containers": container}}
    base = {"model": {"name": "m"}, "replicas": {"min": 1, "max": 4}}
    deployment = managed_deployment(svc({**base, "template": old}), old, 2)
    if not annotated:  # someone took the annotations off: the hash is added with its map
        del deployment["metadata"]["annotations"]
    kube = FakeKube()
    await reconcile(runtime(kube), tick(deployments={("ns", "llm"): deployment}), svc({**base, "template": new}))
    (ops,) = [b for m, p, b in kube.calls if m == "PATCH" and p.endswith("/deployments/llm")]
    after = _json_patched(deployment, ops)
    pod = after["spec"]["template"]
    assert pod["spec"] == {"containers": container} and after["spec"]["replicas"] == 2
    assert pod["metadata"]["labels"] == {"team": "a", "inferscale.dev/inferenceservice": "llm"}
    # applied: the next tick sends nothing
    again = FakeKube()
    await reconcile(
        runtime(again), tick(at=NOW + 10, deployments={("ns", "llm"): after}), svc({**base, "template": new})
    )
    assert not [p for m, p, _ in again.calls if m == "PATCH" and p.endswith("/deployments/llm")]


@pytest.mark.parametrize(("status", "replicas"), [({}, 1), ({"replicas": 6}, 6), ({"replicas": 40}, 8)])
async def test_a_deleted_managed_deployment_comes_back_with_the_replicas_it_had(
    status: dict[str, Any], replicas: int
) -> None:
    kube = FakeKube()
    await reconcile(runtime(kube), tick(deployments={}), svc({**MANAGED, "replicas": {"min": 1, "max": 8}}, status))
    (created,) = [b for m, p, b in kube.calls if m == "POST" and p.endswith("/deployments")]
    assert created["spec"]["replicas"] == replicas
    assert any(e["reason"] == "Created" and f"with {replicas} replica" in e["message"] for e in kube.events())


async def test_the_older_of_two_services_on_one_target_wins() -> None:
    older = svc(GOOD)
    newer = svc({**GOOD, "replicas": {"min": 3, "max": 4}})
    newer["metadata"] = {**newer["metadata"], "name": "llm-2", "uid": "u2", "creationTimestamp": "2026-02-01T00:00:00Z"}
    t = tick(services=[older, newer])
    kube = FakeKube()
    await reconcile(runtime(kube), t, newer)
    conflict = next(c for c in kube.statuses()[0]["conditions"] if c["type"] == "Conflict")
    assert conflict["status"] == "True" and "InferenceService/llm" in conflict["message"] and kube.scales() == []
    kube = FakeKube()
    await reconcile(runtime(kube), t, older)
    assert all(c["status"] == "False" for c in kube.statuses()[0]["conditions"] if c["type"] == "Conflict")


async def test_an_unchanged_status_is_not_rewritten_until_it_is_due_for_a_refresh() -> None:
    kube, body = FakeKube(), svc(GOOD)
    rt = runtime(kube)
    writes = []
    for at in (NOW, NOW + 10, NOW + 20, NOW + 25, NOW + 30, NOW + 40):
        await reconcile(rt, tick(at=at), body)
        writes.append(len(kube.statuses()))
        body = svc(GOOD, merged(body["status"], {"status": kube.statuses()[-1]})["status"])
    # Written at the first tick, skipped while only timestamps would change, refreshed after 30 s.
    assert writes == [1, 1, 1, 1, 2, 2]


async def test_a_changed_observation_is_written_at_once() -> None:
    kube, body = FakeKube(), svc(GOOD)
    rt = runtime(kube)
    await reconcile(rt, tick(), body)
    body = svc(GOOD, merged({}, {"status": kube.statuses()[-1]})["status"])
    await reconcile(rt, tick(at=NOW + 10, deployments={}), body)  # the target vanished: news
    assert len(kube.statuses()) == 2


def engine_sample(pod: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"namespace": "ns", "pod": pod, "model_name": "m", **labels}, "value": [NOW, str(value)]}


def long_prompt_fleet(pod: str, rate: float = 2.0, prompt: float = 15000.0) -> FleetSnapshot:
    """One Ready pod finishing `rate` requests/s of `prompt`-token prompts and 149-token answers."""
    pods: dict[tuple[str, str, str], PodSeries] = {}
    answers = {
        "gauges": [
            engine_sample(pod, 0.2, __name__="vllm:kv_cache_usage_perc"),
            engine_sample(pod, 0, __name__="vllm:num_requests_waiting"),
            engine_sample(pod, 4, __name__="vllm:num_requests_running"),
        ],
        "sample_time": [engine_sample(pod, NOW - 2)],
        "requests": [engine_sample(pod, rate)],
        "prompt_tokens": [engine_sample(pod, prompt * rate)],
        "generation_tokens": [engine_sample(pod, 149.0 * rate)],
    }
    for name, result in answers.items():
        parse_vector(name, result, pods)
    return FleetSnapshot(NOW, pods, frozenset())


LONG_SPEC = {**GOOD, "model": {"name": "m", "profile": "llama-3.1-8b"}, "slo": {"ttftP95": "7s", "itlMean": "50ms"}}
POD = "llm-7d9f8c6b5-x2x4q"


def long_prompt_tick(rate: float = 2.0, prompt: float = 15000.0, **kw: Any) -> Tick:
    t = tick(pods={"ns": [ready_pod(POD)]}, **kw)
    t.fleet[()] = long_prompt_fleet(POD, rate, prompt)
    return t


def prefill_warnings(kube: FakeKube) -> int:
    return [e["reason"] for e in kube.events()].count("PrefillStepOverITL")


def prefill_cond(status: dict[str, Any]) -> dict[str, Any]:
    (c,) = [c for c in status["conditions"] if c["type"] == "PrefillStepWithinITL"]
    return c


async def test_the_lengths_last_reported_outlive_a_tick_without_rates() -> None:
    kube = FakeKube()
    rt = runtime(kube)
    await reconcile(rt, long_prompt_tick(), svc(LONG_SPEC))
    assert rt.last_lengths["u1"] == (15000.0, 150.0)
    blank = long_prompt_tick(at=NOW + 10)  # Prometheus back: gauges answer, rate() has one sample yet
    for series in blank.fleet[()].pods.values():
        for rate in ("requests", "prompt_tokens", "generation_tokens"):
            series.values.pop(rate, None)
    await reconcile(rt, blank, svc(LONG_SPEC, kube.statuses()[-1]))
    assert rt.last_lengths["u1"] == (15000.0, 150.0)
    rt.forget_absent(set(), set())
    assert rt.last_lengths == {}


def without_rates(t: Tick) -> Tick:
    for series in t.fleet[()].pods.values():
        for rate in ("requests", "prompt_tokens", "generation_tokens"):
            series.values.pop(rate, None)
    return t


def capacity_recommendation(decision: Decision | None) -> Recommendation:
    assert decision is not None
    (r,) = [r for r in decision.recommendations if r.signal is Reason.CAPACITY]
    return r


async def test_a_restarted_operator_sizes_a_tick_without_rates_at_the_lengths_in_status() -> None:
    def process(kube: FakeKube) -> Runtime:  # the range queries answer; rate() has one sample yet
        return Runtime(kube=kube, default_interval=10.0, history={((), "ns", "m", "llm"): flat(2.0)})  # type: ignore[arg-type]

    async def rateless_tick(rt: Runtime, status: dict[str, Any]) -> Recommendation:
        return capacity_recommendation(
            await reconcile(rt, without_rates(long_prompt_tick(at=NOW + 10)), svc(LONG_SPEC, status))
        )

    kube = FakeKube()
    kept = process(kube)
    await reconcile(kept, long_prompt_tick(), svc(LONG_SPEC))
    status = kube.statuses()[-1]
    assert status["observed"]["metrics"] == "Complete"
    in_memory = await rateless_tick(kept, status)
    restarted = await rateless_tick(process(FakeKube()), status)  # a new process: nothing in memory
    # per replica at the 15,000-token prompts (2.23 req/s), not at the spec's typical lengths
    assert restarted.target == in_memory.target == pytest.approx(2.2343, abs=1e-4)
    assert restarted.replicas == in_memory.replicas == 2
    partial = {**status, "observed": {**status["observed"], "metrics": "Partial"}}
    unseen = await rateless_tick(process(FakeKube()), partial)
    assert unseen.target is not None and unseen.target > 10  # a ratio of sums over some pods: typical lengths


async def test_a_prefill_step_over_the_itl_slo_is_a_condition_and_one_warning() -> None:
    kube = FakeKube()
    await reconcile(runtime(kube), long_prompt_tick(), svc(LONG_SPEC))
    status = kube.statuses()[-1]
    cond = prefill_cond(status)
    assert cond["status"] == "False" and "--max-num-batched-tokens 1792" in cond["message"]
    assert prefill_warnings(kube) == 1
    # the next tick, with the condition already in status: no second warning
    await reconcile(runtime(kube), long_prompt_tick(), svc(LONG_SPEC, status))
    assert prefill_warnings(kube) == 1


def state(status: dict[str, Any]) -> tuple[str, str]:
    c = prefill_cond(status)
    return c["status"], c["reason"]


async def test_an_idle_spell_or_a_lost_target_does_not_announce_the_prefill_step_again() -> None:
    kube = FakeKube()
    busy = long_prompt_tick()
    await reconcile(runtime(kube), busy, svc(LONG_SPEC))
    idle = long_prompt_tick(rate=0.0)  # nothing finished: the lengths are unknown
    await reconcile(runtime(kube), idle, svc(LONG_SPEC, kube.statuses()[-1]))
    assert state(kube.statuses()[-1]) == ("False", "PrefillStepOverITL")  # held through the quiet spell
    lost = long_prompt_tick(deployments={})
    await reconcile(runtime(kube), lost, svc(LONG_SPEC, kube.statuses()[-1]))
    assert state(kube.statuses()[-1]) == ("False", "PrefillStepOverITL")  # kept while the target is missing
    await reconcile(runtime(kube), busy, svc(LONG_SPEC, kube.statuses()[-1]))
    assert prefill_warnings(kube) == 1
    # the engine told at the suggested budget: the condition turns True, with no warning
    fixed = {**LONG_SPEC, "model": {**LONG_SPEC["model"], "maxNumBatchedTokens": 1792}}
    await reconcile(runtime(kube), busy, svc(fixed, kube.statuses()[-1]))
    assert state(kube.statuses()[-1]) == ("True", "WithinITL") and prefill_warnings(kube) == 1


async def test_the_engines_own_args_tell_the_operator_its_token_budget() -> None:
    kube = FakeKube()
    engine = {"name": "vllm", "args": ["--model", "m", "--max-num-batched-tokens", "1792"]}
    args = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "template": {"spec": {"containers": [engine]}}}}
    await reconcile(runtime(kube), long_prompt_tick(deployments={("ns", "llm"): args}), svc(LONG_SPEC))
    assert state(kube.statuses()[-1]) == ("True", "WithinITL") and prefill_warnings(kube) == 0


async def test_a_profile_that_cannot_meet_the_slo_says_why_the_capacity_signal_is_missing() -> None:
    kube = FakeKube()
    spec = {**GOOD, "model": {"name": "m", "profile": "llama-3.1-8b"}, "slo": {"ttftP95": "1ms"}}
    decision = await reconcile(runtime(kube), saturated_tick(2, NOW), svc(spec))
    assert decision is not None
    message = kube.statuses()[-1]["decision"]["message"]
    assert "capacity: no prior" in message and "TTFT P95 1ms" in message and "llama-3.1-8b" in message
    kube = FakeKube()
    reachable = {**GOOD, "model": {"name": "m", "profile": "llama-3.1-8b"}}
    await reconcile(runtime(kube), saturated_tick(2, NOW), svc(reachable))
    assert "no prior" not in kube.statuses()[-1]["decision"]["message"]


async def test_requests_too_long_for_the_slo_leave_the_capacity_prior_unknown_not_the_typical_ones() -> None:
    # at 30,000-token prompts no load meets a 500 ms TTFT; the prior at 1,000-token ones (36 req/s per
    # replica) would size them as short requests
    spec = {**GOOD, "model": {"name": "m", "profile": "llama-3.1-8b"}}
    kube = FakeKube()
    decision = await reconcile(runtime(kube), long_prompt_tick(prompt=30000.0), svc(spec))
    assert decision is not None
    message = kube.statuses()[-1]["decision"]["message"]
    assert "capacity: no prior" in message and "30,000-token prompts" in message
    assert Reason.CAPACITY not in {r.signal for r in decision.recommendations}


class VersionedKube(FakeKube):
    """Keeps the service's resourceVersion as the API server does: a status write that carries another one
    is refused with 409, and `bump` is someone else writing the object (an edit of the spec, a late write)."""

    def __init__(self, version: int = 7, fail: dict[str, int] | None = None) -> None:
        super().__init__(fail)
        self.version = version
        self.gets: list[str] = []

    generation = 1  # svc()'s

    def bump(self, edit: bool = False) -> None:
        """Someone else's write; `edit`: of the spec, a new generation."""
        self.version += 1
        self.generation += edit

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        await super().merge_patch(path, body, answer, strict)
        if not path.endswith("/status"):
            return {}
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent is not None and sent != str(self.version):
            raise KubeError(409, "the object has been modified; please apply your changes to the latest version")
        self.bump()
        return {"metadata": {"resourceVersion": str(self.version)}}

    async def get(self, path: str) -> dict[str, Any]:
        self.gets.append(path)
        return {"metadata": {"resourceVersion": str(self.version), "uid": "u1", "generation": self.generation}}


def versioned(spec: dict[str, Any], version: int) -> dict[str, Any]:
    body = svc(spec)
    body["metadata"]["resourceVersion"] = str(version)
    return body


def _status_versions(kube: FakeKube) -> list[str | None]:
    return [(b.get("metadata") or {}).get("resourceVersion") for m, p, b in kube.calls if p.endswith("/status")]


async def test_the_ticks_status_writes_carry_the_version_it_read_and_then_the_one_it_wrote() -> None:
    # The write ahead of the scale moves the version on; the tick's last write must build on it, not on the
    # version the list gave, or every scale would cost a refused write.
    kube = VersionedKube(version=7)
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), versioned(spec, 7))
    assert kube.scales() == [3]
    assert _status_versions(kube) == ["7", "8"] and kube.gets == []


async def test_a_status_write_refused_for_a_write_since_the_list_is_sent_again_on_the_new_version() -> None:
    kube = VersionedKube(version=7)
    kube.bump()  # a refresh of the figures (or a label) landing after the tick listed version 7: the spec is the same
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), versioned(spec, 7))
    assert kube.scales() == [3], "a write refused once for a status write must not defer the scale"
    assert _status_versions(kube) == ["7", "8", "9"]
    assert kube.gets == ["/apis/inferscale.dev/v1alpha1/namespaces/ns/inferenceservices/llm"]


async def test_a_spec_edited_since_the_list_is_decided_again_not_scaled_on_the_old_one() -> None:
    # an SRE sets mode Advisory (or lowers replicas.max) while the tick queries Prometheus: the write ahead is
    # refused for the new version, and resending it would scale on the spec the user just changed
    kube = VersionedKube(version=7)
    kube.bump(edit=True)
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), versioned(spec, 7))
    assert kube.scales() == [] and _status_versions(kube)[:1] == ["7"]
    assert not any(e["reason"] == "ScaleDeferred" for e in kube.events()), "an edit is no failure to warn about"


async def test_a_status_write_refused_twice_is_not_forced_and_nothing_is_scaled() -> None:
    class Contended(VersionedKube):
        async def get(self, path: str) -> dict[str, Any]:
            answer = await super().get(path)
            self.bump()  # written again before the retry lands
            return answer

    kube = Contended(version=8)
    spec = {**GOOD, "replicas": {"min": 3, "max": 4}}
    await reconcile(runtime(kube), tick(), versioned(spec, 7))
    assert kube.scales() == [], "the scale event could not be recorded, so nothing is scaled"
    assert _status_versions(kube)[:2] == ["7", "8"] and len(kube.gets) >= 1
    assert any(e["reason"] == "ScaleDeferred" for e in kube.events())


class EditedWhileScaling(VersionedKube):
    """The user edits the spec while the /scale call runs, after the write ahead has landed; `refuse`: the /scale
    write is refused (422), else it lands."""

    def __init__(self, refuse: bool) -> None:
        super().__init__(version=7)
        self.refuse = refuse
        self.held: dict[str, Any] = {}

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        if path.endswith("/scale"):
            self.bump(edit=True)
            if self.refuse:
                self.calls.append(("PATCH", path, body))
                raise KubeError(422, "refused")
        written = await super().merge_patch(path, body, answer, strict)
        if path.endswith("/status"):
            self.held.update(body["status"])  # only what the API server took
        return written


async def test_a_refused_scale_is_taken_back_even_over_a_spec_edited_meanwhile() -> None:
    # left in status, the event of a scale that never happened would hold the next scale for a whole period
    kube = EditedWhileScaling(refuse=True)
    await reconcile(runtime(kube), tick(), versioned({**GOOD, "replicas": {"min": 3, "max": 4}}, 7))
    assert kube.scales() == [3]
    assert kube.held["scaler"]["scaleEvents"] == []
    last = [b for m, p, b in kube.calls if m == "PATCH" and p.endswith("/status")][-1]
    assert set(last["status"]) == {"scaler"}, "the rest of the tick's status was decided on the old spec"


async def test_a_scale_made_is_recorded_even_over_a_spec_edited_meanwhile() -> None:
    kube = EditedWhileScaling(refuse=False)
    await reconcile(runtime(kube), tick(), versioned({**GOOD, "replicas": {"min": 3, "max": 4}}, 7))
    assert kube.scales() == [3]
    assert len(kube.held["scaler"]["scaleEvents"]) == 1 and "lastScaleTime" in kube.held
    assert kube.held["history"][-1]["to"] == 3
    last = [b for m, p, b in kube.calls if m == "PATCH" and p.endswith("/status")][-1]
    assert set(last["status"]) == {"scaler", "lastScaleTime", "history"}


@pytest.mark.parametrize(
    ("args", "prior"), [(["--max-num-seqs=256", "--max-num-batched-tokens=512"], True), ([], False)]
)
async def test_one_batch_limit_in_the_spec_goes_with_the_engine_s_other_one(args: list[str], prior: bool) -> None:
    # 512 tokens against vLLM's default of 1,024 seats on an H100 is no pair vLLM runs; the pod's own 256 is
    spec = {**GOOD, "model": {"name": "m", "profile": "llama-3.1-8b", "gpu": "h100-80gb", "maxNumBatchedTokens": 512}}
    container = {"name": "vllm", "args": ["--model=m", *args]}
    deployment = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "template": {"spec": {"containers": [container]}}}}
    kube = FakeKube()
    history = {((), "ns", "m", "llm"): flat(2.0)}
    rt = Runtime(kube=kube, default_interval=10.0, history=history)  # type: ignore[arg-type]
    engines = long_prompt_tick(prompt=1000.0, deployments={("ns", "llm"): deployment})  # one pod, 2 req/s
    decision = await reconcile(rt, engines, svc(spec))
    ready = next(c for c in kube.statuses()[-1]["conditions"] if c["type"] == "Ready")
    assert decision is not None and ready["reason"] != "InvalidSpec"  # it was InvalidSpec: no decision, ever
    assert kube.events() == [] or all(e["reason"] != "InvalidSpec" for e in kube.events())
    capacity = [r for r in decision.recommendations if r.signal is Reason.CAPACITY]
    if prior:
        # sized at the lengths the engines report, and says so
        at = "(prior at 1,000-token prompts, 150-token outputs)"
        assert capacity and capacity[0].target is not None and at in capacity[0].message
    else:  # the engine would run 1,024 seats: no prior to size with, and the decision says why
        assert "no prior from the spec alone" in decision.message and "max_num_seqs" in decision.message


@pytest.mark.parametrize(("args", "prior"), [(["--tensor-parallel-size=4"], True), ([], False)])
async def test_a_model_the_spec_gives_no_tp_for_is_sized_at_the_pod_s(args: list[str], prior: bool) -> None:
    # llama-3.1-70b fits no H100 at the default TP 1; the pod runs it on 4: the CRD took the spec, so must the operator
    spec = {**GOOD, "model": {"name": "m", "profile": "llama-3.1-70b", "gpu": "h100-80gb"}}
    container = {"name": "vllm", "args": ["--model=m", *args]}
    deployment = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "template": {"spec": {"containers": [container]}}}}
    kube = FakeKube()
    rt = Runtime(kube=kube, default_interval=10.0, history={((), "ns", "m", "llm"): flat(2.0)})  # type: ignore[arg-type]
    decision = await reconcile(rt, long_prompt_tick(prompt=1000.0, deployments={("ns", "llm"): deployment}), svc(spec))
    assert decision is not None  # it was InvalidSpec: no decision, ever
    capacity = [r for r in decision.recommendations if r.signal is Reason.CAPACITY]
    if prior:
        # sized at the lengths the engines report, and says so
        at = "(prior at 1,000-token prompts, 150-token outputs)"
        assert capacity and capacity[0].target is not None and at in capacity[0].message
    else:
        assert "tensor-parallel size" in decision.message


def two_pods_at_their_ips() -> tuple[dict[str, str], list[dict[str, Any]], int]:
    """Two Ready pods at their own IPs (loopback addresses, as pod IPs are each their own) and a free port."""
    ips = {"llm-7d9f8c6b5-x2x4q": "127.0.0.2", "llm-7d9f8c6b5-b7kqz": "127.0.0.3"}
    pods = [{**ready_pod(name), "status": {**ready_pod(name)["status"], "podIP": ip}} for name, ip in ips.items()]
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.2", 0))
        return ips, pods, s.getsockname()[1]


async def test_through_a_prometheus_outage_a_pod_port_reads_the_engines_and_scales_up_never_down() -> None:
    from tests.unit.adapters.test_pod_metrics import MODEL, serving, vllm_page

    ips, pods, port = two_pods_at_their_ips()  # a queue building on them
    served = {"requests": 0.0, "waiting": 20.0}

    def page() -> str:
        return vllm_page(served["requests"], 0, 0, served["requests"], 0, waiting=served["waiting"])

    spec = {**GOOD, "model": {"name": MODEL}, "metrics": {"podPort": port}, "replicas": {"min": 1, "max": 10}}
    kube = FakeKube()
    rt = runtime(kube)
    async with serving({ip: page for ip in ips.values()}, port):
        first = await reconcile(rt, tick(pods={"ns": pods}), svc(spec))
        served["requests"] = 300.0
        later = tick(pods={"ns": pods})
        later.at = NOW + 10.0
        second = await reconcile(rt, later, svc(spec, kube.statuses()[-1]))
    assert first is not None and second is not None
    # 40 waiting on each pod (both engines) is 10 per replica over the target of 4: up, through the outage
    assert first.replicas > 2 and first.metrics_available
    metrics = next(c for c in kube.statuses()[-1]["conditions"] if c["type"] == "MetricsAvailable")
    assert metrics["status"] == "True" and "Prometheus did not answer" in metrics["message"]
    assert f"read 2 of 2 Ready pods' /metrics on port {port} directly" in metrics["message"]
    # the second read makes rates of the counters: 300 requests per engine in 10 s on each of two pods
    observed = kube.statuses()[-1]["observed"]
    assert float(observed["requestRate"]) == pytest.approx(120.0, rel=1e-2) and observed["podsReporting"] == 2
    assert second.replicas > second.current

    # an idle fleet of 4 read from the pods is not shrunk, even with no scale-down window: only Prometheus,
    # once back, decides the way down
    served["waiting"] = 0.0
    behavior = {"scaleDown": {"stabilizationWindow": "0s"}}
    idle = svc({**spec, "behavior": behavior}, kube.statuses()[-1])
    four = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replicas": 4}}
    async with serving({ip: page for ip in ips.values()}, port):
        t = tick(pods={"ns": pods}, deployments={("ns", "llm"): four})
        t.at = NOW + 400.0
        down = await reconcile(rt, t, idle)
    assert down is not None and down.current == 4 and down.replicas == 4
    assert "no scale-down while a query failed" in down.message and "prometheus" in down.message


async def test_through_a_prometheus_outage_the_pods_rates_carry_the_forecast_s_history_on() -> None:
    from tests.unit.adapters.test_pod_metrics import MODEL, serving, vllm_page

    ips, pods, port = two_pods_at_their_ips()
    requests = [0.0]

    def page() -> str:
        return vllm_page(requests[0], 0, 0, requests[0], 0, waiting=0.0)

    # Prometheus's history stopped with the outage, 9 minutes ago: a minute more and it would forecast nothing
    key = ((), "ns", MODEL, "llm")
    before = RateHistory(100)
    before.extend((NOW - 540.0 - 60.0 * i, 10.0) for i in reversed(range(10)))
    rt = Runtime(kube=(kube := FakeKube()), default_interval=10.0, history={key: before})  # type: ignore[arg-type]
    spec = {**GOOD, "model": {"name": MODEL}, "metrics": {"podPort": port}, "replicas": {"min": 1, "max": 10}}
    decisions = []
    async with serving({ip: page for ip in ips.values()}, port):
        for i in range(14):  # every 10 s for 130 s, each pod's two engines serving 15 req/s each
            t = tick(pods={"ns": pods})
            t.at = NOW + 10.0 * i
            requests[0] = 150.0 * i
            status = kube.statuses()[-1] if kube.statuses() else None
            decisions.append(await reconcile(rt, t, svc(spec, status)))
    added = [(s.at - NOW, s.value) for s in rt.history[key] if s.at >= NOW]
    # the first read has no rate; then one point a minute, the fleet's 60 req/s, as the range query's would be
    assert [at for at, _ in added] == [10.0, 70.0, 130.0]
    assert [v for _, v in added] == pytest.approx([60.0, 60.0, 60.0], rel=1e-2)
    last = decisions[-1]
    assert last is not None and last.forecast_method is not None and last.forecast_rps == pytest.approx(60.0, rel=0.05)


async def test_without_a_pod_port_or_an_answer_from_the_pods_the_outage_holds() -> None:
    pods = [{**ready_pod("llm-7d9f8c6b5-x2x4q"), "status": {**ready_pod("x")["status"], "podIP": "127.0.0.2"}}]
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.2", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket closes
    kube = FakeKube()
    decision = await reconcile(runtime(kube), tick(pods={"ns": pods}), svc({**GOOD, "metrics": {"podPort": port}}))
    assert decision is not None and not decision.changed
    metrics = next(c for c in kube.statuses()[-1]["conditions"] if c["type"] == "MetricsAvailable")
    assert (
        metrics["status"] == "False"
        and f"the pods' /metrics on port {port} gave nothing usable either" in (metrics["message"])
    )
    assert "cannot connect" in metrics["message"]
