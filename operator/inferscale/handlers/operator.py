"""kopf wiring: settings, the tick loop's lifecycle, the health and metrics endpoint.

kopf owns the process (login, logging, graceful exit); the decisions run in one tick loop started at
startup, which reads every InferenceService and its workload in batches (see collector.py). There is
no kopf watch on InferenceServices: the tick lists them anyway, and kopf would decode and deep-copy
every one of the operator's own status writes (about 3 s of the event loop per tick at 1000
services, profiled), so a new or changed spec is acted on at the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import kopf
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from inferscale.adapters.kube import Credentials, KubeApi
from inferscale.adapters.prometheus import PrometheusReader
from inferscale.adapters.prometheus_access import PrometheusAccess, redacted
from inferscale.handlers import metrics
from inferscale.handlers.collector import Collector
from inferscale.handlers.cost_release import release_costs
from inferscale.handlers.leader import Elector
from inferscale.handlers.reconcile import reconcile, report_failure, write_status
from inferscale.handlers.refresher import Refresher
from inferscale.handlers.runtime import Runtime

log = logging.getLogger("inferscale")
REFRESH_SHARE = 0.8  # of the idle time between ticks over which figure refreshes are spread


@dataclass
class OperatorConfig:
    prometheus_url: str
    interval: float
    namespaces: list[str] | None  # None: all namespaces
    metrics_port: int
    kubeconfig: str | None = None
    prometheus_timeout: float = 10.0
    pod_deletion_cost: bool = True
    prometheus_access: PrometheusAccess = field(default_factory=PrometheusAccess)
    lease: LeaseConfig | None = None  # None: no leader election, this process acts at once


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str
    name: str
    identity: str


@dataclass
class Loop:
    collector: Collector
    runtime: Runtime
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    runner: web.AppRunner | None = None
    counts: metrics.RequestCounts | None = None
    started: float = field(default_factory=time.time)
    elector: Elector | None = None
    election: asyncio.Task[None] | None = None
    lost: str | None = None  # why leadership ended, which ends the process

    async def run(self) -> None:
        while not self.stopped.is_set():
            begun = time.monotonic()
            self.wake.clear()
            refresher = self.runtime.refresher
            if refresher is not None:
                await refresher.finish()  # every refresh lands before this tick reads statuses
            try:
                await self.tick()
            except Exception:  # one bad tick must not end the loop
                log.exception("tick failed")
            delay = max(0.0, self.collector.interval - (time.monotonic() - begun))
            if refresher is not None:
                refresher.start(until=time.monotonic() + REFRESH_SHARE * delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=delay)

    async def tick(self) -> None:
        tick = await self.collector.refresh()
        started = time.monotonic()
        sem = asyncio.Semaphore(64)

        async def one(svc: dict[str, Any]) -> None:
            async with sem:
                try:
                    await reconcile(self.runtime, tick, svc)
                except Exception as e:  # isolate services from each other
                    meta = svc.get("metadata") or {}
                    log.exception("reconciling %s/%s failed", meta.get("namespace"), meta.get("name"))
                    await report_failure(self.runtime, svc, tick.at, e)

        await asyncio.gather(*(one(s) for s in tick.services))
        self.runtime.pod_reads.prune(tick.at)  # the pods' reads of an outage that is over
        if tick.kube_error is None:
            listed = {
                ((s.get("metadata") or {}).get("namespace", ""), (s.get("metadata") or {}).get("name", ""))
                for s in tick.services
            }
            metrics.forget_services(listed, tick.unreadable.__contains__)
            if not tick.unreadable:  # else the services of a namespace not read this tick would lose theirs
                self.runtime.forget_absent(
                    {str((s.get("metadata") or {}).get("uid")) for s in tick.services},
                    {str((p.get("metadata") or {}).get("uid")) for pods in tick.pods.values() for p in pods},
                )
        try:
            await release_costs(self.runtime, tick)
        except Exception:  # a bug here must not end the tick's bookkeeping
            log.exception("taking deletion costs off pods no InferenceService scales failed")
        metrics.RECONCILE_DURATION.observe(time.monotonic() - started)

    def start(self) -> None:
        self.started = time.time()
        self.collector.start()
        self.tasks.append(asyncio.create_task(self.run()))

    async def lead(self, stop: Callable[[], None]) -> None:
        """Acquire the Lease, tick while it is held, and end the process once it is lost."""
        assert self.elector is not None
        try:
            await self.elector.acquire()
            metrics.LEADER.set(1)
            self.start()
            self.lost = await self.elector.hold()
        except asyncio.CancelledError:
            raise  # the operator is stopping: cleanup stops the tick and releases the Lease
        except Exception as e:  # a bug here must not leave the tick running on a Lease nobody renews
            log.exception("leader election failed")
            self.elector.leader = False
            self.lost = f"leader election failed ({type(e).__name__}: {e})"
        metrics.LEADER.set(0)
        self.stopped.set()
        for task in self.tasks:
            task.cancel()  # a tick in flight stops at its next await: the new leader decides from status
        log.error("stopped acting: %s; exiting so that the Deployment starts a standby", self.lost)
        stop()

    def healthy(self) -> tuple[bool, str]:
        if self.elector is not None and not self.elector.leader and self.lost is None:
            where = f"the lease {self.elector.namespace}/{self.elector.name}"
            if not self.elector.standby_healthy():
                return False, f"standby: no answer about {where} for {3 * self.elector.duration}s (see the log)"
            held = f"held by {self.elector.holder}" if self.elector.holder else "not held yet"
            return True, f"standby: {where} is {held}"
        last = self.collector.last_success
        grace = 3 * self.collector.interval + 30
        now = time.time()
        if last is None:
            return now - self.started < grace, "no complete tick yet"
        age = now - last
        return age < grace, f"last complete tick {age:.0f}s ago"


def configure(settings: kopf.OperatorSettings) -> None:
    # kopf's defaults wait 5 minutes on a hung API server; see docs/operations.
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.watching.server_timeout = 300
    settings.watching.connect_timeout = 10
    settings.posting.level = logging.WARNING
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="inferscale.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="inferscale.dev")
    settings.scanning.disabled = True
    settings.process.ultimate_exiting_timeout = 30


async def _serve(loop: Loop, port: int) -> web.AppRunner:
    async def metrics_handler(_: web.Request) -> web.Response:
        # ~10 series per service: rendering 1000 services' takes about a second, which must not stall the tick.
        body = await asyncio.to_thread(generate_latest, metrics.REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def health(_: web.Request) -> web.Response:
        ok, why = loop.healthy()
        return web.Response(status=200 if ok else 503, text=why + "\n")

    app = web.Application()
    app.router.add_get("/metrics", metrics_handler)
    app.router.add_get("/healthz", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()  # probes and scrapes come from outside the pod
    return runner


def _access_note(access: PrometheusAccess) -> str:
    parts = [
        "bearer token" if access.bearer_token_file else "",
        f"basic auth as {access.username}" if access.username else "",
        f"CA {access.ca_file}" if access.ca_file else "",
        f"headers {', '.join(name for name, _ in access.headers)}" if access.headers else "",
    ]
    shown = [p for p in parts if p]
    return f" ({'; '.join(shown)})" if shown else ""


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure(settings)
    cfg: OperatorConfig = memo.config
    creds = Credentials.load(cfg.kubeconfig)
    elector: Elector | None = None
    if cfg.lease is not None:
        # a client of its own, with a timeout well inside the renew deadline: renewals never queue behind a tick
        own = KubeApi(creds, timeout=5.0, concurrency=2)
        elector = Elector(own, cfg.lease.namespace, cfg.lease.name, cfg.lease.identity)
    kube = KubeApi(creds, fence=elector.may_write if elector is not None else None)
    prom = PrometheusReader(cfg.prometheus_url, timeout=cfg.prometheus_timeout, access=cfg.prometheus_access)
    collector = Collector(kube, prom, cfg.namespaces, cfg.interval)
    runtime = Runtime(
        kube=kube, default_interval=cfg.interval, history=collector.history, deletion_cost=cfg.pod_deletion_cost
    )
    runtime.refresher = Refresher(partial(write_status, kube, logger=runtime.logger))
    loop = Loop(collector, runtime)
    memo.loop = loop
    try:
        loop.runner = await _serve(loop, cfg.metrics_port)
    except BaseException:
        # kopf retries a failed startup: what this attempt opened goes, so the next starts clean (and its
        # error names the cause, not a collector registered twice)
        prom.close()
        await kube.close()
        if elector is not None:
            await elector.kube.close()
        raise
    counts = metrics.RequestCounts(lambda: prom.queries_sent, lambda: kube.requests_sent, collector.list_counts)
    metrics.REGISTRY.register(counts)
    loop.counts = counts
    loop.elector = elector
    if cfg.prometheus_access.authenticated and cfg.prometheus_url.startswith("http://"):
        log.warning("the Prometheus credentials go over plain http: anyone on the path can read them; use https")
    # last: a startup that failed above (and is retried) leaves no watches behind
    if loop.elector is None:
        metrics.LEADER.set(1)
        loop.start()
    else:
        stop: asyncio.Event | None = getattr(memo, "stop", None)
        loop.election = asyncio.create_task(loop.lead(stop.set if stop is not None else lambda: None))
    log.info(
        "inferscale started: prometheus %s%s, interval %.0fs, namespaces %s, metrics on :%d",
        redacted(cfg.prometheus_url),
        _access_note(cfg.prometheus_access),
        cfg.interval,
        cfg.namespaces or "all",
        cfg.metrics_port,
    )


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    loop: Loop | None = getattr(memo, "loop", None)
    if loop is None:
        return
    loop.stopped.set()
    loop.wake.set()
    if loop.elector is not None:
        loop.elector.closing = True
    if loop.election is not None:
        loop.election.cancel()
    for task in loop.tasks:
        task.cancel()
    await asyncio.gather(*loop.tasks, return_exceptions=True)
    if loop.election is not None:
        await asyncio.wait([loop.election], timeout=10)  # it stops at its next step even if the cancel was lost
    await loop.collector.stop()
    if loop.runtime.refresher is not None:
        await loop.runtime.refresher.finish()
    if loop.elector is not None:
        await loop.elector.release()  # after the last write: the standby may act from the next moment
        metrics.LEADER.set(0)
        await loop.elector.kube.close()
    if loop.runner is not None:
        await loop.runner.cleanup()
    if loop.counts is not None:
        metrics.REGISTRY.unregister(loop.counts)
    await loop.runtime.kube.close()
