"""Leader election on a Lease: one holder at a time, a standby takes over only a whole lease duration after
the holder's last renewal it saw, a holder that cannot renew stops before that, and a released Lease is taken
at the next try. Two candidates share one Lease store that checks resourceVersions as the API server does;
fake loop time (looptime)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from tests.polling import until

from inferscale.adapters.kube import KubeError
from inferscale.adapters.lease import LeaseRecord, Seen, lease_spec, may_take, observe
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot
from inferscale.handlers.collector import Collector
from inferscale.handlers.leader import Elector
from inferscale.handlers.operator import Loop, cleanup
from inferscale.handlers.refresher import Refresher
from inferscale.handlers.runtime import Runtime


class Leases:
    """One Lease as the API server keeps it: a write with a stale resourceVersion is refused (409)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.writes: list[str] = []  # holderIdentity of each accepted write

    def _stored(self, lease: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        lease["metadata"]["resourceVersion"] = str(self.version)
        self.lease = lease
        self.writes.append(lease["spec"]["holderIdentity"])
        return copy.deepcopy(lease)


class Kube:
    """A candidate's view of the API server; `down` makes every request fail as a partition would.
    `before`: seconds a request takes to reach the store; `after`: seconds its answer takes to come back."""

    def __init__(self, store: Leases, before: float = 0.0, after: float = 0.0) -> None:
        self.store, self.down = store, False
        self.before, self.after = before, after

    def _check(self) -> None:
        if self.down:
            raise KubeError(0, "ClientConnectorError: unreachable")

    async def get(self, path: str) -> dict[str, Any]:
        await asyncio.sleep(self.before)
        self._check()
        if self.store.lease is None:
            raise KubeError(404, "not found")
        answer = copy.deepcopy(self.store.lease)
        await asyncio.sleep(self.after)
        return answer

    async def create(self, path: str, body: dict[str, Any], strict: bool = False) -> dict[str, Any]:
        await asyncio.sleep(self.before)
        self._check()
        if self.store.lease is not None:
            raise KubeError(409, "already exists")
        stored = self.store._stored(copy.deepcopy(body))
        await asyncio.sleep(self.after)
        return stored

    async def merge_patch(self, path: str, body: dict[str, Any], answer: bool = True, strict: bool = False) -> Any:
        await asyncio.sleep(self.before)
        self._check()
        if self.store.lease is None:
            raise KubeError(404, 'leases.coordination.k8s.io "inferscale" not found')
        if body["metadata"]["resourceVersion"] != self.store.lease["metadata"]["resourceVersion"]:
            raise KubeError(409, "the object has been modified")
        lease = copy.deepcopy(self.store.lease)
        lease["spec"].update(body["spec"])
        stored = self.store._stored(lease)
        await asyncio.sleep(self.after)
        if self.down:
            raise KubeError(0, "ClientConnectorError: the answer was lost")
        return stored


def candidate(store: Leases, me: str, before: float = 0.0, after: float = 0.0) -> tuple[Elector, Kube]:
    kube = Kube(store, before, after)
    loop = asyncio.get_running_loop()
    return Elector(kube, "ops", "inferscale", me, clock=loop.time, wall=loop.time), kube  # type: ignore[arg-type]


def record(holder: str, renewed: str = "t1", transitions: int = 0) -> LeaseRecord:
    return LeaseRecord(holder, 15.0, renewed, transitions, "t0", "1")


def test_a_lease_expires_by_the_candidates_own_clock_from_when_it_last_changed() -> None:
    seen = observe(None, record("a"), now=100.0)
    assert not may_take(seen, "b", 114.9)
    seen = observe(seen, record("a"), now=110.0)  # unchanged: the clock keeps running from 100
    assert seen.at == 100.0 and may_take(seen, "b", 115.0)
    renewed = observe(seen, record("a", renewed="t2"), now=112.0)
    assert renewed.at == 112.0 and not may_take(renewed, "b", 115.0)
    assert may_take(Seen(record(""), 100.0), "b", 100.0), "a released lease is free at once"
    assert may_take(Seen(record("b"), 100.0), "b", 100.0), "one's own lease is renewed at any time"


def test_a_takeover_counts_a_transition_and_a_renewal_keeps_the_acquire_time() -> None:
    first = lease_spec("a", 15, 0.0, None)
    assert first["leaseTransitions"] == 0 and first["holderIdentity"] == "a"
    held = LeaseRecord("a", 15.0, first["renewTime"], 0, first["acquireTime"], "1")
    renewal = lease_spec("a", 15, 5.0, held)
    assert renewal["acquireTime"] == first["acquireTime"] and renewal["renewTime"] != first["renewTime"]
    assert renewal["leaseTransitions"] == 0
    assert lease_spec("b", 15, 30.0, held)["leaseTransitions"] == 1


@pytest.mark.looptime
async def test_one_leader_and_a_standby_that_takes_over_only_after_a_whole_lease_duration() -> None:
    store = Leases()
    a, kube_a = candidate(store, "a")
    b, _ = candidate(store, "b")
    await a.acquire()
    loop = asyncio.get_running_loop()
    holding = asyncio.create_task(a.hold())
    standby = asyncio.create_task(b.acquire())
    await asyncio.sleep(60.0)
    assert not standby.done() and not holding.done(), "while a renews, b stands by"
    assert set(store.writes) == {"a"} and b.holder == "a"

    kube_a.down = True  # a is cut off from the API server: it can no longer renew
    cut = loop.time()
    assert await asyncio.wait_for(holding, 120) == "the lease could not be renewed for 10s"
    stopped = loop.time() - cut
    await asyncio.wait_for(standby, 120)
    taken = loop.time() - cut
    assert stopped <= a.renew_deadline + a.retry, f"a stops acting {stopped:.1f}s after losing the API server"
    assert taken >= b.duration - b.retry, f"b took over {taken:.1f}s after a's last renewal"
    assert stopped < taken, "the old leader stops before the new one starts"
    assert b.leader and not a.leader and store.writes[-1] == "b"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


@pytest.mark.looptime
async def test_a_leader_that_sees_another_holder_stops_at_once() -> None:
    store = Leases()
    a, _ = candidate(store, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    assert store.lease is not None
    store.lease["spec"]["holderIdentity"] = "intruder"  # e.g. a takeover during a long pause of a's process
    store.lease["metadata"]["resourceVersion"] = "99"
    assert await asyncio.wait_for(holding, 120) == "intruder holds the lease now"
    assert not a.leader


@pytest.mark.looptime
async def test_a_released_lease_is_taken_at_the_next_try_not_after_a_lease_duration() -> None:
    store = Leases()
    a, _ = candidate(store, "a")
    b, _ = candidate(store, "b")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    standby = asyncio.create_task(b.acquire())
    await asyncio.sleep(20.0)
    holding.cancel()
    await a.release()
    loop = asyncio.get_running_loop()
    released = loop.time()
    await asyncio.wait_for(standby, 120)
    assert loop.time() - released <= b.retry
    assert not a.leader and b.leader


@pytest.mark.looptime
async def test_two_candidates_creating_the_lease_at_once_make_one_leader() -> None:
    store = Leases()
    a, _ = candidate(store, "a")
    b, _ = candidate(store, "b")
    first = await asyncio.gather(a.try_once(), b.try_once())
    assert sorted(first) == [False, True]
    assert len(store.writes) == 1


@pytest.mark.looptime
async def test_a_lease_that_cannot_be_read_is_a_failed_renewal_not_a_crash() -> None:
    store = Leases()
    a, _ = candidate(store, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    assert store.lease is not None
    store.lease["spec"]["leaseDurationSeconds"] = "fifteen"  # someone wrote nonsense into it
    store.lease["metadata"]["resourceVersion"] = "99"  # so the holder's next write is refused and it reads
    assert await asyncio.wait_for(holding, 120) == "the lease could not be renewed for 10s"


@pytest.mark.looptime
async def test_a_bug_in_the_election_stops_the_tick_instead_of_leaving_it_unguarded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inferscale.handlers.operator import Loop

    store = Leases()
    elector, _ = candidate(store, "a")

    async def broken() -> str:
        raise RuntimeError("a bug")

    monkeypatch.setattr(elector, "hold", broken)
    started: list[bool] = []
    loop = Loop(collector=None, runtime=None, elector=elector)  # type: ignore[arg-type]
    monkeypatch.setattr(loop, "start", lambda: started.append(True))
    stopped: list[bool] = []
    await loop.lead(lambda: stopped.append(True))
    assert started == [True] and stopped == [True] and loop.stopped.is_set()
    assert loop.lost == "leader election failed (RuntimeError: a bug)" and not elector.leader


@pytest.mark.parametrize(
    ("leader_delays", "standby_delays"),
    [((0.0, 0.0), (0.0, 0.0)), ((0.0, 5.0), (0.0, 0.0)), ((0.0, 3.0), (4.0, 0.0)), ((3.0, 1.0), (0.0, 4.0))],
    ids=["prompt", "renewals-answered-late", "late-answers-and-slow-reads", "slow-both-ways"],
)
@pytest.mark.looptime
async def test_two_candidates_never_may_write_at_once_however_late_the_answers(
    leader_delays: tuple[float, float], standby_delays: tuple[float, float]
) -> None:
    store = Leases()
    a, kube_a = candidate(store, "a", *leader_delays)
    b, _ = candidate(store, "b", *standby_delays)
    loop = asyncio.get_running_loop()
    both: list[float] = []
    leaders: list[str] = []

    async def watch() -> None:
        while True:
            if a.may_write() and b.may_write():
                both.append(loop.time())
            now = "a" if a.may_write() else "b" if b.may_write() else ""
            if now and (not leaders or leaders[-1] != now):
                leaders.append(now)
            await asyncio.sleep(0.01)

    watching = asyncio.create_task(watch())
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await asyncio.sleep(9.0)
    standby = asyncio.create_task(b.acquire())
    await asyncio.sleep(20.0)
    kube_a.down = True  # from now on a's renewals and their answers are lost
    await asyncio.wait_for(standby, 120)
    await asyncio.wait_for(holding, 120)
    await asyncio.sleep(1.0)
    watching.cancel()
    assert both == [], f"both could write at {both[:3]}"
    assert leaders == ["a", "b"], leaders


@pytest.mark.looptime
async def test_the_holder_counts_its_deadline_from_sending_and_a_standby_from_reading() -> None:
    """The renewal was committed somewhere between its send and its answer: the holder assumes the send,
    the earliest; a standby dates what it read by the read's return, the latest. Both err on the safe side."""
    store = Leases()
    a, _ = candidate(store, "a", before=0.0, after=4.0)
    loop = asyncio.get_running_loop()
    sent = loop.time()
    await a.acquire()
    assert loop.time() - sent == pytest.approx(4.0)
    await asyncio.sleep(10.0 - 4.0 - 0.1)
    assert a.may_write()
    await asyncio.sleep(0.2)
    assert not a.may_write(), "10 s after the send, not after the answer"
    b, _ = candidate(store, "b", before=0.0, after=3.0)
    asked = loop.time()
    assert not await b.try_once()
    assert b.seen is not None and b.seen.at == pytest.approx(asked + 3.0)


@pytest.mark.looptime
@pytest.mark.parametrize("holder_first", [True, False])
async def test_a_lease_deleted_under_its_holder_never_gives_two_writers(holder_first: bool) -> None:
    # kubectl delete lease (or its namespace re-created): the standby creates it at its next try, so the holder
    # must stop acting as soon as its renewal is answered 404, and lead on only if its own create comes first
    store = Leases()
    a, _ = candidate(store, "a")
    b, b_kube = candidate(store, "b")
    loop = asyncio.get_running_loop()
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    standby = asyncio.create_task(b.acquire())
    await asyncio.sleep(20.3)
    b_kube.before = 0.0 if not holder_first else 1.5  # who reaches the store first after the deletion
    store.lease = None
    both: list[float] = []

    async def watch() -> None:
        while True:
            if a.may_write() and b.may_write():
                both.append(loop.time())
            await asyncio.sleep(0.01)

    watching = asyncio.create_task(watch())
    await asyncio.sleep(30.0)
    watching.cancel()
    assert both == []
    if holder_first:
        assert a.may_write() and not holding.done() and store.lease is not None
        assert store.lease["spec"]["holderIdentity"] == "a"
        holding.cancel()
        standby.cancel()
    else:
        assert await holding == "b holds the lease now"
        assert standby.done() and store.lease is not None and store.lease["spec"]["holderIdentity"] == "b"


class HeldGets(Kube):
    """Once `held` is an Event, a GET reads the store when it arrives and its answer comes back only when the
    Event is set: the answer is in flight while another candidate writes."""

    def __init__(self, store: Leases) -> None:
        super().__init__(store)
        self.held: asyncio.Event | None = None
        self.waiting = 0  # GETs whose answer is held back now

    async def get(self, path: str) -> dict[str, Any]:
        if self.held is None:
            return await super().get(path)
        self._check()
        answer = copy.deepcopy(self.store.lease)
        self.waiting += 1
        await self.held.wait()
        self.waiting -= 1
        if answer is None:
            raise KubeError(404, "not found")
        return answer


@pytest.mark.looptime
async def test_a_holder_answered_404_stops_writing_before_another_creates_the_lease_again() -> None:
    # The dangerous order: a's renewal and its read are both answered 404, and b creates the Lease before a's
    # own create (409). From the 404 on, a must not write: b may create the Lease at any moment after it.
    store = Leases()
    a_kube = HeldGets(store)
    loop = asyncio.get_running_loop()
    a = Elector(a_kube, "ops", "inferscale", "a", clock=loop.time, wall=loop.time)  # type: ignore[arg-type]
    b, _ = candidate(store, "b")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    store.lease = None
    a_kube.held = asyncio.Event()
    await until(lambda: a_kube.waiting == 1, "a's read after its renewal's 404", timeout=5.0)
    assert not a.may_write(), "a's last renewal is under 10 s old, but the Lease it renewed is gone"
    await b.acquire()
    assert b.may_write() and not a.may_write()
    a_kube.held.set()  # a's read is answered 404, its create 409
    assert await holding == "the lease was deleted, and another candidate created it again first"
    assert not a.may_write() and store.lease is not None and store.lease["spec"]["holderIdentity"] == "b"
    assert store.writes[-1] == "b"


class _SlowLists:
    """A loaded API server: each of the tick's lists takes 3 s; its watches stay quiet."""

    requests_sent = 0

    async def list_versioned(self, *_: Any, **__: Any) -> tuple[list[Any], str]:
        return [], "1"

    async def list(self, *_: Any, **__: Any) -> list[Any]:
        await asyncio.sleep(3.0)
        return []

    async def watch(self, *_: Any, **__: Any) -> AsyncIterator[dict[str, Any]]:
        await asyncio.sleep(3600)
        yield {}

    async def close(self) -> None:
        pass


class _HungPrometheus:
    """Answers the first tick, then hangs for the whole --prometheus-timeout (10 s)."""

    queries_sent = 0

    def __init__(self) -> None:
        self.calls = 0

    async def snapshot(self, now: float, selector: Any, tpot: bool) -> FleetSnapshot:
        self.calls += 1
        if self.calls > 1:
            await asyncio.sleep(10.0)
        return FleetSnapshot(now, {}, frozenset(QUERIES), ("down",))

    async def rate_history(self, *_: Any, **__: Any) -> dict[Any, Any]:
        return {}

    def describe(self, e: BaseException) -> str:
        return str(e)

    def close(self) -> None:
        pass


@pytest.mark.looptime
async def test_a_sigterm_while_prometheus_hangs_still_hands_the_lease_over() -> None:
    # the tick in flight must not wait out the hung query before it stops: by then the renew deadline has passed,
    # the Lease can no longer be released, and the standby waits a whole lease duration instead of one retry
    loop = asyncio.get_running_loop()
    store = Leases()
    elector, lease_kube = candidate(store, "a")
    lease_kube.close = lambda: asyncio.sleep(0)  # type: ignore[attr-defined]
    kube = _SlowLists()
    collector = Collector(kube, _HungPrometheus(), ["ns"], 10.0, clock=loop.time)  # type: ignore[arg-type]
    refresher = Refresher(lambda path, body: asyncio.sleep(0, True))  # type: ignore[arg-type, return-value]
    runtime = Runtime(kube=kube, default_interval=10.0, history={}, refresher=refresher)  # type: ignore[arg-type]
    lp = Loop(collector, runtime, elector=elector)
    lp.election = asyncio.create_task(lp.lead(lambda: None))
    await asyncio.sleep(14.0)  # the second tick lists until ~16 s while its Prometheus snapshot hangs until ~23 s
    started = loop.time()
    await cleanup(SimpleNamespace(loop=lp))  # type: ignore[arg-type]  # what kopf runs on SIGTERM
    assert loop.time() - started < 2.0
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == ""
