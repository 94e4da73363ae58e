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

from inferscale.adapters.informer import STALE_AFTER, Informer
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


async def test_a_failed_watch_is_resumed_from_its_version_and_out_of_sync_until_heard_from(
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
    await until(lambda: len(srv.watches) == 2, "a second watch")
    assert inf.items() is None and srv.watches[1]["resourceVersion"] == "10" and srv.lists == 1
    srv.events.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}})
    await until(lambda: inf.items() is not None, "the bookmark")
    await inf.stop()


async def test_http_410_lists_again_at_once_then_backs_off(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    srv.watch_status = 410
    slept: list[float] = []
    gate = asyncio.Event()

    async def held(seconds: float) -> None:
        slept.append(seconds)
        await gate.wait()

    inf = Informer(kube, "v1", "pods", "ns", sleep=held)
    inf.start()
    await until(lambda: slept != [], "a backoff")
    assert srv.lists == 2 and len(srv.watches) == 2 and slept == [2.0]  # a second 410 in a row waits
    await inf.stop()


async def test_a_watch_that_ends_without_a_word_backs_off(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    srv.events.put_nowait(None)  # the first watch ends at once: a proxy that closes the stream
    slept: list[float] = []
    gate = asyncio.Event()

    async def held(seconds: float) -> None:
        slept.append(seconds)
        await gate.wait()

    inf = Informer(kube, "v1", "pods", "ns", sleep=held)
    inf.start()
    await until(lambda: slept != [], "a backoff")
    assert slept == [1.0] and len(srv.watches) == 1
    await inf.stop()


async def test_a_list_without_a_version_is_retried_not_taken_as_empty(server: tuple[Server, KubeApi]) -> None:
    _, kube = server
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    inf = Informer(kube, "apps/v1", "deployments", "ns", sleep=record)  # 404: a proxy, an upgrade
    inf.start()
    await until(lambda: len(slept) >= 3, "retries")
    assert slept[:3] == [1.0, 2.0, 4.0] and inf.items() is None
    await inf.stop()


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
    pods.store, pods.synced, pods.heard = {("ns", "a"): pod("a")}, True, pods.clock()
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
    inf = Informer(kube, "v1", "pods", "ns", sleep=no_wait)
    inf.idle = 0.3  # seconds without even a bookmark
    inf.start()
    await until(lambda: len(srv.watches) >= 2, "a second watch after the first went quiet")
    assert srv.lists == 1 and srv.watches[1]["resourceVersion"] == "10"
    await inf.stop()


async def test_a_cache_not_heard_from_for_too_long_is_out_of_sync(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    now = [0.0]
    inf = Informer(kube, "v1", "pods", "ns", clock=lambda: now[0])
    inf.start()
    await until(lambda: srv.watches != [] and inf.items() is not None, "the watch")
    now[0] = STALE_AFTER + 1  # a connection that stalled without a reset: no event, no bookmark
    assert inf.items() is None
    srv.events.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "11"}}})
    await until(lambda: inf.items() is not None, "the bookmark")
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


async def test_a_quiet_watch_the_server_ends_on_time_proves_the_cache_fresh(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    now = [0.0]
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    inf = Informer(kube, "v1", "pods", "ns", sleep=record, clock=lambda: now[0])
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    now[0] = 100.0  # no event for 100 s, then the server ends the watch at its timeoutSeconds
    srv.events.put_nowait(None)
    await until(lambda: len(srv.watches) == 2, "the next watch")
    assert slept == [] and inf.heard == 100.0 and inf.items() is not None
    await inf.stop()
