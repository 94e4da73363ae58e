"""The tick: one batched read of the cluster and of Prometheus for every InferenceService.

Each tick costs a fixed number of requests whatever the number of services: three Kubernetes
lists per watched namespace (or three cluster-wide, in pages of 500; pods and Deployments come
from watch-fed caches, listed only while a cache is out of sync), the fixed PromQL set per
distinct `spec.metrics.selector` (usually one; the default group runs alongside the lists), and
one incremental range query for the rate history.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

from inferscale.adapters.deletion_cost import ANNOTATION as DELETION_COST
from inferscale.adapters.deletion_cost import OWNER as COST_OWNER
from inferscale.adapters.informer import Informer
from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.adapters.prometheus import QUERIES, FleetSnapshot, PartialAnswer, PrometheusReader
from inferscale.adapters.workload import parse_time, restarts
from inferscale.api.convert import policy_from_spec
from inferscale.api.models import InvalidSpec, parse_spec
from inferscale.api.spec import InferenceServiceSpec
from inferscale.handlers import metrics
from inferscale.handlers.rate_history import RateHistory
from inferscale.scaling.forecast import HISTORY_KEPT, HISTORY_STALE
from inferscale.scaling.types import Policy

HISTORY_SPAN = 2 * 86400.0  # two daily seasons for the forecaster
HISTORY_STEP = 60.0
Selector = tuple[tuple[str, str], ...]
# (selector group, namespace, model, Deployment); Deployment None: the sum over the model's Deployments
HistoryKey = tuple[Selector, str, str, str | None]
KINDS = (
    ("apps/v1", "deployments"),
    ("v1", "pods"),
    ("autoscaling/v2", "horizontalpodautoscalers"),
    ("keda.sh/v1alpha1", "scaledobjects"),
    ("inferscale.dev/v1alpha1", "inferenceservices"),
)
CACHED = ("deployments", "pods")  # followed by watches
# A kind a cluster may not serve: KEDA's. Any other kind not served is the API server's failure, not an empty list
# (a restarted API server answers 404 for custom resources until it has their CRDs, kubernetes#115241), and read as
# empty it would drop every service's metrics and deletion costs and hide the HPAs. Once served, the kind's 404 is
# taken for such a failure for KIND_GONE_GRACE, so that KEDA uninstalled holds a namespace for no longer than that.
OPTIONAL = "scaledobjects"
KIND_GONE_GRACE = 120.0
Obj = dict[str, Any]
# a service's validated spec and its decision policy, or why the spec is invalid
Parsed = tuple[InferenceServiceSpec, Policy] | InvalidSpec


def as_selector(matchers: Mapping[str, Any]) -> Selector:
    """Extra PromQL label matchers as a hashable key: services that share one share the tick's queries
    and the rate history."""
    return tuple(sorted((str(k), str(v)) for k, v in matchers.items()))


_POD_META = ("name", "namespace", "uid", "labels", "creationTimestamp", "deletionTimestamp")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def slim(obj: Obj, plural: str) -> Obj:
    """What a tick keeps of a listed object: pods keep identity, labels, readiness, their IP and the deletion cost
    the operator sets (adapters.deletion_cost); other kinds lose managedFields and kubectl's copy of the
    last applied object, so a thousand services and their pods do not sit in memory as full objects."""
    meta = obj.get("metadata") or {}
    if plural == "pods":
        status = obj.get("status") or {}
        kept = {k: meta[k] for k in _POD_META if k in meta}
        owners = [
            {k: o.get(k) for k in ("kind", "name", "controller")}
            for o in meta.get("ownerReferences") or ()
            if isinstance(o, Mapping) and o.get("controller")
        ]
        if owners:
            kept["ownerReferences"] = owners  # whose ReplicaSet it is (workload.owned_by_another)
        annotations = meta.get("annotations") or {}
        costs = {k: annotations[k] for k in (DELETION_COST, COST_OWNER) if k in annotations}
        if costs:
            kept["annotations"] = costs
        return {
            "metadata": kept,
            "status": {
                "phase": status.get("phase"),
                "conditions": status.get("conditions"),
                "restarts": restarts(status),
                "podIP": status.get("podIP"),  # where spec.metrics.podPort reads the engine (adapters.pod_metrics)
            },
        }
    meta = {k: v for k, v in meta.items() if k != "managedFields"}
    if _LAST_APPLIED in (meta.get("annotations") or {}):
        meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != _LAST_APPLIED}
    return {**obj, "metadata": meta}


@dataclass
class Tick:
    at: float
    seq: int
    deployments: dict[tuple[str, str], Obj] = field(default_factory=dict)
    pods: dict[str, list[Obj]] = field(default_factory=dict)  # namespace -> pods
    hpas: list[Obj] = field(default_factory=list)
    scaled_objects: list[Obj] = field(default_factory=list)
    services: list[Obj] = field(default_factory=list)
    fleet: dict[Selector, FleetSnapshot] = field(default_factory=dict)
    kube_error: str | None = None  # nothing could be read: no service is decided
    # watched namespaces whose lists failed while others' answered (a namespace deleted with the chart's Role in
    # it: 403): their services are not decided, and nothing of theirs is in the tick; the others are
    unreadable: dict[str, str] = field(default_factory=dict)
    duration: float = 0.0
    default_interval: float = 10.0  # the operator's --interval, for specs that leave behavior.interval unset
    began: float = field(default_factory=time.monotonic)  # when `at` was read, on the monotonic clock
    # selector groups whose rate history no range query has given since the operator started, while it is young
    # (`Collector.history_unread`): their forecast is unknown, not a forecast of nothing
    history_unread: frozenset[Selector] = frozenset()
    _parsed: dict[tuple[int, float], tuple[Any, Parsed]] = field(default_factory=dict, repr=False)

    def parsed(self, service: Mapping[str, Any], default_interval: float | None = None) -> Parsed:
        """The service's spec and policy, or why it is invalid: parsed once per tick for the queries, the
        competition for targets and the decision alike, so an invalid spec costs no query and blocks no one."""
        spec = service.get("spec") or {}
        interval = self.default_interval if default_interval is None else default_interval
        key = (id(spec), interval)
        known = self._parsed.get(key)
        if known is not None and known[0] is spec:
            return known[1]
        result: Parsed
        try:
            valid = parse_spec(spec)
            result = (valid, policy_from_spec(valid, interval))
        except InvalidSpec as e:
            result = e
        self._parsed[key] = (spec, result)  # the spec is held, so its id is not reused within the tick
        return result

    def selector_of(self, service: Mapping[str, Any]) -> Selector | None:
        """The service's spec.metrics.selector as a key (`as_selector`); None for an invalid spec."""
        parsed = self.parsed(service)
        return None if isinstance(parsed, InvalidSpec) else as_selector(parsed[0].metrics.selector)

    @cached_property
    def _pods_by_label(self) -> dict[tuple[str, str, str], list[Obj]]:
        index: dict[tuple[str, str, str], list[Obj]] = {}
        for ns, pods in self.pods.items():
            for pod in pods:
                for k, v in ((pod.get("metadata") or {}).get("labels") or {}).items():
                    index.setdefault((ns, k, v), []).append(pod)
        return index

    @cached_property
    def services_by_target(self) -> dict[tuple[str, str], list[tuple[float, str, str]]]:
        """(namespace, Deployment) -> (created, name, uid) of every InferenceService that scales it: valid and
        Active (an invalid spec scales nothing, an Advisory one writes nothing, so neither competes)."""
        index: dict[tuple[str, str], list[tuple[float, str, str]]] = {}
        for svc in self.services:
            meta, parsed = svc.get("metadata") or {}, self.parsed(svc)
            if isinstance(parsed, InvalidSpec) or parsed[0].mode != "Active":
                continue
            ref = parsed[0].scale_target_ref
            target = ref.name if ref is not None else meta.get("name")
            if target:
                created = parse_time(meta.get("creationTimestamp")) or 0.0
                key = (str(meta.get("namespace", "")), str(target))
                index.setdefault(key, []).append((created, str(meta.get("name")), str(meta.get("uid"))))
        return index

    def candidate_pods(self, namespace: str, selector: Mapping[str, Any] | None) -> list[Obj]:
        """Pods that may match a Deployment's selector: narrowed by one of its matchLabels when it has
        any (the caller still applies the whole selector), so a service does not scan its namespace."""
        labels = (selector or {}).get("matchLabels") or {}
        if labels:
            k, v = next(iter(sorted(labels.items())))
            return self._pods_by_label.get((namespace, k, v), [])
        return self.pods.get(namespace, [])

    def snapshot_for(self, selector: Mapping[str, str]) -> FleetSnapshot:
        return self.fleet.get(as_selector(selector)) or FleetSnapshot(
            self.at, {}, frozenset(QUERIES), ("not queried yet",)
        )


