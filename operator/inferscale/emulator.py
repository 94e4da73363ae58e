"""The live emulator: the simulator's replica model in real time, one engine per Ready pod.

It follows a Deployment's pods through the Kubernetes API: a pod gets an engine when the API says
it is Ready (with kwok, after its start-up delay), serves vLLM-format /metrics on its own
127.0.0.1 port and is registered with Prometheus through file discovery (`namespace` and `pod`
labels). A trace's requests are routed to the least-loaded engine; a pod that goes away stops
taking requests and drains the ones it holds, and a deleted one is billed until it has drained. A task of
its own follows the pods, so the API server's latency never holds a request back (TTFT would count it). At
the end it writes what the users of the service experienced, scored as the simulator scores a run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import pathlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web

from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.adapters.workload import selector_matches
from inferscale.perf import ReplicaProfile, replica_capacity_rps
from inferscale.sim.engine import EngineConfig, Outcomes, ReplicaEngine
from inferscale.sim.exposition import render
from inferscale.sim.requests import Request
from inferscale.sim.scores import score
from inferscale.sim.traces import RequestArrays

log = logging.getLogger("inferscale.emulator")
# Routing later than this at P99 means the replay's own loop, not the fleet, shaped the TTFTs.
LATE_ROUTING_P99 = 0.05


class TargetError(Exception):
    """The Deployment cannot be followed (missing, forbidden, the API server unreachable): nothing to replay to."""


@dataclass
class EmulatorConfig:
    namespace: str
    deployment: str
    model_name: str
    profile: ReplicaProfile
    requests: RequestArrays  # arrivals in seconds from the start of the replay
    duration: float
    targets_dir: pathlib.Path
    slo_ttft: float
    slo_itl: float
    results: pathlib.Path | None = None
    # Seconds between two routing rounds: arrivals within one round reach an engine together, so a long
    # round inflates the waiting gauge (vLLM sees arrivals one by one).
    step: float = 0.02
    drain_grace: float = 60.0  # after the last arrival, how long in-flight requests may finish
    sync_every: float = 1.0  # seconds between two reads of the Deployment's pods


@dataclass
class Pod:
    name: str
    engine: ReplicaEngine
    runner: web.AppRunner | None = None
    port: int = 0
    removed_at: float | None = None  # stopped taking requests: NotReady, terminating or gone
    # Terminating or gone from the API: its GPUs are billed until it has drained, then its server closes.
    gone: bool = False


@dataclass
class Sample:
    t: float
    arrivals_per_s: float
    pods: int  # holding GPUs: created and not deleted (Ready or not), or deleted and still draining
    ready: int
    waiting: int
    kv: float | None


@dataclass
class Emulator:
    cfg: EmulatorConfig
    kube: KubeApi
    clock: Callable[[], float] = time.monotonic
    pods: dict[str, Pod] = field(default_factory=dict)
    retired: list[Pod] = field(default_factory=list)  # deleted and drained, server closed; kept for the counts
    timeline: list[Sample] = field(default_factory=list)
    ended: float = 0.0  # replay time when the run stopped waiting for in-flight requests
    interrupted: bool = False  # stopped before the end: the summary covers the requests that arrived
    _queue: list[int] = field(default_factory=list)  # request ids waiting for a Ready pod
    _next: int = 0
    _start: float = 0.0
    _pod_count: int = 0
    _gpu_seconds: float = 0.0
    _late: list[float] = field(default_factory=list)  # per routed request: routing time - arrival

    def __post_init__(self) -> None:
        self.outcomes = Outcomes(len(self.cfg.requests))
        self.engine_cfg = EngineConfig.from_profile(self.cfg.profile)
        self._arrival = self.cfg.requests.arrival.tolist()
        self._inputs = self.cfg.requests.input_tokens.tolist()
        self._outputs = self.cfg.requests.output_tokens.tolist()

    @property
    def target_file(self) -> pathlib.Path:
        return self.cfg.targets_dir / f"emulator-{self.cfg.namespace}-{self.cfg.deployment}.json"

    def now(self) -> float:
        return self.clock() - self._start

    async def _serve(self, pod: Pod) -> None:
        async def metrics(_: web.Request) -> web.Response:
            pod.engine.advance(max(pod.engine.now, self.now()))
            return web.Response(text=render(pod.engine, self.cfg.model_name), content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        pod.runner = web.AppRunner(app, access_log=None)
        await pod.runner.setup()
        site = web.TCPSite(pod.runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only through the server's sockets
        assert server is not None
        pod.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]

    def _register(self) -> None:
        groups = [
            {"targets": [f"127.0.0.1:{p.port}"], "labels": {"namespace": self.cfg.namespace, "pod": p.name}}
            for p in self.pods.values()
            if p.removed_at is None and p.port
        ]
        self.cfg.targets_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.target_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.target_file)

    async def _pods(self) -> tuple[list[str], set[str]]:
        """Ready pod names of the Deployment, and the names of all its pods not being deleted (GPUs held)."""
        ns = self.cfg.namespace
        dep = await self.kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{self.cfg.deployment}")
        selector = (dep.get("spec") or {}).get("selector")
        ready, existing = [], set()
        for pod in await self.kube.list("v1", "pods", ns):
            meta = pod.get("metadata") or {}
            if not selector_matches(selector, meta.get("labels") or {}):
                continue
            if meta.get("deletionTimestamp"):
                continue
            name = str(meta.get("name"))
            existing.add(name)
            conds = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or []}
            if conds.get("Ready") == "True":
                ready.append(name)
        return ready, existing

    async def _first_pods(self) -> tuple[list[str], set[str]]:
        """The first view, or a TargetError of one line: without one there is no fleet to replay to."""
        ns, name = self.cfg.namespace, self.cfg.deployment
        try:
            return await self._pods()
        except KubeError as e:
            if e.status == 404 and not await self._namespace_exists():
                raise TargetError(f"namespace {ns} not found") from None
            if e.status == 404:
                raise TargetError(f"deployment {ns}/{name} not found") from None
            raise TargetError(f"cannot read deployment {ns}/{name} and its pods: {' '.join(str(e).split())}") from None

    async def _namespace_exists(self) -> bool:
        try:
            await self.kube.get(f"/api/v1/namespaces/{self.cfg.namespace}")
        except KubeError as e:
            return e.status != 404  # not allowed to read it: say what is known, that the Deployment is missing
        return True

    async def _apply(self, ready: list[str], existing: set[str], t: float) -> None:
        self._pod_count = len(existing)
        changed = False
        for name in ready:
            known = self.pods.get(name)
            if known is None:
                pod = Pod(name, ReplicaEngine(self.engine_cfg, self.outcomes, now=t))
                self.pods[name] = pod  # first: a run stopped while its server starts still closes it
                await self._serve(pod)
                changed = True
            elif known.removed_at is not None:
                # Ready again after a failed probe: the same process, so the same engine, counters and port
                known.removed_at, known.gone = None, False
                changed = True
        for name, pod in self.pods.items():
            if name in ready:
                continue
            if pod.removed_at is None:
                pod.removed_at = t  # no new requests; what it holds drains
                changed = True
            pod.gone = name not in existing
        if changed:
            self._register()

    async def _retire(self) -> None:
        """Close the servers of deleted pods that have drained, as the simulator's fleet reaps them: a long
        replay with many scale-downs would otherwise hold a port and an engine for every pod it ever saw."""
        for pod in [p for p in self.pods.values() if p.gone and p.engine.idle]:
            if pod.runner is not None:
                await pod.runner.cleanup()
            del self.pods[pod.name]
            self.retired.append(pod)

    async def _follow_pods(self) -> None:
        """The routing loop's view of the pods, kept apart from it: a list that takes seconds on a loaded API
        server would hold back every request arriving meanwhile, and TTFT would count the wait."""
        while True:
            await asyncio.sleep(self.cfg.sync_every)
            try:
                ready, existing = await self._pods()
            except KubeError as e:
                log.warning("listing pods failed, keeping the last view: %s", e)
                continue
            await self._apply(ready, existing, self.now())
            await self._retire()

    def _route(self, t: float) -> None:
        live = [p for p in self.pods.values() if p.removed_at is None]
        first = self._next
        while self._next < len(self._arrival) and self._arrival[self._next] <= t:
            self._queue.append(self._next)
            self._next += 1
        if not live:
            return  # waiting for a Ready pod is the fleet's delay, not the loop's: not counted as late
        self._late.extend(t - a for a in self._arrival[first : self._next])
        for rid in self._queue:
            pod = min(live, key=lambda p: p.engine.outstanding)
            pod.engine.submit(Request(self._arrival[rid], self._inputs[rid], self._outputs[rid]), t, rid)
        self._queue.clear()

    def _held(self) -> int:
        """Pods holding GPUs: those the API lists, and deleted ones still draining (the simulator bills them)."""
        return self._pod_count + sum(1 for p in self.pods.values() if p.gone and not p.engine.idle)

    def _sample(self, t: float, window: float = 10.0) -> None:
        live = [p for p in self.pods.values() if p.removed_at is None]
        lo = np.searchsorted(self.cfg.requests.arrival, t - window)
        hi = np.searchsorted(self.cfg.requests.arrival, t)
        kv = [p.engine.kv_usage for p in live]
        self.timeline.append(
            Sample(
                t=t,
                arrivals_per_s=float(hi - lo) / window,
                pods=self._held(),
                ready=len(live),
                waiting=sum(p.engine.num_waiting for p in live) + len(self._queue),
                kv=sum(kv) / len(kv) if kv else None,
            )
        )

    async def run(self, stop: asyncio.Event | None = None) -> dict[str, Any]:
        """Replay until the end (or `stop`); a TargetError before the replay starts when there is nothing to
        replay to."""
        stop = stop or asyncio.Event()
        view = await self._first_pods()
        follow: asyncio.Task[None] | None = None
        try:
            # The first pods' servers start before the clock: the first arrivals find them serving. Nothing scrapes
            # them before the clock is set: registering them is the last step, with no await after it.
            await self._apply(*view, 0.0)
            self._start = self.clock()
            follow = asyncio.create_task(self._follow_pods())
            await self._replay(stop)
        finally:
            if follow is not None:
                follow.cancel()
                await asyncio.gather(follow, return_exceptions=True)
            self.target_file.unlink(missing_ok=True)
            for pod in self.pods.values():
                if pod.runner is not None:
                    await pod.runner.cleanup()
        result = self.summary()
        if self.cfg.results is not None:
            self.cfg.results.parent.mkdir(parents=True, exist_ok=True)
            self.cfg.results.write_text(json.dumps(result, indent=2))
        return result

    async def _replay(self, stop: asyncio.Event) -> None:
        last = last_sample = 0.0
        end = self.cfg.duration
        while True:
            t = self.now()
            self._route(t)
            for pod in list(self.pods.values()):
                pod.engine.advance(t)
            self._gpu_seconds += self._held() * (t - last) * self.cfg.profile.gpus
            last = self.ended = t
            if t - last_sample >= 1.0 or not self.timeline:
                self._sample(t)
                last_sample = t
            if stop.is_set():
                self.interrupted = True
                return
            busy = any(not p.engine.idle for p in self.pods.values()) or self._queue
            if t >= end and (not busy or t >= end + self.cfg.drain_grace):
                return
            await asyncio.sleep(self.cfg.step)

    def static_peak_replicas(self) -> int | None:
        """Replicas that serve the replay's busiest minute at the SLO, all the time."""
        return busiest_minute_replicas(
            self.cfg.requests, self.cfg.profile, self.cfg.slo_ttft, self.cfg.slo_itl, self.cfg.duration
        )

    def summary(self) -> dict[str, Any]:
        """Scored by the simulator's rules (sim.scores): finished means a last token; a request without a
        first token counts its wait so far in the TTFT percentiles. An interrupted run scores the requests that
        had arrived."""
        n = self._next if self.interrupted else len(self._arrival)
        outcomes = Outcomes(n)
        outcomes.ttft, outcomes.itl = self.outcomes.ttft[:n], self.outcomes.itl[:n]
        outcomes.finished_at = self.outcomes.finished_at[:n]
        arrivals = self.cfg.requests.arrival[:n]
        sc = score(outcomes, arrivals, self.ended, self.cfg.slo_ttft, self.cfg.slo_itl, self._gpu_seconds, 0)
        ttft = np.asarray(outcomes.ttft, dtype=np.float64)
        itl = np.asarray(outcomes.itl, dtype=np.float64)
        finished = ~np.isnan(np.asarray(outcomes.finished_at, dtype=np.float64))
        ttft_ok = ttft <= self.cfg.slo_ttft  # NaN (no first token) misses
        itl_ok = np.isnan(itl) | (itl <= self.cfg.slo_itl)  # one-token outputs have no ITL
        peak = self.static_peak_replicas()
        static_gpu_hours = peak * self.cfg.profile.gpus * self.ended / 3600 if peak is not None else None
        return {
            "requests": sc.requests,
            "finished": sc.requests - sc.unfinished,
            "unfinished": sc.unfinished,
            "rejected": sum(p.engine.rejected_total for p in self._all_pods()),  # prompts no KV cache can hold
            "slo_attainment": _number(sc.slo_attainment),
            # which target the misses broke: a slow first token (or none) is the fleet's size or a queue; a slow
            # stream with a fast first token is the batch the request shared (long prefill chunks, big decode
            # batches); a fast first token and no last one was cut off by the end of the drain
            "missed_ttft": int((~ttft_ok).sum()),
            "missed_itl_only": int((ttft_ok & finished & ~itl_ok).sum()),
            "missed_unfinished": int((ttft_ok & ~finished).sum()),
            "ttft_p95_s": _number(sc.ttft_p95_s),
            "ttft_p99_s": _number(sc.ttft_p99_s),
            "itl_mean_s": sc.itl_mean_s,
            "routing_lateness_s": _spread(self._late),
            "gpu_hours": sc.gpu_hours,
            "static_peak_replicas": peak,
            "static_peak_gpu_hours": static_gpu_hours,
            "gpu_hours_saved_vs_static_peak": (1 - sc.gpu_hours / static_gpu_hours) if static_gpu_hours else None,
            "duration_s": self.ended,
            "interrupted": self.interrupted,
            "slo": {"ttft_p95_s": self.cfg.slo_ttft, "itl_mean_s": self.cfg.slo_itl},
            "timeline": [x.__dict__ for x in self.timeline],
        }

    def _all_pods(self) -> Iterable[Pod]:
        yield from self.pods.values()
        yield from self.retired


