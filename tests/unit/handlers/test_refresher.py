"""Figure-only status refreshes: paced over the time they are given, latest body wins, and nothing is
still in flight (able to overwrite a newer status) once `finish` returns. Fake loop time (looptime)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Mapping
from typing import Any

import pytest
from tests.polling import until
from tests.unit.handlers.test_reconcile import GOOD, NOW, FakeKube, svc, tick

from inferscale.handlers.collector import Tick
from inferscale.handlers.operator import Loop
from inferscale.handlers.reconcile import reconcile, write_status
from inferscale.handlers.refresher import Refresher
from inferscale.handlers.runtime import Runtime


class Recorder:
    def __init__(self, hold: asyncio.Event | None = None) -> None:
        self.sent: list[tuple[float, str, Mapping[str, Any]]] = []
        self.hold = hold
        self.done: list[str] = []

    async def __call__(self, path: str, body: Mapping[str, Any]) -> bool:
        self.sent.append((asyncio.get_running_loop().time(), path, body))
        if self.hold is not None:
            await self.hold.wait()
        self.done.append(path)
        return True


@pytest.mark.looptime
async def test_refreshes_are_spread_over_the_time_given_and_the_newest_body_wins() -> None:
    loop = asyncio.get_running_loop()
    send = Recorder()
    r = Refresher(send, clock=loop.time)
    for i in range(10):
        r.submit(f"/s/{i}", {"v": 0}, written=float(i))
    r.submit("/s/3", {"v": 1}, written=3.0)
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
        r.submit(f"/s/{i}", {}, written=float(i))
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
    body["metadata"]["resourceVersion"] = "7"
    await reconcile(rt, tick(), body)  # first status: news
    assert len(kube.statuses()) == 1 and rt.refresher is not None and rt.refresher.pending == {}

    body["status"] = kube.statuses()[0]
    rt.last_decided.clear()
    await reconcile(rt, tick(at=NOW + 5), body)  # nothing new, figures fresh
    await reconcile(rt, tick(at=NOW + 40), body)  # nothing new, figures due
    assert len(kube.statuses()) == 1
    path = "/apis/inferscale.dev/v1alpha1/namespaces/ns/inferenceservices/llm/status"
    assert list(rt.refresher.pending) == [path]
    written, queued_body = rt.refresher.pending[path]
    assert queued_body["metadata"] == {"resourceVersion": "7"}  # refused if the status changed since the read
    assert written == NOW

    body["spec"] = {**GOOD, "replicas": {"min": 3, "max": 4}}
    body["metadata"]["generation"] = 2
    await reconcile(rt, tick(at=NOW + 45), body)  # a new count is news: the scale event ahead of the scale, then all
    assert len(kube.statuses()) == 3 and list(kube.statuses()[1]) == ["scaler"]


@pytest.mark.looptime
async def test_the_stalest_figures_go_first_so_a_dropped_refresh_is_not_dropped_again() -> None:
    loop = asyncio.get_running_loop()
    send = Recorder()
    r = Refresher(send, concurrency=1, clock=loop.time)
    r.submit("/late-in-the-list", {}, written=100.0)
    r.submit("/dropped-last-tick", {}, written=10.0)
    r.submit("/never-written", {}, written=-math.inf)
    r.start(until=loop.time() + 3.0)
    await asyncio.sleep(4.0)
    await r.finish()
    assert [p for _, p, _ in send.sent] == ["/never-written", "/dropped-last-tick", "/late-in-the-list"]


async def test_a_refresh_refused_by_its_precondition_is_dropped_quietly(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("test-refresh")
    kube = FakeKube(fail={"/status": 409})
    stale = {"metadata": {"resourceVersion": "7"}, "status": {}}
    assert await write_status(kube, "/x/status", stale, log) is False  # type: ignore[arg-type]
    assert not caplog.records
    assert await write_status(kube, "/x/status", {"status": {}}, log) is False  # type: ignore[arg-type]
    assert "could not write status" in caplog.text


@pytest.mark.looptime
async def test_the_loop_lets_every_refresh_land_before_the_next_tick_reads() -> None:
    loop = asyncio.get_running_loop()
    events: list[str] = []

    async def slow_send(path: str, body: Mapping[str, Any]) -> bool:
        events.append("write sent")
        await asyncio.sleep(30.0)  # an API server slower than the tick interval
        events.append("write landed")
        return True

    refresher = Refresher(slow_send)

    class Collector:
        interval, last_success, reads = 10.0, None, 0

        async def refresh(self) -> Tick:
            self.reads += 1
            events.append(f"read {self.reads}")
            if self.reads == 1:
                refresher.submit("/s/a/status", {"status": {}}, written=0.0)
            return Tick(at=loop.time(), seq=self.reads)

    collector = Collector()
    rt = Runtime(kube=FakeKube(), default_interval=10.0, history={}, refresher=refresher)  # type: ignore[arg-type]
    running = Loop(collector, rt)  # type: ignore[arg-type]
    task = asyncio.create_task(running.run())
    await until(lambda: collector.reads >= 2, "a second read", timeout=120, interval=1.0)
    running.stopped.set()
    running.wake.set()
    await asyncio.gather(task, return_exceptions=True)
    assert events[:4] == ["read 1", "write sent", "write landed", "read 2"]