def wants_tpot(tick: Tick) -> bool:
    """Whether a valid service sets slo.tpotP95: only then does the TTFT query carry the TPOT histogram."""
    return any(not isinstance(p := tick.parsed(svc), InvalidSpec) and p[1].slo_tpot_p95 for svc in tick.services)


def history_window(until: float | None, now: float) -> tuple[float, float] | None:
    """The next rate-history range query's (start, end), on a grid of whole `HISTORY_STEP`s since the epoch,
    or None when no new point of it is due. A query starts one step after the last one's end, so answers
    never put two points seconds apart: started at the previous tick's time, each query moved the grid by
    the tick's overrun, every few hours a point landed 1-10 s after another, and the buffer's two days
    shrank under the span the seasonal forecast needs. After failed queries it starts no earlier than the
    span: a range that grew with each failure would pass Prometheus's 11,000 points per series and fail on."""
    first = math.ceil((now - HISTORY_KEPT) / HISTORY_STEP) * HISTORY_STEP
    start = first if until is None else max(until + HISTORY_STEP, first)
    if start > now:
        return None
    return start, start + math.floor((now - start) / HISTORY_STEP) * HISTORY_STEP


def series_in(history: MutableMapping[HistoryKey, RateHistory], key: HistoryKey) -> RateHistory:
    series = history.get(key)
    if series is None:
        series = history[key] = RateHistory(int(HISTORY_KEPT / HISTORY_STEP) + 1)
    return series


