"""The list-then-watch cache against an in-process API server that lists with a resourceVersion and
streams watch events the test feeds it: the cache follows events, lists again when the watch expires
or fails, and says it is out of sync (so the tick lists) until it has."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from tests.polling import until
from tests.unit.adapters.local_api import local_api

from inferscale.adapters.informer import STALE_AFTER, Informer
from inferscale.adapters.kube import KubeApi
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
    async with local_api(app) as kube:
        yield srv, kube
        for _ in srv.watches:  # end every watch still streaming, or the server waits for it at shutdown
            srv.events.put_nowait(None)


def names(informer: Informer) -> list[str] | None:
    items = informer.items()
    return None if items is None else sorted(i["metadata"]["name"] for i in items)


class Sleeps:
    """The informer's backoff: records each wait; `held` waits until `gate` is set instead of returning."""

    def __init__(self, held: bool = False) -> None:
        self.slept: list[float] = []
        self.held = held
        self.gate = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self.held:
            await self.gate.wait()


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
    assert inf.lists == {"start": 1, "expired": 1}
    await inf.stop()


async def test_a_failed_watch_is_resumed_from_its_version_and_out_of_sync_until_heard_from(
    server: tuple[Server, KubeApi],
) -> None:
    srv, kube = server
    srv.watch_status = 500
    sleeps = Sleeps(held=True)
    inf = Informer(kube, "v1", "pods", "ns", sleep=sleeps)
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    await until(lambda: inf.items() is None, "the cache to drop out of sync")
    srv.watch_status = 200
    sleeps.gate.set()
    await until(lambda: len(srv.watches) == 2, "a second watch")
    assert inf.items() is None and srv.watches[1]["resourceVersion"] == "10" and srv.lists == 1
    srv.events.put_nowait({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}})
    await until(lambda: inf.items() is not None, "the bookmark")
    await inf.stop()


async def test_http_410_lists_again_at_once_then_backs_off(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    srv.watch_status = 410
    sleeps = Sleeps(held=True)
    inf = Informer(kube, "v1", "pods", "ns", sleep=sleeps)
    inf.start()
    await until(lambda: sleeps.slept != [], "a backoff")
    assert srv.lists == 2 and len(srv.watches) == 2 and sleeps.slept == [2.0]  # a second 410 in a row waits
    assert inf.lists == {"start": 1, "expired": 1}
    await inf.stop()


async def test_a_watch_that_ends_without_a_word_backs_off(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    srv.events.put_nowait(None)  # the first watch ends at once: a proxy that closes the stream
    sleeps = Sleeps(held=True)
    inf = Informer(kube, "v1", "pods", "ns", sleep=sleeps)
    inf.start()
    await until(lambda: sleeps.slept != [], "a backoff")
    assert sleeps.slept == [1.0] and len(srv.watches) == 1
    await inf.stop()


async def test_a_list_without_a_version_is_retried_not_taken_as_empty(server: tuple[Server, KubeApi]) -> None:
    _, kube = server
    sleeps = Sleeps()
    inf = Informer(kube, "apps/v1", "deployments", "ns", sleep=sleeps)  # 404: a proxy, an upgrade
    inf.start()
    await until(lambda: len(sleeps.slept) >= 3, "retries")
    assert sleeps.slept[:3] == [1.0, 2.0, 4.0] and inf.items() is None
    await inf.stop()


class CountingKube:
    def __init__(self) -> None:
        self.listed: list[str] = []

    async def list(
        self, gv: str, plural: str, ns: str | None, keep: Any = None, optional: bool = True
    ) -> list[dict[str, Any]]:
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


def test_the_caches_lists_are_summed_over_namespaces_by_resource_and_reason() -> None:
    collector = Collector(CountingKube(), None, ["a", "b"], 15.0)  # type: ignore[arg-type]
    for ns in ("a", "b"):
        collector.informers[(ns, "pods")].lists.update({"start": 1, "expired": 2 if ns == "a" else 0})
    collector.informers[("b", "deployments")].lists["failed"] += 1
    assert collector.list_counts() == [("deployments", "failed", 1), ("pods", "expired", 2), ("pods", "start", 2)]


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
    inf = Informer(kube, "v1", "pods", "ns", sleep=Sleeps())
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
    sleeps = Sleeps(held=True)

    def keep(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] == "bad":
            raise TypeError("a bug in the slimming")
        return obj

    inf = Informer(kube, "v1", "pods", "ns", keep=keep, sleep=sleeps)
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    srv.events.put_nowait({"type": "ADDED", "object": pod("bad", rv="11")})
    await until(lambda: inf.items() is None, "the cache to drop out of sync")
    sleeps.gate.set()
    await until(lambda: srv.lists == 2 and inf.items() is not None, "a new list")
    assert inf.lists == {"start": 1, "failed": 1}
    await inf.stop()


async def test_a_quiet_watch_the_server_ends_on_time_proves_the_cache_fresh(server: tuple[Server, KubeApi]) -> None:
    srv, kube = server
    now = [0.0]
    sleeps = Sleeps()
    inf = Informer(kube, "v1", "pods", "ns", sleep=sleeps, clock=lambda: now[0])
    inf.start()
    await until(lambda: srv.watches != [], "the watch")
    now[0] = 100.0  # no event for 100 s, then the server ends the watch at its timeoutSeconds
    srv.events.put_nowait(None)
    await until(lambda: len(srv.watches) == 2, "the next watch")
    assert sleeps.slept == [] and inf.heard == 100.0 and inf.items() is not None
    await inf.stop()
