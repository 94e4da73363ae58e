"""Figure-only status refreshes: paced over the time they are given, latest body wins, and nothing is
still in flight (able to overwrite a newer status) once `finish` returns. Fake loop time (looptime)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from tests.unit.handlers.test_reconcile import GOOD, NOW, FakeKube, svc, tick

from inferscale.handlers.reconcile import Runtime, reconcile
from inferscale.handlers.refresher import Refresher


class Recorder:
    def __init__(self, hold: asyncio.Event | None = None) -> None:
        self.sent: list[tuple[float, str, Mapping[str, Any]]] = []
        self.hold = hold
        self.done: list[str] = []

    async def __call__(self, path: str, body: Mapping[str, Any]) -> None:
        self.sent.append((asyncio.get_running_loop().time(), path, body))
        if self.hold is not None:
            await self.hold.wait()
        self.done.append(path)


@pytest.mark.looptime
async def test_refreshes_are_spread_over_the_time_given_and_the_newest_body_wins() -> None:
    loop = asyncio.get_running_loop()
    send = Recorder()
    r = Refresher(send, clock=loop.time)
    for i in range(10):
        r.submit(f"/s/{i}", {"v": 0})
    r.submit("/s/3", {"v": 1})
    start = loop.time()
    r.start(until=start + 10.0)
    await asyncio.sleep(11.0)
    assert await r.finish() == 0
    times = [t - start for t, _, _ in send.sent]
    assert len(times) == 10
    assert times[0] == pytest.approx(0.0)
    assert 8.0 <= times[-1] <= 10.0  # the last one goes out near the end, not in a burst at the start
    assert all(b - a > 0.5 for a, b in itertools.pairwise(times))
    assert [b for _, p, b in send.sent if p == "/s/3"] == [{"v": 1}]


@pytest.mark.looptime
async def test_finish_waits_for_writes_in_flight_and_drops_the_unsent() -> None:
    loop = asyncio.get_running_loop()
    hold = asyncio.Event()
    send = Recorder(hold)
    r = Refresher(send, concurrency=2, clock=loop.time)
    for i in range(6):
        r.submit(f"/s/{i}", {})
    r.start(until=loop.time() + 60.0)
    await asyncio.sleep(30.0)  # two sent, both held by the API: no slot for a third
    assert len(send.sent) == 2 and send.done == []
    finishing = asyncio.create_task(r.finish())
    await asyncio.sleep(1.0)
    assert not finishing.done()  # a write in flight could land after the next tick's read
    hold.set()
    assert await finishing == 4
    assert sorted(send.done) == ["/s/0", "/s/1"]
    assert r.pending == {}


async def test_reconcile_queues_a_figure_refresh_but_writes_news_in_the_tick() -> None:
    kube = FakeKube()
    queued = Recorder()
    rt = Runtime(kube=kube, default_interval=10.0, history={}, refresher=Refresher(queued))  # type: ignore[arg-type]
    body = svc(GOOD)
    await reconcile(rt, tick(), body)  # first status: news
    assert len(kube.statuses()) == 1 and rt.refresher is not None and rt.refresher.pending == {}

    body["status"] = kube.statuses()[0]
    rt.last_decided.clear()
    await reconcile(rt, tick(at=NOW + 5), body)  # nothing new, figures fresh
    await reconcile(rt, tick(at=NOW + 40), body)  # nothing new, figures due
    assert len(kube.statuses()) == 1
    assert list(rt.refresher.pending) == ["/apis/inferscale.dev/v1alpha1/namespaces/ns/inferenceservices/llm/status"]

    body["spec"] = {**GOOD, "replicas": {"min": 3, "max": 4}}
    body["metadata"]["generation"] = 2
    await reconcile(rt, tick(at=NOW + 45), body)  # a new count is news
    assert len(kube.statuses()) == 2
