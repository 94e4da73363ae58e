"""What the cluster says about one target, read from the tick's fleet-wide lists (plain JSON)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferscale.api.status import MAX_KEPT_STARTS
from inferscale.scaling.state import MAX_TIME_TO_READY, stored_time_to_ready

Obj = Mapping[str, Any]
# A GPU pod the scheduler cannot place for this long is reported (CapacityBlocked): a node is being provisioned
# for it at best.
CAPACITY_BLOCKED_AFTER = 120.0
# The longest wait for a node counted in a start-up. Until 2026-12-05 it was CAPACITY_BLOCKED_AFTER, which cut
# most of a GPU node's provisioning out of the lead exactly where scaling up needs new nodes.
NODE_WAIT_COUNTED = 900.0
# A pod's Ready time moves when its readiness probe flaps. The operator keeps the first Ready of each pod it
# watched start (`Starts`); a pod already Ready when first seen (the operator was down or just adopted the
# target) may have flapped since, and its start counts only within this factor of the typical one. A pod Ready
# more than MAX_TIME_TO_READY after its creation restarted or lost readiness on the way.
FLAP_FACTOR = 2.0
# A pod this young cannot have flapped for longer than it has lived: the operator watches its start, as it
# watches a pod it saw before it was Ready (the floor covers ticks that overrun and whole-second timestamps).
WITNESS_FLOOR = 60.0
# Seconds a node's clock may run ahead of the operator's before a Ready time it stamps is not read as a start's end.
CLOCK_SLACK = 30.0


def restarts(pod_status: Mapping[str, Any]) -> int:
    """Container restarts of a pod, from its status or the collector's slim copy of it. Init containers count:
    a weight download that crash-loops keeps the pod from Ready as surely as vLLM crashing does, and its
    time would otherwise be measured as a start-up."""
    if "restarts" in pod_status:
        return int(pod_status.get("restarts") or 0)
    containers = [*(pod_status.get("initContainerStatuses") or []), *(pod_status.get("containerStatuses") or [])]
    return sum(int(c.get("restartCount") or 0) for c in containers)


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
class Start:
    """A Ready pod's creation -> Ready (seconds), its age and how long it has been Ready at the tick."""

    pod: str
    seconds: float
    age: float
    ready_for: float
    # its containers restarted: a start the operator watched from creation (a retry during warm-up) still counts,
    # an unwatched one's Ready time may be a restart's
    restarted: bool = False


@dataclass(frozen=True)
class Unready:
    """A pod not Ready, and whether it has not been Ready yet (a start the operator can watch)."""

    pod: str
    never_ready: bool
    # seconds since a pod that never restarted was placed on a node, None otherwise: a start that takes far past
    # the time-to-ready (an image that does not pull, a readiness probe that never passes) is stuck, not coming
    placed_for: float | None = None


@dataclass(frozen=True)
class TargetState:
    exists: bool
    replicas: int  # spec.replicas
    ready_pods: frozenset[str]
    pending: int  # pods not Ready yet (scheduled or not), excluding terminating ones
    capacity_blocked: int  # pods unschedulable for lack of resources beyond CAPACITY_BLOCKED_AFTER
    capacity_message: str | None
    starts: tuple[Start, ...]  # the Ready pods not restarted, started within MAX_TIME_TO_READY
    uid: str | None = None
    # of `pending`, those not Ready after a container restart (crash-looping, or killed by their probes):
    # counted as on their way, as HPA counts them, and named in a condition, since they may never arrive
    restarting: int = 0
    unready: tuple[Unready, ...] = ()  # the pending pods


def _placed(pod: Obj) -> float | None:
    sched = _condition(pod, "PodScheduled")
    return parse_time(sched.get("lastTransitionTime")) if sched and sched.get("status") == "True" else None


def _start_up(pod: Obj, created: float | None, became: float | None) -> float | None:
    """Creation -> `became`, less the time over NODE_WAIT_COUNTED the pod waited for a node: a GPU node
    provisioned for it (minutes, with its driver) is part of a replica's start and what the forecast must lead
    by, an hour without GPUs is a capacity problem (CapacityBlocked), not a start-up to lead every forecast by."""
    if created is None or became is None:
        return None
    placed = _placed(pod)
    waited = max(0.0, (placed - created) - NODE_WAIT_COUNTED) if placed is not None else 0.0
    return stored_time_to_ready(became - created - waited)