def add_pod_rate(history: MutableMapping[HistoryKey, RateHistory], key: HistoryKey, at: float, rate: float) -> None:
    """A request rate the operator read from the pods themselves while Prometheus could not give it
    (spec.metrics.podPort), one point a `HISTORY_STEP` as the range query's: the forecast then goes on leading
    through an outage, instead of forecasting from the history as it stood at the outage's start and from
    nothing `forecast.HISTORY_STALE` later. Prometheus holds nothing of the outage, so its range query after it
    adds only the points newer than these."""
    series = series_in(history, key)
    if not series or at >= series[-1].at + HISTORY_STEP:
        series.extend(((at, rate),))


class Collector:
    def __init__(
        self,
        kube: KubeApi,
        prom: PrometheusReader,
        namespaces: list[str] | None,
        interval: float,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | None = None,
    ) -> None:
        self.kube, self.prom = kube, prom
        self.namespaces = namespaces  # None: cluster-wide
        self.interval = interval
        metrics.TICK_INTERVAL.set(interval)
        self.clock = clock
        self.log = logger or logging.getLogger("inferscale.collector")
        # per (selector group, namespace, model, Deployment): two services that serve one model name on
        # separate fleets (two Deployments, or pods told apart by spec.metrics.selector) each forecast
        # their own traffic
        self.history: dict[HistoryKey, RateHistory] = {}
        self._history_until: dict[Selector, float] = {}
        self._served: dict[str | None, float] = {}  # scope: when its OPTIONAL kind was last served
        self.last_success: float | None = None
        self.started = clock()
        self.tpot = False  # some service sets slo.tpotP95: the TTFT query also reads per-request TPOT
        self._seq = 0
        # Pods and Deployments are followed by watches; InferenceServices are listed every tick, since a
        # tick must read the status (the scaler's record) the previous tick wrote; HPAs and
        # ScaledObjects are few.
        self.informers = {
            (ns, plural): Informer(kube, gv, plural, ns, partial(slim, plural=plural))
            for ns in self._scopes()
            for gv, plural in KINDS
            if plural in CACHED
        }

    def _scopes(self) -> list[str | None]:
        return list(self.namespaces) if self.namespaces else [None]

    def start(self) -> None:
        """Begin acting: a standby that has waited for the Lease since long starts with no history either."""
        self.started = self.clock()
        for informer in self.informers.values():
            informer.start()

    def list_counts(self) -> list[tuple[str, str, int]]:
        """The watch caches' full lists, summed over scopes: (resource, reason, count)."""
        total: Counter[tuple[str, str]] = Counter()
        for (_, plural), informer in self.informers.items():
            for reason, count in informer.lists.items():
                total[plural, reason] += count
        return [(plural, reason, count) for (plural, reason), count in sorted(total.items())]

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self.informers.values()))
        self.prom.close()

    async def _read(self, gv: str, plural: str, ns: str | None) -> list[Obj]:
        informer = self.informers.get((ns, plural))
        cached = informer.items() if informer is not None else None
        if cached is not None:
            return cached
        try:
            items = await self.kube.list(gv, plural, ns, keep=partial(slim, plural=plural), optional=False)
        except KubeError as e:
            served = self._served.get(ns)
            recently = served is not None and self.clock() - served < KIND_GONE_GRACE
            if plural != OPTIONAL or e.status != 404 or recently:
                raise
            return []
        if plural == OPTIONAL:
            self._served[ns] = self.clock()
        return items

    async def _scope(self, ns: str | None) -> list[list[Obj]]:
        return list(await asyncio.gather(*(self._read(gv, plural, ns) for gv, plural in KINDS)))

    async def _lists(self, tick: Tick) -> None:
        """Every scope's lists. A namespace whose lists fail is left out whole (its services with their pods
        and Deployments, or none of them) while the others are read; the tick fails only when no scope answers."""
        started = time.monotonic()
        scopes = self._scopes()
        try:
            answers = await asyncio.gather(*(self._scope(ns) for ns in scopes), return_exceptions=True)
        finally:
            metrics.TICK_PHASE.labels("kubernetes").observe(time.monotonic() - started)
        for answer in answers:
            if isinstance(answer, BaseException) and not isinstance(answer, KubeError):
                raise answer  # a bug, not the API server's word: not to be taken for an unreadable namespace
        failed = {ns: a for ns, a in zip(scopes, answers, strict=True) if isinstance(a, KubeError)}
        for watched in self.namespaces or ():  # before the raise: a single watched namespace is the usual install
            metrics.NAMESPACE_UNREADABLE.labels(watched).set(1 if watched in failed else 0)
        if len(failed) == len(scopes):
            raise next(iter(failed.values()))
        for scope, error in failed.items():
            tick.unreadable[str(scope)] = str(error)
            metrics.KUBE_ERRORS.labels("list").inc()
            self.log.warning("listing namespace %s failed, its services are held this tick: %s", scope, error)
        results = [items for a in answers if not isinstance(a, BaseException) for items in a]
        for i, items in enumerate(results):
            plural = KINDS[i % len(KINDS)][1]
            for obj in items:
                meta = obj.get("metadata") or {}
                ns = str(meta.get("namespace", ""))
                if plural == "deployments":
                    tick.deployments[(ns, str(meta.get("name")))] = obj
                elif plural == "pods":
                    tick.pods.setdefault(ns, []).append(obj)
                elif plural == "horizontalpodautoscalers":
                    tick.hpas.append(obj)
                elif plural == "scaledobjects":
                    tick.scaled_objects.append(obj)
                else:
                    tick.services.append(obj)

    async def _snapshot(self, tick: Tick, sel: Selector) -> None:
        started = time.monotonic()
        snap = await self.prom.snapshot(tick.at, dict(sel), self.tpot)
        metrics.TICK_PHASE.labels("prometheus").observe(time.monotonic() - started)
        tick.fleet[sel] = snap
        if snap.failed:
            metrics.PROMETHEUS_ERRORS.inc(len(snap.failed))
        if snap.partial:
            metrics.PROMETHEUS_PARTIAL.inc(len(snap.partial))

    async def _prometheus(self, tick: Tick) -> None:
        """The PromQL set for every selector group the listed services use; the default group (no
        extra matchers) already ran alongside the lists."""
        selectors = {sel for svc in tick.services if (sel := tick.selector_of(svc)) is not None} or {()}
        await asyncio.gather(*(self._snapshot(tick, s) for s in selectors if s not in tick.fleet))
        started = time.monotonic()
        # Not where nothing answered this tick: against a hung Prometheus the range query would cost the tick
        # a second timeout for a history the held services do not use (and it resumes from where it stopped).
        answering = [sel for sel in selectors if (snap := tick.fleet.get(sel)) is not None and not snap.unavailable]
        await asyncio.gather(*(self._extend_history(sel, tick.at) for sel in answering))
        # a selector group no service has used for the history's whole span (a spec.metrics.selector edited
        # away) is not queried again, so its histories would otherwise stay for as long as the operator runs
        for sel in [s for s, until in self._history_until.items() if until < tick.at - HISTORY_SPAN]:
            del self._history_until[sel]
            for key in [k for k in self.history if k[0] == sel]:
                del self.history[key]
        metrics.TICK_PHASE.labels("history").observe(time.monotonic() - started)
        tick.history_unread = self.history_unread(selectors, tick.at)

    def history_unread(self, selectors: Iterable[Selector], now: float) -> frozenset[Selector]:
        """The selector groups a restarted operator has no rate history of yet. The process it replaced would still
        forecast from the history it held for `HISTORY_STALE` after its range queries began to fail; this one,
        whose first range query (two days of points) failed or was not sent, knows nothing of the traffic to
        come, and a scale-down on today's load alone would undo what that forecast held up (a daily peak due in
        minutes). So for as long, its services make no scale-down; after it, as the old process would, they size
        on the load they see."""
        if now - self.started >= HISTORY_STALE:
            return frozenset()
        return frozenset(sel for sel in selectors if sel not in self._history_until)

    async def _extend_history(self, sel: Selector, now: float) -> None:
        window = history_window(self._history_until.get(sel), now)
        if window is None:
            return
        start, end = window
        try:
            series = await self.prom.rate_history(start, end, HISTORY_STEP, dict(sel))
        except Exception as e:  # the forecast degrades to the recent peak; never fatal
            (metrics.PROMETHEUS_PARTIAL if isinstance(e, PartialAnswer) else metrics.PROMETHEUS_ERRORS).inc()
            self.log.warning("rate history query failed: %s", self.prom.describe(e))
            return
        # each model's total is summed once per query (its series share the query's timestamps), so that a
        # target whose pod names do not say their Deployment reads it in place as the others read their own
        totals: dict[tuple[str, str], dict[float, float]] = {}
        for (ns, model, deployment), points in series.items():
            self._series((sel, ns, model, deployment)).extend(points)
            total = totals.setdefault((ns, model), {})
            for at, value in points:
                total[at] = total.get(at, 0.0) + value
        for (ns, model), total in totals.items():
            self._series((sel, ns, model, None)).extend(sorted(total.items()))
        self._history_until[sel] = end
        # a deleted Deployment's history would otherwise stay for as long as the operator runs
        idle = [key for key, h in self.history.items() if key[0] == sel and (not h or h[-1].at < now - HISTORY_SPAN)]
        for key in idle:
            del self.history[key]

    def _series(self, key: HistoryKey) -> RateHistory:
        return series_in(self.history, key)

    async def refresh(self) -> Tick:
        started = time.monotonic()
        self._seq += 1
        tick = Tick(at=self.clock(), seq=self._seq, default_interval=self.interval)
        # Nearly every service uses the default selector group, so its queries need not wait for the lists.
        default = asyncio.create_task(self._snapshot(tick, ()))
        try:
            await self._lists(tick)
        except KubeError as e:
            tick.kube_error = str(e)
            self.log.warning("listing the cluster failed: %s", e)
        except BaseException:
            # cancelled (SIGTERM) or a bug: not after waiting out a hung Prometheus, which would hold the shutdown
            # past the Lease's renew deadline and so forfeit its release to the standby
            default.cancel()
            await asyncio.gather(default, return_exceptions=True)
            raise
        await default
        wanted = wants_tpot(tick) if tick.kube_error is None else self.tpot
        if wanted and not self.tpot:
            tick.fleet.pop((), None)  # the first tick a service asks for it: read again with the TPOT histogram
        self.tpot = wanted
        await self._prometheus(tick)
        tick.duration = time.monotonic() - started
        metrics.TICK_DURATION.observe(tick.duration)
        if tick.kube_error is None:
            self.last_success = tick.at
            metrics.LAST_TICK.set(tick.at)
        return tick
