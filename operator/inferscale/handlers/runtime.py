"""What every handler of a tick shares: the operator's long-lived state, and Events on InferenceServices."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.adapters.pod_metrics import PodReads
from inferscale.adapters.workload import rfc3339
from inferscale.api.models import API_VERSION, KIND
from inferscale.handlers import metrics
from inferscale.scaling.telling import Told
from inferscale.scaling.types import ScaleEvent

if TYPE_CHECKING:
    from inferscale.handlers.collector import HistoryKey
    from inferscale.handlers.rate_history import RateHistory
    from inferscale.handlers.refresher import Refresher


# A /scale write the API server refused (RBAC, a webhook, validation) is tried again after this long, doubled
# at each refusal up to REFUSED_SCALE_MAX: every tick it cost two status writes (the record ahead of the scale
# and its retraction) for a write that fails the same way until a person fixes something.
REFUSED_SCALE_RETRY = 30.0
REFUSED_SCALE_MAX = 120.0


@dataclass(frozen=True)
class ScaleRefusal:
    retry_at: float
    delay: float
    message: str
    reason: str = "ScaleFailed"  # Ready's, until the scale is tried again


@dataclass
class Runtime:
    kube: KubeApi
    default_interval: float
    history: MutableMapping[HistoryKey, RateHistory]  # (selector group, namespace, model, Deployment)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("inferscale"))
    instance: str = field(default_factory=socket.gethostname)
    last_decided: dict[str, float] = field(default_factory=dict)  # service uid -> when it last decided
    last_told: dict[str, Told] = field(default_factory=dict)  # service uid -> the decision last logged
    # service uid -> each condition type's (status, reason) as this process last saw it, and the problem last
    # announced: an Event once, not every tick, while the status that would say it was announced cannot be written
    seen_conditions: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    told_problems: dict[str, tuple[object, ...]] = field(default_factory=dict)
    deferred_scales: set[str] = field(default_factory=set)  # service uids told a scale waits for its status write
    scale_conflicts: dict[str, int] = field(default_factory=dict)  # service uid -> scales refused as 409 in a row
    # service uid -> the managed template hash whose update the API server refused, announced once
    refused_templates: dict[str, str] = field(default_factory=dict)
    refused_scales: dict[str, ScaleRefusal] = field(default_factory=dict)  # service uid -> its last refused scale
    # service uid -> the mean (prompt, output) tokens its engines last reported: the capacity prior's lengths on a
    # tick whose rates are missing (api.convert.with_observed_prior)
    last_lengths: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    refresher: Refresher | None = None  # None: figure refreshes are written in the tick
    deletion_cost: bool = True  # steer scale-downs to the idlest pods (adapters.deletion_cost)
    refused_costs: set[str] = field(default_factory=set)  # service uids told that a cost write failed
    deferred_costs: set[str] = field(default_factory=set)  # service uids whose scale-down waits a tick for them
    refused_releases: set[str] = field(default_factory=set)  # pod uids whose cost could not be taken off for good
    # service uid -> the scale events (at, from, to) this process recorded in the last hour: a status refused as a
    # conflict is sent again only over events this process knows, never over another writer's; and a scale of its
    # own is never told as a stopped operator's
    written_events: dict[str, frozenset[tuple[float, int, int]]] = field(default_factory=dict)
    told_contention: set[str] = field(default_factory=set)  # service uids told another writer records scales
    told_lost: dict[str, float] = field(default_factory=dict)  # service uid -> the lost scale it told (its time)
    # service uid -> the scale whose /scale got no clear answer, until the next tick reads the target; and the time
    # of one that tick found landed, to be told
    unconfirmed: dict[str, ScaleEvent] = field(default_factory=dict)
    landed: dict[str, ScaleEvent] = field(default_factory=dict)
    # the engines' own /metrics read through a Prometheus outage, kept between ticks for their rates (podPort)
    pod_reads: PodReads = field(default_factory=PodReads)

    def refuse_scale(self, uid: str, now: float, message: str, reason: str = "ScaleFailed") -> ScaleRefusal:
        last = self.refused_scales.get(uid)
        delay = min(2 * last.delay, REFUSED_SCALE_MAX) if last is not None else REFUSED_SCALE_RETRY
        self.refused_scales[uid] = refusal = ScaleRefusal(now + delay, delay, message, reason)
        return refusal

    def forget_absent(self, services: set[str], pods: set[str]) -> None:
        """Drop what is kept of services and pods the cluster no longer has (uids): one entry per service ever
        created would otherwise stay for as long as the operator runs."""
        self.last_decided = {u: t for u, t in self.last_decided.items() if u in services}
        self.last_told = {u: t for u, t in self.last_told.items() if u in services}
        self.seen_conditions = {u: c for u, c in self.seen_conditions.items() if u in services}
        self.told_problems = {u: p for u, p in self.told_problems.items() if u in services}
        self.deferred_scales &= services
        self.scale_conflicts = {u: n for u, n in self.scale_conflicts.items() if u in services}
        self.refused_templates = {u: h for u, h in self.refused_templates.items() if u in services}
        self.refused_scales = {u: r for u, r in self.refused_scales.items() if u in services}
        self.last_lengths = {u: lengths for u, lengths in self.last_lengths.items() if u in services}
        self.refused_costs &= services
        self.deferred_costs &= services
        self.refused_releases &= pods
        self.written_events = {u: e for u, e in self.written_events.items() if u in services}
        self.told_contention &= services
        self.told_lost = {u: at for u, at in self.told_lost.items() if u in services}
        self.unconfirmed = {u: e for u, e in self.unconfirmed.items() if u in services}
        self.landed = {u: e for u, e in self.landed.items() if u in services}


async def post_event(rt: Runtime, body: Mapping[str, Any], kind: str, reason: str, message: str, now: float) -> None:
    meta = body.get("metadata") or {}
    ns = meta.get("namespace")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": ns},
        "involvedObject": {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": meta.get("name"),
            "namespace": ns,
            "uid": meta.get("uid"),
        },
        "type": kind,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": "inferscale"},
        "reportingComponent": "inferscale",
        "reportingInstance": rt.instance,
        "firstTimestamp": rfc3339(now),
        "lastTimestamp": rfc3339(now),
        "count": 1,
    }
    try:
        await rt.kube.create(f"/api/v1/namespaces/{ns}/events", event)
    except KubeError as e:
        metrics.KUBE_ERRORS.labels("event").inc()
        rt.logger.warning("could not post event %s for %s/%s: %s", reason, ns, meta.get("name"), e)
