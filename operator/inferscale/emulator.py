"""The live emulator: the simulator's replica model in real time, one engine per Ready pod.

It follows a Deployment's pods through the Kubernetes API: a pod gets an engine when the API says
it is Ready (with kwok, after its start-up delay), serves vLLM-format /metrics on its own
127.0.0.1 port and is registered with Prometheus through file discovery (`namespace` and `pod`
labels). A trace's requests are routed to the least-loaded engine; a pod that goes away stops
taking requests and drains the ones it holds. At the end it writes what the users of the service
experienced.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import pathlib
import time
from collections.abc import Callable
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
from inferscale.sim.traces import RequestArrays

log = logging.getLogger("inferscale.emulator")


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


@dataclass
class Pod:
    name: str
    engine: ReplicaEngine
    runner: web.AppRunner | None = None
    port: int = 0
    removed_at: float | None = None


@dataclass
class Sample:
    t: float
    arrivals_per_s: float
    pods: int  # created and not deleted (they cost GPUs, Ready or not)
    ready: int
    waiting: int
    kv: float | None


@dataclass
class Emulator:
    cfg: EmulatorConfig
    kube: KubeApi
    clock: Callable[[], float] = time.monotonic
    pods: dict[str, Pod] = field(default_factory=dict)
    timeline: list[Sample] = field(default_factory=list)
    _queue: list[int] = field(default_factory=list)  # request ids waiting for a Ready pod
    _next: int = 0
    _start: float = 0.0
    _pod_count: int = 0
    _gpu_seconds: float = 0.0

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

    async def _pods(self) -> tuple[list[str], int]:
        """Ready pod names of the Deployment, and how many of its pods exist (GPUs held)."""
        ns = self.cfg.namespace
        dep = await self.kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{self.cfg.deployment}")
        selector = (dep.get("spec") or {}).get("selector")
        ready, existing = [], 0
        for pod in await self.kube.list("v1", "pods", ns):
            meta = pod.get("metadata") or {}
            if not selector_matches(selector, meta.get("labels") or {}):
                continue
            if meta.get("deletionTimestamp"):
                continue
            existing += 1
            conds = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or []}
            if conds.get("Ready") == "True":
                ready.append(str(meta.get("name")))
        return ready, existing

    async def _sync_pods(self, t: float) -> None:
        try:
            ready, existing = await self._pods()
        except KubeError as e:
            log.warning("listing pods failed, keeping the last view: %s", e)
            return
        self._pod_count = existing
        changed = False
        for name in ready:
            if name not in self.pods:
                pod = Pod(name, ReplicaEngine(self.engine_cfg, self.outcomes, now=t))
                await self._serve(pod)
                self.pods[name] = pod
                changed = True
        for name, pod in self.pods.items():
            if pod.removed_at is None and name not in ready:
                pod.removed_at = t  # no new requests; what it holds drains
                changed = True
        if changed:
            self._register()

    def _route(self, t: float) -> None:
        live = [p for p in self.pods.values() if p.removed_at is None]
        while self._next < len(self._arrival) and self._arrival[self._next] <= t:
            self._queue.append(self._next)
            self._next += 1
        if not live:
            return
        for rid in self._queue:
            pod = min(live, key=lambda p: p.engine.outstanding)
            pod.engine.submit(Request(self._arrival[rid], self._inputs[rid], self._outputs[rid]), t, rid)
        self._queue.clear()

    def _sample(self, t: float, window: float = 10.0) -> None:
        live = [p for p in self.pods.values() if p.removed_at is None]
        lo = np.searchsorted(self.cfg.requests.arrival, t - window)
        hi = np.searchsorted(self.cfg.requests.arrival, t)
        kv = [p.engine.kv_usage for p in live]
        self.timeline.append(
            Sample(
                t=t,
                arrivals_per_s=float(hi - lo) / window,
                pods=self._pod_count,
                ready=len(live),
                waiting=sum(p.engine.num_waiting for p in live) + len(self._queue),
                kv=sum(kv) / len(kv) if kv else None,
            )
        )

    async def run(self, stop: asyncio.Event | None = None) -> dict[str, Any]:
        stop = stop or asyncio.Event()
        self._start = self.clock()
        last_sync = last_sample = -math.inf
        end = self.cfg.duration
        try:
            while not stop.is_set():
                t = self.now()
                if t - last_sync >= 1.0:
                    if last_sync > -math.inf:
                        self._gpu_seconds += self._pod_count * (t - last_sync) * self.cfg.profile.gpus
                    await self._sync_pods(t)
                    last_sync = t
                self._route(t)
                for pod in self.pods.values():
                    pod.engine.advance(t)
                if t - last_sample >= 1.0:
                    self._sample(t)
                    last_sample = t
                busy = any(not p.engine.idle for p in self.pods.values()) or self._queue
                if t >= end and (not busy or t >= end + self.cfg.drain_grace):
                    break
                await asyncio.sleep(self.cfg.step)
        finally:
            self.target_file.unlink(missing_ok=True)
            for pod in self.pods.values():
                if pod.runner is not None:
                    await pod.runner.cleanup()
        result = self.summary()
        if self.cfg.results is not None:
            self.cfg.results.parent.mkdir(parents=True, exist_ok=True)
            self.cfg.results.write_text(json.dumps(result, indent=2))
        return result

    def static_peak_replicas(self) -> int | None:
        """Replicas that serve the replay's busiest minute at the SLO, all the time."""
        return busiest_minute_replicas(
            self.cfg.requests, self.cfg.profile, self.cfg.slo_ttft, self.cfg.slo_itl, self.cfg.duration
        )

    def summary(self) -> dict[str, Any]:
        ttft = np.array(self.outcomes.ttft)
        itl = np.array(self.outcomes.itl)
        finished = ~np.isnan(ttft)
        itl_ok = np.where(np.isnan(itl), True, itl <= self.cfg.slo_itl)  # one-token outputs have no ITL
        ttft_ok = np.nan_to_num(ttft, nan=math.inf) <= self.cfg.slo_ttft
        met = finished & ttft_ok & itl_ok
        n = len(ttft)
        duration = self.timeline[-1].t if self.timeline else 0.0
        peak = self.static_peak_replicas()
        static_gpu_hours = peak * self.cfg.profile.gpus * duration / 3600 if peak is not None else None
        gpu_hours = self._gpu_seconds / 3600
        return {
            "requests": n,
            "finished": int(finished.sum()),
            "slo_attainment": float(met.sum() / n) if n else None,
            # which target the misses broke: a slow first token (or none) is the fleet's size or a queue; a slow
            # stream with a fast first token is the batch the request shared (long prefill chunks, big decode batches)
            "missed_ttft": int((~ttft_ok).sum()),
            "missed_itl_only": int((ttft_ok & ~itl_ok).sum()),
            "ttft_p95_s": float(np.percentile(ttft[finished], 95)) if finished.any() else None,
            "ttft_p99_s": float(np.percentile(ttft[finished], 99)) if finished.any() else None,
            "itl_mean_s": float(np.nanmean(itl)) if np.isfinite(itl).any() else None,
            "gpu_hours": gpu_hours,
            "static_peak_replicas": peak,
            "static_peak_gpu_hours": static_gpu_hours,
            "gpu_hours_saved_vs_static_peak": (1 - gpu_hours / static_gpu_hours) if static_gpu_hours else None,
            "duration_s": duration,
            "slo": {"ttft_p95_s": self.cfg.slo_ttft, "itl_mean_s": self.cfg.slo_itl},
            "timeline": [s.__dict__ for s in self.timeline],
        }


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
