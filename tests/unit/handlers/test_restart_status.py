"""What a restarted (or newly elected) operator reads back from status: a status another version or a person left
behind must neither crash a tick nor change what the operator writes from then on, and a restart in the middle of a
scale-down window or an outage must decide as the operator that never stopped would have.

The API server is a small fake that applies status merge patches (RFC 7386) with their resourceVersion
preconditions, as the real one does, so that what a tick reads is what the ticks before it left."""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
from functools import partial
from typing import Any

import pytest
from tests.unit.handlers.objects import merged, svc

from inferscale.adapters.kube import KubeError
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot, PodSeries, parse_vector
from inferscale.adapters.workload import rfc3339
from inferscale.handlers.collector import Tick
from inferscale.handlers.reconcile import reconcile, write_status
from inferscale.handlers.refresher import Refresher
from inferscale.handlers.runtime import Runtime
from inferscale.handlers.status import has_news
from inferscale.scaling.state import state_to_status
from inferscale.scaling.types import ScalerState, TimedReplicas

NOW = 1_800_000_000.0
SPEC = {"model": {"name": "m"}, "scaleTargetRef": {"name": "llm"}, "replicas": {"min": 1, "max": 8}}


class Server:
    """One InferenceService and its Deployment as the API server holds them."""

    def __init__(self, replicas: int, status: dict[str, Any] | None = None) -> None:
        self.version = 1
        self.svc: dict[str, Any] = svc(SPEC, status)
        self.svc["metadata"]["resourceVersion"] = "1"
        self.deployment: dict[str, Any] = {
            "metadata": {"name": "llm", "namespace": "ns", "uid": "d1", "resourceVersion": "1"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "llm"}}},
        }
        self.status_writes = 0

    @property
    def replicas(self) -> int:
        return int(self.deployment["spec"]["replicas"])


class Kube:
    def __init__(self, server: Server) -> None:
        self.server = server

    @staticmethod
    def _precondition(body: Any, obj: dict[str, Any]) -> None:
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version is not None and version != obj["metadata"]["resourceVersion"]:
            raise KubeError(409, "the object has been modified")

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        s = self.server
        if path.endswith("/status"):
            self._precondition(body, s.svc)
            s.svc["status"] = merged(s.svc["status"], body["status"])
            s.version += 1
            s.svc["metadata"]["resourceVersion"] = str(s.version)
            s.status_writes += 1
            return copy.deepcopy(s.svc)
        if path.endswith("/scale"):
            self._precondition(body, s.deployment)
            s.deployment["spec"]["replicas"] = body["spec"]["replicas"]
            s.deployment["metadata"]["resourceVersion"] += "+"
        return {}

    async def get(self, path: str) -> dict[str, Any]:
        return copy.deepcopy(self.server.svc)

    async def create(self, path: str, body: Any, strict: bool = False) -> dict[str, Any]:
        return dict(body)


def process(server: Server) -> Runtime:
    """A freshly started operator: nothing in memory, figure refreshes paced between ticks."""
    kube = Kube(server)
    rt = Runtime(kube=kube, default_interval=10.0, history={})  # type: ignore[arg-type]
    rt.refresher = Refresher(partial(write_status, kube, logger=logging.getLogger("test")))
    return rt


def engine(pod: str, value: float, at: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"namespace": "ns", "pod": pod, "model_name": "m", **labels}, "value": [at, str(value)]}


