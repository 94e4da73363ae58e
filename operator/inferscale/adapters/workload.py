"""What the cluster says about one target, read from the tick's fleet-wide lists (plain JSON)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferscale.scaling.state import MAX_TIME_TO_READY

Obj = Mapping[str, Any]
# A GPU pod the scheduler cannot place for this long is a capacity problem, not a start-up delay.
CAPACITY_BLOCKED_AFTER = 120.0
# A pod's Ready time moves when its readiness probe flaps; a start this far past the typical one measures the
# flap, not the start-up. A pod Ready more than MAX_TIME_TO_READY after its creation restarted or lost
# readiness on the way (the filter cannot tell when it is the only pod, or half of them flapped).
FLAP_FACTOR = 2.0


def restarts(pod_status: Mapping[str, Any]) -> int:
    """Container restarts of a pod, from its status or the collector's slim copy of it."""
    if "restarts" in pod_status:
        return int(pod_status.get("restarts") or 0)
    return sum(int(c.get("restartCount") or 0) for c in pod_status.get("containerStatuses") or [])


def parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def rfc3339(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes LabelSelector; an empty or missing selector matches nothing (as Deployments require one)."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def _condition(pod: Obj, kind: str) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


@dataclass(frozen=True)
class TargetState:
    exists: bool
    replicas: int  # spec.replicas
    ready_pods: frozenset[str]
    pending: int  # pods not Ready yet (scheduled or not), excluding terminating ones
    capacity_blocked: int  # pods unschedulable for lack of resources beyond CAPACITY_BLOCKED_AFTER
    capacity_message: str | None
    time_to_ready: tuple[float, ...]  # creation -> Ready of the Ready pods, seconds
    uid: str | None = None
    # of `pending`, those not Ready after a container restart (crash-looping, or killed by their probes):
    # counted as on their way, as HPA counts them, and named in a condition, since they may never arrive
    restarting: int = 0


def target_state(deployment: Obj | None, pods: Iterable[Obj], now: float) -> TargetState:
    if deployment is None:
        return TargetState(False, 0, frozenset(), 0, 0, None, ())
    spec = deployment.get("spec") or {}
    selector = spec.get("selector")
    ready: set[str] = set()
    pending = blocked = restarting = 0
    message = None
    ttr: list[float] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or not selector_matches(selector, meta.get("labels") or {}):
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            continue
        ready_cond = _condition(pod, "Ready")
        if ready_cond and ready_cond.get("status") == "True":
            ready.add(str(meta.get("name")))
            created, became = (
                parse_time(meta.get("creationTimestamp")),
                parse_time(ready_cond.get("lastTransitionTime")),
            )
            # a restarted container's Ready time is its restart's, not the start-up's
            fresh = not restarts(pod.get("status") or {})
            if fresh and created is not None and became is not None and 0 <= became - created <= MAX_TIME_TO_READY:
                ttr.append(became - created)
            continue
        pending += 1
        if restarts(pod.get("status") or {}):
            restarting += 1
        sched = _condition(pod, "PodScheduled")
        if sched and sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
            since = parse_time(sched.get("lastTransitionTime")) or parse_time(meta.get("creationTimestamp")) or now
            if now - since >= CAPACITY_BLOCKED_AFTER:
                blocked += 1
                message = str(sched.get("message") or "unschedulable")
    return TargetState(
        exists=True,
        replicas=int(spec.get("replicas", 1) or 0),
        ready_pods=frozenset(ready),
        pending=pending,
        capacity_blocked=blocked,
        capacity_message=message,
        time_to_ready=tuple(ttr),
        uid=(deployment.get("metadata") or {}).get("uid"),
        restarting=restarting,
    )


def measured_time_to_ready(samples: Sequence[float], previous: float | None) -> float | None:
    """The slowest start-up among the current Ready pods, leaving out any more than FLAP_FACTOR times the
    (low) median; the previous value when no pod is Ready.

    The lead must cover the replica that starts slowly: a lead at the typical start lets the load arrive
    before half of the new replicas do."""
    if not samples:
        return previous
    bound = FLAP_FACTOR * statistics.median_low(samples)
    return max(s for s in samples if s <= bound)


def conflicting_autoscalers(
    namespace: str, kind: str, name: str, hpas: Iterable[Obj], scaled_objects: Iterable[Obj]
) -> list[str]:
    """Other autoscalers writing the same target's replicas: HPAs and KEDA ScaledObjects."""
    found = []
    for hpa in hpas:
        meta, ref = hpa.get("metadata") or {}, (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if meta.get("namespace") == namespace and ref.get("kind") == kind and ref.get("name") == name:
            found.append(f"HorizontalPodAutoscaler/{meta.get('name')}")
    for so in scaled_objects:
        meta, ref = so.get("metadata") or {}, (so.get("spec") or {}).get("scaleTargetRef") or {}
        if meta.get("namespace") == namespace and ref.get("kind", "Deployment") == kind and ref.get("name") == name:
            found.append(f"ScaledObject/{meta.get('name')}")
    return found
