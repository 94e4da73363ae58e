"""The list-then-watch cache against an in-process API server that lists with a resourceVersion and
streams watch events the test feeds it: the cache follows events, lists again when the watch expires
or fails, and says it is out of sync (so the tick lists) until it has."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from inferscale.adapters.informer import Informer
from inferscale.adapters.kube import Credentials, KubeApi
from inferscale.handlers.collector import Collector, Tick


def pod(name: str, ready: str = "True", rv: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "managedFields": [{}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]},
    }


class Server:
    def __init__(self) -> None:
        self.pods = [pod("a"), pod("b")]
        self.version = "10"
        self.lists = 0
        self.watches: list[dict[str, str]] = []
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.watch_status = 200

    async def list(self, request: web.Request) -> web.Response:
        if request.query.get("watch"):
            return await self.watch(request)
        self.lists += 1
        return web.json_response({"items": self.pods, "metadata": {"resourceVersion": self.version}})

    async def watch(self, request: web.Request) -> web.StreamResponse:
        self.watches.append(dict(request.query))
        if self.watch_status != 200:
            return web.json_response({"message": "boom"}, status=self.watch_status)
        resp = web.StreamResponse()
        await resp.prepare(request)
        while (event := await self.events.get()) is not None:
            await resp.write(json.dumps(event).encode() + b"\n")
        return resp


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, KubeApi]]:
    srv = Server()
    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods", srv.list)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = KubeApi(Credentials(host=f"http://127.0.0.1:{port}", ssl=False, token=None, token_file=None))
    yield srv, kube
    for _ in srv.watches:  # end every watch still streaming, or the server waits for it at shutdown
        srv.events.put_nowait(None)
    await kube.close()
    await runner.cleanup()


async def until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def names(informer: Informer) -> list[str] | None:
    items = informer.items()
    return None if items is None else sorted(i["metadata"]["name"] for i in items)


async def no_wait(_: float) -> None:
    return None


async def test_the_cache_lists_once_then_follows_the_watch(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    inf = Informer(kube, "v1", "pods", "ns", keep=lambda o: {"metadata": o["metadata"]})
    assert inf.items() is None  # not listed yet: the tick must list
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    assert names(inf) == ["a", "b"]
    assert srv.watches[0]["resourceVersion"] == "10" and srv.watches[0]["allowWatchBookmarks"] == "true"
    srv.events.put_nowait({"type": "ADDED", "object": pod("c", rv="11")})
    srv.events.put_nowait({"type": "MODIFIED", "object": pod("a", ready="False", rv="12")})
    srv.events.put_nowait({"type": "DELETED", "object": pod("b", rv="13")})
    srv.events.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}})
    await until(lambda: inf.resource_version == "20", "the bookmark")
    assert names(inf) == ["a", "c"]
    assert inf.store[("ns", "a")]["metadata"]["resourceVersion"] == "12"
    srv.events.put_nowait(None)  # the server ends the watch on time: resumed from the last version
    await until(lambda: len(srv.watches) == 2, "a second watch")
    assert srv.watches[1]["resourceVersion"] == "20" and srv.lists == 1
    await inf.stop()


async def test_an_expired_watch_lists_again(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    inf = Informer(kube, "v1", "pods", "ns")
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    srv.pods, srv.version = [pod("z")], "50"  # what changed while the watch could not follow
    srv.events.put_nowait({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}})
    await until(lambda: len(srv.watches) == 2, "a watch after the new list")
    assert srv.lists == 2 and names(inf) == ["z"] and srv.watches[1]["resourceVersion"] == "50"
    await inf.stop()


async def test_a_failing_watch_leaves_the_cache_out_of_sync_until_it_has_listed_again(
    server: tuple[Server, KubeApi],
) -> None:
    srv, kube = server
    srv.watch_status = 500
    gate = asyncio.Event()

    async def held(_: float) -> None:
        await gate.wait()

    inf = Informer(kube, "v1", "pods", "ns", sleep=held)
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    await until(lambda: inf.items() is None, "the cache to drop out of sync")
    srv.watch_status = 200
    gate.set()
    await until(lambda: srv.lists == 2 and inf.items() is not None, "a new list")
    assert names(inf) == ["a", "b"]
    await inf.stop()


async def test_a_kind_that_is_not_served_is_an_empty_cache(server: tuple[Server, KubeApi]) -> None:
    _, kube = server
    inf = Informer(kube, "keda.sh/v1alpha1", "scaledobjects", "ns", sleep=no_wait)
    await inf.run()  # returns: there is nothing to watch
    assert inf.items() == []


class CountingKube:
    def __init__(self) -> None:
        self.listed: list[str] = []

    async def list(self, gv: str, plural: str, ns: str | None, keep: Any = None) -> list[dict[str, Any]]:
        self.listed.append(plural)
        return []


async def test_the_tick_reads_a_synced_cache_and_lists_what_is_not() -> None:
    kube = CountingKube()
    collector = Collector(kube, None, ["ns"], 15.0)  # type: ignore[arg-type]
    pods = collector.informers[("ns", "pods")]
    pods.store, pods.synced = {("ns", "a"): pod("a")}, True
    tick = Tick(at=0.0, seq=1)
    await collector._lists(tick)
    assert sorted(kube.listed) == ["deployments", "horizontalpodautoscalers", "inferenceservices", "scaledobjects"]
    assert [p["metadata"]["name"] for p in tick.pods["ns"]] == ["a"]


async def test_many_open_watches_never_starve_the_ticks_requests(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    informers = [Informer(kube, "v1", "pods", "ns") for _ in range(120)]  # two per namespace, 60 namespaces
    for inf in informers:
        inf.start()
    await until(lambda: len(srv.watches) == 120, "120 open watches")
    items = await asyncio.wait_for(kube.list("v1", "pods", "ns"), timeout=10)
    assert len(items) == 2
    for inf in informers:
        await inf.stop()


async def test_a_watch_that_goes_quiet_is_resumed_without_a_new_list(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    inf = Informer(kube, "v1", "pods", "ns")
    inf.idle = 0.3  # seconds without even a bookmark
    inf.start()
    await until(lambda: len(srv.watches) >= 2, "a second watch after the first went quiet")
    assert srv.lists == 1 and srv.watches[1]["resourceVersion"] == "10" and inf.items() is not None
    await inf.stop()


async def test_an_unexpected_failure_leaves_the_cache_out_of_sync_not_silently_stale(
    server: tuple[Server, KubeApi],
) -> None:
    srv, kube = server
    gate = asyncio.Event()

    async def held(_: float) -> None:
        await gate.wait()

    def keep(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] == "bad":
            raise TypeError("a bug in the slimming")
        return obj

    inf = Informer(kube, "v1", "pods", "ns", keep=keep, sleep=held)
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    srv.events.put_nowait({"type": "ADDED", "object": pod("bad", rv="11")})
    await until(lambda: inf.items() is None, "the cache to drop out of sync")
    gate.set()
    await until(lambda: srv.lists == 2 and inf.items() is not None, "a new list")
    await inf.stop()