def cluster(server: Server, at: float, kv: float, waiting: float, rate: float, down: bool = False) -> Tick:
    """The tick's view: the Deployment's pods all Ready, each reporting the fleet's load evenly."""
    names = [f"llm-7d9f8c6b5-x{i}x4q" for i in range(server.replicas)]
    pods = [
        {
            "metadata": {"name": n, "namespace": "ns", "labels": {"app": "llm"}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
        for n in names
    ]
    tick = Tick(at=at, seq=1, deployments={("ns", "llm"): copy.deepcopy(server.deployment)}, pods={"ns": pods})
    if down:
        tick.fleet[()] = FleetSnapshot(at, {}, frozenset(QUERIES), ("down",))
        return tick
    series: dict[tuple[str, str, str], PodSeries] = {}
    for n in names:
        gauges = [
            engine(n, kv, at, __name__="vllm:kv_cache_usage_perc"),
            engine(n, waiting / len(names), at, __name__="vllm:num_requests_waiting"),
            engine(n, 4, at, __name__="vllm:num_requests_running"),
        ]
        parse_vector("gauges", gauges, series)
        parse_vector("sample_time", [engine(n, at - 2, at)], series)
        parse_vector("requests", [engine(n, rate / len(names), at)], series)
    tick.fleet[()] = FleetSnapshot(at, series, frozenset())
    return tick


async def one_tick(rt: Runtime, server: Server, tick: Tick, refreshes_land: bool = True) -> None:
    """One tick of the operator's loop: reconcile on the status as listed, then the paced refreshes (lost when the
    process dies before they are sent)."""
    body = copy.deepcopy(server.svc)
    tick.services = [body]
    await reconcile(rt, tick, body)
    assert rt.refresher is not None
    if refreshes_land:
        await rt.refresher._pace(tick.at)
    await rt.refresher.finish()


def test_a_scaler_member_this_version_does_not_write_is_not_news() -> None:
    written = state_to_status(ScalerState(recommendations=(TimedReplicas(NOW, 2),)))
    stored = {k: v for k, v in written.items() if v is not None}  # as the API server keeps it
    left = {"scaler": {**stored, "retiredField": {"since": NOW - 3600}}}  # another version's, or a hand edit's
    assert not has_news(left, {"scaler": written})
    # what this version does write is still compared, a value it takes back (null) included
    learned = {"scaler": {**stored, "capacityRps": 3.5}}
    assert has_news(learned, {"scaler": written})
    assert has_news(left, {"scaler": state_to_status(ScalerState(recommendations=(TimedReplicas(NOW, 3),)))})


async def test_a_status_left_with_a_member_this_version_does_not_write_is_not_rewritten_every_tick() -> None:
    async def writes(left_behind: dict[str, Any] | None) -> int:
        server = Server(replicas=2)
        rt = process(server)
        for i in range(24):
            if i == 4 and left_behind:
                server.svc["status"]["scaler"].update(left_behind)
            await one_tick(rt, server, cluster(server, NOW + 10 * i, kv=0.5, waiting=1.0, rate=3.0))
        return server.status_writes

    steady = await writes(None)
    assert steady <= 10, "a steady service is written at its first tick and then every 30 s"
    # a rollback from a version that kept one more member in status.scaler (the CRD preserves unknown fields there)
    assert await writes({"retiredField": {"since": NOW - 3600}}) == steady


LOAD_THEN_IDLE = [(0.9, 12.0, 20.0)] * 10 + [(0.1, 0.0, 1.0)] * 50


async def timeline(restart_at: int | None, outage: range = range(0), unread: range = range(0)) -> list[int]:
    """The Deployment's count after each tick; at `restart_at` the process is replaced by a new one, and the
    refreshes its predecessor had queued at its last tick are lost with it. `unread`: the ticks whose collector
    has not read the rate history since it started."""
    server = Server(replicas=4)
    rt = process(server)
    counts = []
    for i, (kv, waiting, rate) in enumerate(LOAD_THEN_IDLE):
        if i == restart_at:
            rt = process(server)
        tick = cluster(server, NOW + 10 * i, kv, waiting, rate, down=i in outage)
        tick.history_unread = frozenset({()}) if i in unread else frozenset()
        await one_tick(rt, server, tick, refreshes_land=restart_at is None or i != restart_at - 1)
        counts.append(server.replicas)
    return counts


@pytest.mark.parametrize("restart_at", [12, 17, 21, 26])
async def test_a_restart_in_a_scale_down_window_scales_down_no_earlier_than_the_operator_that_never_stopped(
    restart_at: int,
) -> None:
    assert await timeline(restart_at) == await timeline(None)


@pytest.mark.parametrize("restart_at", [18, 22, 30, 41])
async def test_a_restart_before_or_during_a_metrics_outage_holds_as_the_operator_that_never_stopped(
    restart_at: int,
) -> None:
    outage = range(20, 40)
    expected = await timeline(None, outage)
    assert min(expected[20:40]) == expected[19], "the outage holds the count"
    assert await timeline(restart_at, outage) == expected


class Interleaving(Kube):
    """A second process's requests land between this one's: each call yields to the other before it is served."""

    def __init__(self, server: Server, events: list[dict[str, Any]]) -> None:
        super().__init__(server)
        self.events = events

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        await asyncio.sleep(0)
        return await super().merge_patch(path, body, answer, strict)

    async def get(self, path: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return await super().get(path)

    async def create(self, path: str, body: Any, strict: bool = False) -> dict[str, Any]:
        self.events.append(body)
        return dict(body)


async def quiet_minute(monkeypatch: pytest.MonkeyPatch) -> Server:
    """A service at 4 replicas after a quiet minute, with room to scale to 64."""
    monkeypatch.setitem(SPEC, "replicas", {"min": 1, "max": 64})
    server = Server(replicas=4)
    for i in range(8):
        await one_tick(process(server), server, cluster(server, NOW + 10 * i, 0.5, 1.0, 8.0))
    return server


async def burst(processes: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Server, list[dict[str, Any]]]:
    """A quiet minute, then a burst ticked by `processes` operators that list the service at the same moment."""
    server = await quiet_minute(monkeypatch)
    events: list[dict[str, Any]] = []
    runtimes = [process(server) for _ in range(processes)]
    for rt in runtimes:
        rt.kube = Interleaving(server, events)  # type: ignore[assignment]
        rt.refresher = None
    counts = []
    for i in range(8, 11):
        ticks = [cluster(server, NOW + 10 * i + 0.5 * k, 0.97, 40.0, 30.0) for k in range(processes)]
        bodies = [copy.deepcopy(server.svc) for _ in runtimes]
        for tick, body in zip(ticks, bodies, strict=True):
            tick.services = [body]
        await asyncio.gather(*(reconcile(rt, t, b) for rt, t, b in zip(runtimes, ticks, bodies, strict=True)))
        counts.append(server.replicas)
    return counts, server, events


async def test_two_operators_acting_at_once_scale_no_faster_than_one_and_lose_no_record_of_a_scale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # two installs, or one without its Lease: the second's status write, refused as a conflict, was sent again
    # over the first's record of its scale, and the rate limits counted from a record without it (8, 10, 13)
    alone, _, _ = await burst(1, monkeypatch)
    counts, server, events = await burst(2, monkeypatch)
    assert counts == alone and alone[0] > 4  # the burst scales, and two processes scale it as one would
    recorded = {(e["from"], e["to"]) for e in server.svc["status"]["scaler"]["scaleEvents"]}
    steps = list(itertools.pairwise([4, *counts]))
    assert {(a, b) for a, b in steps if a != b} <= recorded
    told = [e for e in events if e["reason"] == "ConcurrentWriter"]
    assert len(told) == 1  # the process that lost the race says so once, not every tick it loses it
    assert "second inferscale" in told[0]["message"]


async def test_a_restarted_operator_whose_history_query_fails_holds_then_steps_down_as_after_an_outage() -> None:
    # the process it replaced would still forecast from its history (a daily peak due in minutes, say); this one
    # has none, so it does not scale down on today's load alone until it has read it or would have lost it
    expected = await timeline(None)
    counts = await timeline(20, unread=range(20, 30))
    assert expected[22] < expected[19], "the operator that never stopped steps down meanwhile"
    assert min(counts[20:30]) == counts[19]
    assert counts[-1] == expected[-1] == 1  # and once read, the way down resumes


class Killed(BaseException):
    """The process dies (SIGKILL, OOM) right after its /scale write landed."""


class KilledAfterScale(Interleaving):
    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        done = await super().merge_patch(path, body, answer, strict)
        if path.endswith("/scale"):
            raise Killed
        return done


async def killed_after_its_scale(monkeypatch: pytest.MonkeyPatch) -> tuple[Server, list[dict[str, Any]]]:
    """A process that scales a burst up at NOW + 80 and dies right after its /scale write, before its account."""
    server = await quiet_minute(monkeypatch)
    events: list[dict[str, Any]] = []
    rt = process(server)
    rt.kube, rt.refresher = KilledAfterScale(server, events), None  # type: ignore[assignment]
    tick = cluster(server, NOW + 80, 0.97, 40.0, 30.0)
    tick.services = [body := copy.deepcopy(server.svc)]
    with pytest.raises(Killed):
        await reconcile(rt, tick, body)
    return server, events


@pytest.mark.parametrize("scaled", [True, False])
async def test_a_scale_whose_process_died_before_telling_it_is_told_by_the_next(
    monkeypatch: pytest.MonkeyPatch, scaled: bool
) -> None:
    server, events = await killed_after_its_scale(monkeypatch)
    assert server.replicas > 4 and not events and "lastScaleTime" not in server.svc["status"]
    if not scaled:  # died between the record and the scale, in effect: the Deployment never moved
        server.deployment["spec"]["replicas"] = 4
    after = process(server)
    after.kube = Interleaving(server, events)  # type: ignore[assignment]
    for i in range(9, 15):
        await one_tick(after, server, cluster(server, NOW + 10 * i, 0.6, 2.0, 16.0))
    told = [e for e in events if e["reason"] in ("ScaledUp", "ScaledDown")]
    history = server.svc["status"].get("history") or []
    if scaled:
        # once, with the count and reason its maker recorded, and at its own time
        assert [e["reason"] for e in told] == ["ScaledUp"] and "before it stopped" in told[0]["message"]
        assert [(h["from"], h["to"]) for h in history] == [(4, server.replicas)]
        assert server.svc["status"]["lastScaleTime"] == history[0]["at"] < rfc3339(NOW + 90)
    else:
        assert not told and not history


class FinalWriteFails(Interleaving):
    """The status write after a scale fails once (a 500): the scale's record, written ahead, stays."""

    def __init__(self, server: Server, events: list[dict[str, Any]]) -> None:
        super().__init__(server, events)
        self.scaled = False

    async def merge_patch(self, path: str, body: Any, answer: bool = True, strict: bool = False) -> dict[str, Any]:
        if path.endswith("/status") and self.scaled:
            self.scaled = False
            raise KubeError(500, "etcdserver: request timed out")
        done = await super().merge_patch(path, body, answer, strict)
        self.scaled = self.scaled or path.endswith("/scale")
        return done


async def test_a_scale_whose_account_failed_to_land_is_not_told_again_as_a_stopped_operators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = await quiet_minute(monkeypatch)
    events: list[dict[str, Any]] = []
    rt = process(server)
    rt.kube = FinalWriteFails(server, events)  # type: ignore[assignment]
    await one_tick(rt, server, cluster(server, NOW + 80, 0.97, 40.0, 30.0))
    assert server.replicas > 4 and "lastScaleTime" not in server.svc["status"]
    for i in range(9, 15):
        await one_tick(rt, server, cluster(server, NOW + 10 * i, 0.6, 2.0, 16.0))
    told = [e["message"] for e in events if e["reason"] == "ScaledUp"]
    assert len(told) == 1 and "before it stopped" not in told[0]  # its own Event, when it scaled


async def test_a_lost_scale_is_told_before_the_scale_its_successor_makes_on_its_first_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, events = await killed_after_its_scale(monkeypatch)
    first = server.replicas
    after = process(server)
    after.kube = Interleaving(server, events)  # type: ignore[assignment]
    await one_tick(after, server, cluster(server, NOW + 140, 0.99, 200.0, 90.0))
    assert server.replicas > first, "the load asks the successor for more at once"
    told = [e for e in events if e["reason"] == "ScaledUp"]
    history = server.svc["status"].get("history") or []
    assert len(told) == 2
    assert "before it stopped" in told[0]["message"] and "before it stopped" not in told[1]["message"]
    assert [(h["from"], h["to"]) for h in history] == [(4, first), (first, server.replicas)]
    assert history[0]["at"] < history[1]["at"] == server.svc["status"]["lastScaleTime"]
    for i in range(15, 18):  # and never again
        await one_tick(after, server, cluster(server, NOW + 10 * i, 0.6, 2.0, 16.0))
    assert len([e for e in events if e["reason"] == "ScaledUp"]) == 2
