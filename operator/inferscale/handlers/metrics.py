"""The operator's own metrics on /metrics: what it decided, why, and how its ticks went."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)
_SERVICE = ("namespace", "name")
_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)  # tick-scale durations

DESIRED = Gauge("inferscale_desired_replicas", "Replicas inferscale decided.", _SERVICE, registry=REGISTRY)
CURRENT = Gauge("inferscale_current_replicas", "The target's spec.replicas.", _SERVICE, registry=REGISTRY)
READY = Gauge("inferscale_ready_replicas", "The target's Ready pods.", _SERVICE, registry=REGISTRY)
DECISIONS = Counter(
    "inferscale_decisions", "Decisions by the reason that set the count.", (*_SERVICE, "reason"), registry=REGISTRY
)
SCALE_ACTIONS = Counter(
    "inferscale_scale_actions", "Writes to the target's /scale.", (*_SERVICE, "direction"), registry=REGISTRY
)
CONDITION = Gauge("inferscale_condition", "Status conditions: 1 True, 0 False.", (*_SERVICE, "type"), registry=REGISTRY)
SERVICE_MODEL = Gauge(
    "inferscale_service_model",
    "1 for each service, the model_name its engines serve and a regex of its target's pod names: the dashboard picks "
    "a service's engine series by them.",
    (*_SERVICE, "model_name", "pods"),
    registry=REGISTRY,
)
NOT_READY = Gauge(
    "inferscale_not_ready",
    "1 while a service's Ready condition is False, labelled with its reason (ScaleFailed, TargetNotFound, "
    "InvalidSpec, ScalingDisabled, ...): an alert can tell a refused scale from a Deployment scaled to 0 by hand.",
    (*_SERVICE, "reason"),
    registry=REGISTRY,
)
TICK_DURATION = Histogram(
    "inferscale_tick_duration_seconds",
    "Time to read the cluster and Prometheus for every service once.",
    buckets=_SECONDS,
    registry=REGISTRY,
)
RECONCILE_DURATION = Histogram(
    "inferscale_reconcile_duration_seconds",
    "Time to decide, act and write status for every service in one tick.",
    buckets=_SECONDS,
    registry=REGISTRY,
)
TICK_PHASE = Histogram(
    "inferscale_tick_phase_seconds",
    "Time of each part of the read: the Kubernetes lists, the PromQL set, the rate-history range query.",
    ("phase",),
    buckets=_SECONDS,
    registry=REGISTRY,
)
STATUS_WRITES = Counter(
    "inferscale_status_writes",
    "Status updates by outcome: written (news, in the tick), refreshed (figures only, paced between ticks), "
    "dropped (a refresh not sent before the next tick, or refused as stale), unchanged, ahead (the scale event "
    "recorded before the scale is made).",
    ("outcome",),
    registry=REGISTRY,
)
PROMETHEUS_ERRORS = Counter("inferscale_prometheus_query_errors", "PromQL queries that failed.", registry=REGISTRY)
PROMETHEUS_PARTIAL = Counter(
    "inferscale_prometheus_partial_answers",
    "PromQL answers that came with warnings (a Thanos store that did not answer): read, but no scale-down and no "
    "capacity learning on them, and the rate history waits for a whole answer.",
    registry=REGISTRY,
)
KUBE_ERRORS = Counter(
    "inferscale_kubernetes_errors", "Kubernetes API calls that failed.", ("operation",), registry=REGISTRY
)
NAMESPACE_UNREADABLE = Gauge(
    "inferscale_namespace_unreadable",
    "1 while a watched namespace cannot be listed (its services are held); the other namespaces are decided.",
    ("namespace",),
    registry=REGISTRY,
)
LEADER = Gauge(
    "inferscale_leader",
    "1 while this process acts: it holds the leader Lease (run --leader-elect), or runs without one.",
    registry=REGISTRY,
)
LAST_TICK = Gauge("inferscale_last_tick_timestamp_seconds", "When the last complete tick finished.", registry=REGISTRY)
# what the stall alert measures a tick's age against (/healthz allows 3 ticks and 30 s)
TICK_INTERVAL = Gauge("inferscale_tick_interval_seconds", "The operator's tick (--interval).", registry=REGISTRY)


# the condition types each service's gauge carries now, so that a type its status no longer has is dropped
_CONDITION_TYPES: dict[tuple[str, str], set[str]] = {}
_NOT_READY: dict[tuple[str, str], str] = {}  # service -> the reason its Ready condition is False for
_MODELS: dict[tuple[str, str], tuple[str, str]] = {}  # service -> the (model_name, pods) it was last decided on
_PER_SERVICE: tuple[tuple[Gauge | Counter, tuple[str, ...]], ...] = (
    (DESIRED, _SERVICE),
    (CURRENT, _SERVICE),
    (READY, _SERVICE),
    (DECISIONS, (*_SERVICE, "reason")),
    (SCALE_ACTIONS, (*_SERVICE, "direction")),
    (CONDITION, (*_SERVICE, "type")),
    (NOT_READY, (*_SERVICE, "reason")),
    (SERVICE_MODEL, (*_SERVICE, "model_name", "pods")),
)


def set_conditions(namespace: str, name: str, conditions: Iterable[tuple[str, bool, str]]) -> None:
    """The service's conditions as its status now has them (type, True, reason): a type the status dropped (a
    CapacityBlocked before the target went missing) would otherwise keep its alert firing."""
    types = set()
    not_ready = None
    for kind, true, reason in conditions:
        CONDITION.labels(namespace, name, kind).set(1 if true else 0)
        types.add(kind)
        if kind == "Ready" and not true:
            not_ready = reason
    for gone in _CONDITION_TYPES.get((namespace, name), set()) - types:
        CONDITION.remove(namespace, name, gone)
    _CONDITION_TYPES[(namespace, name)] = types
    was = _NOT_READY.pop((namespace, name), None)
    if was is not None and was != not_ready:
        NOT_READY.remove(namespace, name, was)
    if not_ready is not None:
        NOT_READY.labels(namespace, name, not_ready).set(1)
        _NOT_READY[(namespace, name)] = not_ready


def set_model(namespace: str, name: str, model: str, pods: str) -> None:
    """The model_name the service's engines serve and the regex of its target's pod names (two services of one
    model in a namespace, a canary beside the main Deployment, must not share the dashboard's panels); one series,
    whatever the spec said before."""
    was = _MODELS.get((namespace, name))
    if was is not None and was != (model, pods):
        SERVICE_MODEL.remove(namespace, name, *was)
    SERVICE_MODEL.labels(namespace, name, model, pods).set(1)
    _MODELS[(namespace, name)] = (model, pods)


def forget_figures(namespace: str, name: str) -> None:
    """A service not decided this tick (an invalid spec, its target missing, a conflict): the replica figures of its
    last decision would read as today's. Absent, they read as unknown."""
    for gauge in (DESIRED, CURRENT, READY):
        with contextlib.suppress(KeyError):
            gauge.remove(namespace, name)


def forget_services(listed: set[tuple[str, str]], unread: Callable[[str], bool]) -> None:
    """Drops the series of the services not listed this tick (deleted, or their namespace), but for those in a
    namespace that could not be read. Kept, a deleted service's conditions would hold their alerts firing
    until the operator restarts."""
    for metric, names in _PER_SERVICE:
        stale = {
            values
            for family in metric.collect()
            for sample in family.samples
            if (values := tuple(sample.labels.get(n, "") for n in names))[:2] not in listed and not unread(values[0])
        }
        for values in stale:
            metric.remove(*values)
            _CONDITION_TYPES.pop((values[0], values[1]), None)
            _NOT_READY.pop((values[0], values[1]), None)
            _MODELS.pop((values[0], values[1]), None)


class RequestCounts(Collector):
    """Requests the adapters sent, read from their own counters at scrape time."""

    def __init__(
        self,
        prometheus: Callable[[], int],
        kubernetes: Callable[[], int],
        lists: Callable[[], Iterable[tuple[str, str, int]]] = tuple,
    ) -> None:
        self.prometheus, self.kubernetes, self.lists = prometheus, kubernetes, lists

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(
            "inferscale_prometheus_queries", "PromQL queries sent (instant and range).", value=self.prometheus()
        )
        yield CounterMetricFamily(
            "inferscale_kubernetes_requests", "Kubernetes API requests sent.", value=self.kubernetes()
        )
        lists = CounterMetricFamily(
            "inferscale_informer_lists",
            "Full lists by the watch caches, by resource and why: start, expired (the API server answered 410 "
            "to a resumed watch), failed.",
            labels=("resource", "reason"),
        )
        for resource, reason, count in self.lists():
            lists.add_metric((resource, reason), count)
        yield lists