def _never_ready(pod: Obj, ready_cond: Obj | None, created: float | None) -> bool:
    """Whether a pod not Ready has not been Ready yet: the kubelet marks a new pod not Ready when it takes
    it on, so its Ready condition dates from its placement (or there is none yet); a pod that lost its
    readiness later (a probe that flaps) dates it from then."""
    if restarts(pod.get("status") or {}):
        return False
    if ready_cond is None:
        return True
    since, placed = parse_time(ready_cond.get("lastTransitionTime")), _placed(pod)
    origin = placed if placed is not None else created
    return since is not None and origin is not None and since - origin <= WITNESS_FLOOR


def owned_by_another(meta: Obj, deployment: str) -> bool:
    """Whether a pod the Deployment's selector matches belongs to another workload: its controller is a
    ReplicaSet not named `<deployment>-<pod-template-hash>` (a canary whose labels are a superset of the
    stable Deployment's selector), or no ReplicaSet at all (a StatefulSet's, a Job's). HPA counts such pods;
    their load and their deletion costs are not ours. A pod without a controller is the ReplicaSet's to adopt."""
    for owner in meta.get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller"):
            if owner.get("kind") != "ReplicaSet":
                return True
            template_hash = (meta.get("labels") or {}).get("pod-template-hash")
            name = str(owner.get("name", ""))
            return name != f"{deployment}-{template_hash}" if template_hash else not name.startswith(f"{deployment}-")
    return False


def target_state(deployment: Obj | None, pods: Iterable[Obj], now: float) -> TargetState:
    if deployment is None:
        return TargetState(False, 0, frozenset(), 0, 0, None, ())
    spec = deployment.get("spec") or {}
    selector = spec.get("selector")
    own_name = str((deployment.get("metadata") or {}).get("name") or "")
    ready: set[str] = set()
    pending = blocked = restarting = 0
    message = None
    starts: list[Start] = []
    unready: list[Unready] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or not selector_matches(selector, meta.get("labels") or {}):
            continue
        if own_name and owned_by_another(meta, own_name):
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            continue
        name, created = str(meta.get("name")), parse_time(meta.get("creationTimestamp"))
        ready_cond = _condition(pod, "Ready")
        restarted = bool(restarts(pod.get("status") or {}))
        if ready_cond and ready_cond.get("status") == "True":
            ready.add(name)
            # a restarted container's Ready time is its restart's, not the start-up's
            became = parse_time(ready_cond.get("lastTransitionTime"))
            seconds = _start_up(pod, created, became)
            # a Ready time later than the tick is a node's clock running ahead: its start would read long by as much
            if seconds is not None and created is not None and became is not None and became <= now + CLOCK_SLACK:
                starts.append(Start(name, seconds, now - created, now - became, restarted))
            continue
        pending += 1
        never = _never_ready(pod, ready_cond, created)
        # only a pod on its way to its first Ready can be stuck on it: one that served and lost its readiness (a
        # probe timing out under load) is a serving pod's trouble, not a start that does not end
        placed = _placed(pod) if never else None
        unready.append(Unready(name, never, None if placed is None else now - placed))
        restarting += restarted
        sched = _condition(pod, "PodScheduled")
        if sched and sched.get("status") == "False" and sched.get("reason") == "Unschedulable":
            since = parse_time(sched.get("lastTransitionTime")) or parse_time(meta.get("creationTimestamp")) or now
            if now - since >= CAPACITY_BLOCKED_AFTER:
                blocked += 1
                message = str(sched.get("message") or "unschedulable")
    return TargetState(
        exists=True,
        # absent or null: the API server's default, 1 (read as 0 it passed for a Deployment scaled to 0 by hand)
        replicas=1 if spec.get("replicas") is None else int(spec["replicas"]),
        ready_pods=frozenset(ready),
        pending=pending,
        capacity_blocked=blocked,
        capacity_message=message,
        starts=tuple(starts),
        uid=(deployment.get("metadata") or {}).get("uid"),
        restarting=restarting,
        unready=tuple(unready),
    )


# A pod placed for longer than this many times-to-ready (and at least STUCK_SLACK past one) without becoming Ready
# is stuck: no longer a replica on its way. A pod waiting for a node is not (CapacityBlocked says so), nor one
# crash-looping (PodsRestarting: counted, as HPA counts it).
STUCK_FACTOR = 2.0
STUCK_SLACK = 300.0


def stuck_bound(lead: float) -> float:
    return max(STUCK_FACTOR * lead, lead + STUCK_SLACK)


def on_their_way(ts: TargetState, lead: float) -> tuple[int, tuple[str, ...]]:
    """The pods not Ready that a decision may count as replicas on their way, and the stuck ones it may not. No
    more than the Deployment asks beyond its Ready pods: a rollout's surge pods are not capacity to come."""
    bound = stuck_bound(lead)
    stuck = tuple(sorted(u.pod for u in ts.unready if u.placed_for is not None and u.placed_for > bound))
    return max(0, min(ts.pending - len(stuck), ts.replicas - len(ts.ready_pods))), stuck