def unserved(summary: dict[str, Any], deployment: str) -> str:
    """Why a replay finished no request, as far as its timeline tells."""
    most = max((x["ready"] for x in summary.get("timeline") or []), default=0)
    return f"no pod of {deployment} was Ready during the replay" if most == 0 else f"at most {most} pods were Ready"


def late_routing(summary: dict[str, Any]) -> str | None:
    """A warning when the replay's own loop, not the fleet, shaped the TTFTs."""
    late = summary.get("routing_lateness_s")
    if late is None or late["p99"] <= LATE_ROUTING_P99:
        return None
    return (
        f"requests reached an engine {1000 * late['p99']:.0f} ms after arriving (P99), {1000 * late['max']:.0f} ms "
        "at most: their TTFTs include it (this machine is too busy)"
    )


def _number(x: float) -> float | None:
    """NaN (no request to take it over) as JSON's null."""
    return None if math.isnan(x) else x


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    p50, p99 = np.percentile(values, [50, 99])
    return {"p50": float(p50), "p99": float(p99), "max": float(max(values))}


def busiest_minute_replicas(
    requests: RequestArrays,
    profile: ReplicaProfile,
    slo_ttft: float,
    slo_itl: float,
    span: float,
    utilization: float = 1.0,
) -> int | None:
    """Replicas that serve the busiest whole minute of the replay's first `span` seconds at the SLO, at the
    mean lengths of the requests in that span, each loaded to `utilization` of the perf model's capacity
    at the SLO (1.0: right at the edge)."""
    arr = requests.arrival
    inside = arr < span
    if not inside.any():
        return None
    counts = np.histogram(arr[inside], bins=max(1, math.ceil(span / 60.0)), range=(0, span))[0]
    peak_rps = float(counts.max()) / 60.0
    cap = replica_capacity_rps(
        profile,
        float(requests.input_tokens[inside].mean()),
        float(requests.output_tokens[inside].mean()),
        slo_ttft,
        slo_itl,
    )
    return math.ceil(peak_rps / (cap * utilization) - 1e-9) if cap > 0 else None
