"""The deletion costs inferscale wrote come off the pods once no Active InferenceService scales them, so a
later HPA or `kubectl scale` is not steered by the loads of a scale-down long past; a cost a user set, and
the pods of a service inferscale still scales, are left as they are."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from tests.unit.handlers.test_reconcile import DEPLOYMENT, GOOD, NOW, FakeKube, ready_pod, runtime, svc

from inferscale.adapters.deletion_cost import ANNOTATION, OWNER, owned_cost
from inferscale.handlers import cost_release
from inferscale.handlers.collector import Tick
from inferscale.handlers.cost_release import release_costs, unsteered


def costed(name: str, cost: str | None = "3", mine: str | None = "3", app: str = "llm") -> dict[str, Any]:
    pod = ready_pod(name)
    pod["metadata"]["labels"] = {"app": app}
    pod["metadata"]["uid"] = f"uid-{name}"
    pod["metadata"]["annotations"] = {k: v for k, v in ((ANNOTATION, cost), (OWNER, mine)) if v is not None}
    return pod


def hpa(target: str = "llm") -> dict[str, Any]:
    return {
        "metadata": {"name": "h", "namespace": "ns"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": target}},
    }


def a_tick(services: list[dict[str, Any]], pods: list[dict[str, Any]], **kw: Any) -> Tick:
    other = {"metadata": {"name": "other", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "other"}}}}
    t = Tick(at=NOW, seq=1, deployments={("ns", "llm"): DEPLOYMENT, ("ns", "other"): other}, pods={"ns": pods})
    t.services = services
    for k, v in kw.items():
        setattr(t, k, v)
    return t


def released(kube: FakeKube) -> list[str]:
    return sorted(p.rsplit("/", 1)[-1] for m, p, b in kube.calls if m == "PATCH" and "/pods/" in p)


def test_a_cost_is_inferscales_only_while_its_copy_matches() -> None:
    assert owned_cost(costed("a"))
    assert owned_cost(costed("a", cost=None)), "the copy left after the cost itself was taken off"
    assert not owned_cost(costed("a", cost="9")), "a cost someone changed since"
    assert not owned_cost(costed("a", mine=None)), "a user's cost"
    assert not owned_cost(ready_pod("a"))


@pytest.mark.parametrize(
    ("why", "services", "extra"),
    [
        ("the service was deleted", [], {}),
        ("the service is Advisory", [svc({**GOOD, "mode": "Advisory"})], {}),
        ("an HPA scales the target (Conflict)", [svc(GOOD)], {"hpas": [hpa()]}),
        ("the spec is invalid", [svc({**GOOD, "replicas": {"min": 5, "max": 2}})], {}),
        ("the service now names another Deployment", [svc({**GOOD, "scaleTargetRef": {"name": "other"}})], {}),
    ],
)
async def test_costs_come_off_the_pods_no_active_service_scales(
    why: str, services: list[dict[str, Any]], extra: dict[str, Any]
) -> None:
    kube = FakeKube()
    pods = [costed("llm-a"), costed("llm-b", cost=None), costed("llm-user", mine=None), ready_pod("llm-plain")]
    assert await release_costs(runtime(kube), a_tick(services, pods, **extra)) == 2, why
    assert released(kube) == ["llm-a", "llm-b"], why
    for _, _, body in kube.calls:
        assert body == {"metadata": {"annotations": {ANNOTATION: None, OWNER: None}}}


async def test_the_pods_of_a_target_inferscale_scales_keep_their_costs() -> None:
    kube = FakeKube()
    pods = [costed("llm-a"), costed("other-a", app="other")]
    newer = svc(GOOD)
    newer["metadata"] = {**newer["metadata"], "name": "late", "uid": "u2", "creationTimestamp": "2026-02-01T00:00:00Z"}
    # the younger of two services on one target stands down, but the older one still scales its pods
    assert await release_costs(runtime(kube), a_tick([svc(GOOD), newer], pods)) == 1
    assert released(kube) == ["other-a"]


async def test_nothing_is_released_without_a_whole_view_of_the_cluster() -> None:
    pods = [costed("llm-a")]
    kube = FakeKube()
    assert await release_costs(runtime(kube), a_tick([], pods, kube_error="HTTP 500")) == 0
    assert kube.calls == []


def test_a_service_whose_target_does_not_exist_blocks_no_release_beside_it() -> None:
    typo = svc({**GOOD, "scaleTargetRef": {"name": "lllm"}})
    typo["metadata"] = {**typo["metadata"], "name": "typo", "uid": "u9"}
    pods = [costed("llm-a"), costed("other-a", app="other")]
    t = a_tick([typo, svc({**GOOD, "scaleTargetRef": {"name": "other"}})], pods)
    assert [p["metadata"]["name"] for p in unsteered(t)] == ["llm-a"]


async def test_with_the_costs_switched_off_the_operator_does_not_touch_pods() -> None:
    kube = FakeKube()
    rt = runtime(kube)
    rt.deletion_cost = False
    assert await release_costs(rt, a_tick([], [costed("llm-a")])) == 0
    assert kube.calls == []


async def test_a_refused_release_is_not_retried_and_a_transient_one_is(caplog: pytest.LogCaptureFixture) -> None:
    pods = [costed("llm-a"), costed("llm-b")]
    kube = FakeKube(fail={"llm-a": 403, "llm-b": 503})
    rt = runtime(kube)
    with caplog.at_level(logging.WARNING, logger="inferscale"):
        assert await release_costs(rt, a_tick([], pods)) == 0
    assert "ns/llm-a: HTTP 403" in caplog.text
    kube.calls.clear()
    kube.fail = {}
    assert await release_costs(rt, a_tick([], pods)) == 1
    assert released(kube) == ["llm-b"], "the 403 is not sent again every tick; the 503 is retried"


async def test_a_deleted_pod_counts_as_released_and_a_terminating_one_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = FakeKube(fail={"llm-gone": 404})
    going = costed("llm-going")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await release_costs(runtime(kube), a_tick([], [costed("llm-gone"), going])) == 1
    assert released(kube) == ["llm-gone"]
    monkeypatch.setattr(cost_release, "BATCH", 2)
    kube = FakeKube()
    many = [costed(f"llm-{i}") for i in range(5)]
    assert await release_costs(runtime(kube), a_tick([], many)) == 2, "a large stand-down is spread over ticks"


async def test_a_hung_api_server_costs_the_tick_at_most_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    class Hung(FakeKube):
        async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}

    monkeypatch.setattr(cost_release, "DEADLINE", 0.05)
    rt = runtime(Hung())
    assert await release_costs(rt, a_tick([], [costed("llm-a")])) == 0
    assert rt.refused_releases == set(), "a timeout may pass: tried again at the next tick"