@dataclass(frozen=True)
class Starts:
    """What the operator keeps between ticks to measure start-ups that a readiness flap cannot move: the
    pods not Ready yet, and the first creation -> Ready of each it saw become Ready."""

    watching: frozenset[str] = frozenset()
    seen: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TimeToReadyMeasure:
    value: float | None  # the lead: the slowest start-up measured, else the previous value
    kept: Starts
    samples: int


def measure_time_to_ready(
    ts: TargetState,
    kept: Starts,
    previous: float | None,
    interval: float,
    prior: float | None = None,
    since_last: float | None = None,
) -> TimeToReadyMeasure:
    """The slowest start-up among the target's current pods; the previous value when none is measured.

    The lead must cover the replica that starts slowly: a lead at the typical start lets the load arrive
    before half of the new replicas do. A pod the operator watched start counts with its first Ready,
    however slow: one younger than two ticks, or one not Ready yet at an earlier tick and Ready for at most
    two ticks now. A pod that became Ready unwatched (the operator was down, or adopted the target) counts
    only within FLAP_FACTOR of the typical start, since its Ready time may be a flap's; the typical start is
    the median of the starts seen and of `previous` (else `prior`, the spec's), so that one adopted pod's flap
    is not its own measure. `interval` is the time between the service's ticks; `since_last`, the seconds since
    this service's previous tick on the operator's own clock, when known.

    A pod watched not Ready at the previous tick and Ready now became Ready between the two ticks, whatever the
    kubelet's clock says: within two ticks by the operator's clock, it counts as watched even where its Ready
    time reads older (the operator's clock ahead of the node's). Its kubelet-stamped start is then not to be
    trusted short: it is at least its age less the time since the last tick."""
    span = max(WITNESS_FLOOR, 2 * interval)
    live = ts.ready_pods | {u.pod for u in ts.unready}
    seen = {pod: s for pod, s in kept.seen.items() if pod in live}
    unwatched = []
    gap = since_last if since_last is not None and 0 <= since_last <= span else None
    for start in ts.starts:
        if start.pod in seen:
            continue
        if start.age <= span or (start.pod in kept.watching and start.ready_for <= span):
            seen[start.pod] = start.seconds
        elif start.pod in kept.watching and gap is not None:
            seen[start.pod] = min(max(start.seconds, start.age - gap), MAX_TIME_TO_READY)
        elif not start.restarted:
            unwatched.append(start.seconds)
    # a pod watched since before its first Ready stays watched through a restart: a warm-up that crashed once
    # (an OOM, a liveness probe that fired early) is still a start, and the lead must cover it
    watching = {u.pod for u in ts.unready if (u.never_ready or u.pod in kept.watching) and u.pod not in seen}
    now_kept = Starts(frozenset(watching), seen)
    samples = [*seen.values(), *unwatched]
    if not samples:
        return TimeToReadyMeasure(previous, now_kept, 0)
    # both the last measure and the spec's prior: a last measure far below every start (a hand-edited 0) must not
    # make each real start read as a flap, and hold the lead at it
    references = [r for r in (previous, prior) if r is not None]
    bound = FLAP_FACTOR * statistics.median_low([*samples, *references])
    counted = [*seen.values(), *(s for s in unwatched if s <= bound)]
    return TimeToReadyMeasure(max(counted) if counted else previous, now_kept, len(samples))


def starts_to_status(kept: Starts) -> dict[str, Any]:
    """Lists, not maps: a merge patch replaces a list whole, where it would keep a map's deleted pods."""
    return {
        "watching": sorted(kept.watching)[:MAX_KEPT_STARTS],
        "starts": [{"pod": p, "seconds": round(s, 3)} for p, s in sorted(kept.seen.items())[:MAX_KEPT_STARTS]],
    }


def starts_from_status(value: object) -> Starts:
    """Tolerant, as status is edited by hand or written by older versions: what does not parse is dropped."""
    if not isinstance(value, Mapping):
        return Starts()
    watching = value.get("watching")
    names = frozenset(n for n in watching if isinstance(n, str)) if isinstance(watching, list) else frozenset()
    starts = value.get("starts")
    seen: dict[str, float] = {}
    for item in starts if isinstance(starts, list) else []:
        if not isinstance(item, Mapping):
            continue
        pod, seconds = item.get("pod"), stored_time_to_ready(item.get("seconds"))
        if isinstance(pod, str) and seconds is not None:
            seen[pod] = seconds
    return Starts(names, seen)


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
