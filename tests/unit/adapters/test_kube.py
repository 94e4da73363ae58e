"""The REST client against an in-process HTTP server: paged lists and answers it need not decode."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from tests.unit.adapters.local_api import local_api

from inferscale.adapters.kube import LIST_PAGE, KubeApi, KubeError
from inferscale.handlers.collector import slim

PODS = 2 * LIST_PAGE + 7


def pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"p{i}",
            "namespace": "ns",
            "labels": {"app": "llm"},
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
            "annotations": {"big": "x" * 100},
        },
        "spec": {"containers": [{"name": "vllm", "image": "vllm"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"},
    }


@pytest.fixture
async def api() -> AsyncIterator[tuple[KubeApi, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    async def pods(request: web.Request) -> web.Response:
        seen.append(dict(request.query))
        limit, start = int(request.query["limit"]), int(request.query.get("continue") or 0)
        end = min(start + limit, PODS)
        meta = {"continue": str(end)} if end < PODS else {}
        return web.json_response({"items": [pod(i) for i in range(start, end)], "metadata": meta})

    async def patch(_: web.Request) -> web.Response:
        return web.Response(text="{not json: the caller said it would not read the answer")

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods", pods)
    app.router.add_patch("/apis/x/status", patch)
    async with local_api(app) as kube:
        yield kube, seen


async def test_a_list_is_read_in_pages_and_each_page_slimmed(api: tuple[KubeApi, list[dict[str, str]]]) -> None:
    kube, seen = api
    items = await kube.list("v1", "pods", "ns", keep=lambda o: slim(o, "pods"))
    assert [i["metadata"]["name"] for i in items] == [f"p{i}" for i in range(PODS)]
    assert len(seen) == 3 and all(q["limit"] == str(LIST_PAGE) for q in seen)
    assert items[0] == {
        "metadata": {"name": "p0", "namespace": "ns", "labels": {"app": "llm"}},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "restarts": 0,
            "podIP": "10.0.0.1",  # where spec.metrics.podPort reads the engine
        },
    }


async def test_a_kind_that_is_not_served_lists_as_empty(api: tuple[KubeApi, list[dict[str, str]]]) -> None:
    kube, _ = api
    assert await kube.list("keda.sh/v1alpha1", "scaledobjects", "ns") == []


async def test_a_write_whose_answer_is_not_wanted_is_not_decoded(api: tuple[KubeApi, list[dict[str, str]]]) -> None:
    kube, _ = api
    assert await kube.merge_patch("/apis/x/status", {"status": {}}, answer=False) == {}
    with pytest.raises(ValueError):
        await kube.merge_patch("/apis/x/status", {"status": {}})


def test_other_kinds_keep_their_spec_but_not_kubectls_copy_of_it() -> None:
    applied = "kubectl.kubernetes.io/last-applied-configuration"
    svc = {
        "metadata": {"name": "llm", "annotations": {applied: "{...}", "team": "a"}, "managedFields": [{}]},
        "spec": {"model": {"name": "m"}},
        "status": {"replicas": 2},
    }
    assert slim(svc, "inferenceservices") == {
        "metadata": {"name": "llm", "annotations": {"team": "a"}},
        "spec": {"model": {"name": "m"}},
        "status": {"replicas": 2},
    }


def _recording_api() -> tuple[web.Application, list[str]]:
    """An API server that answers every request and records its method: what left the process."""
    hits: list[str] = []

    async def any_request(request: web.Request) -> web.Response:
        hits.append(request.method)
        return web.json_response({"kind": "Status"})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", any_request)
    return app, hits


async def test_a_fenced_client_reads_but_sends_no_write() -> None:
    from inferscale.adapters.kube import FENCED

    app, hits = _recording_api()
    async with local_api(app) as kube:
        leading = [True]
        kube.fence = lambda: leading[0]
        await kube.merge_patch("/apis/apps/v1/namespaces/ns/deployments/llm/scale", {"spec": {"replicas": 2}})
        leading[0] = False  # the Lease may have passed to a standby
        for write in (
            kube.merge_patch("/apis/apps/v1/namespaces/ns/deployments/llm/scale", {"spec": {"replicas": 3}}),
            kube.create("/api/v1/namespaces/ns/events", {"kind": "Event"}),
            kube.delete("/api/v1/namespaces/ns/pods/p"),
        ):
            with pytest.raises(KubeError) as refused:
                await write
            assert refused.value.status == FENCED and "no longer holds the leader Lease" in str(refused.value)
        await kube.get("/api/v1/namespaces/ns/pods")
    assert hits == ["PATCH", "GET"], "no write left the process once the fence closed"


async def test_a_write_that_had_to_connect_meets_the_fence_again_once_connected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the fence passed, then the TCP and TLS handshake to a struggling API server took longer than the Lease had
    from inferscale.adapters.kube import FENCED

    app, hits = _recording_api()
    leading = [True]
    connect = aiohttp.TCPConnector._create_connection

    async def slow_connect(self: aiohttp.TCPConnector, *args: Any, **kwargs: Any) -> Any:
        leading[0] = False  # the Lease passes while the connection is made
        return await connect(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.TCPConnector, "_create_connection", slow_connect)
    async with local_api(app) as kube:
        kube.fence = lambda: leading[0]
        with pytest.raises(KubeError) as refused:
            await kube.merge_patch("/api/v1/namespaces/ns/pods/p", {"metadata": {"annotations": {}}})
        assert refused.value.status == FENCED and "passed while it connected" in str(refused.value)
        await kube.get("/api/v1/namespaces/ns/pods")  # a read is no write: it is sent
    assert hits == ["GET"]


async def test_a_request_without_an_answer_says_so_and_how_long_it_waited() -> None:
    # A timeout's own text is empty: the message that reaches the log and the Events must not be "HTTP 0: ".
    never = asyncio.Event()

    async def hang(_: web.Request) -> web.Response:
        await never.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods", hang)
    async with local_api(app, timeout=0.2) as kube:
        try:
            with pytest.raises(KubeError) as failed:
                await kube.get("/api/v1/namespaces/ns/pods")
        finally:
            never.set()
    assert failed.value.status == 0 and failed.value.transient
    assert str(failed.value) == "no complete answer from the API server (timed out after 0.2s)"
