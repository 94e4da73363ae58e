"""Before a scale-down: write each Ready pod's deletion cost, so the ReplicaSet removes the idlest pods."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inferscale.adapters.deletion_cost import (
    ANNOTATION,
    cost_patch,
    deletion_costs,
    foreign_costs,
    removal_note,
    stale_costs,
    template_hashes,
)
from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.adapters.workload import TargetState
from inferscale.handlers import metrics
from inferscale.handlers.runtime import Runtime, post_event
from inferscale.handlers.status import first_few

# The writes come before the scale in the same tick: past this, the scale goes ahead without them, so a
# slow API server delays neither the scale-down nor the other services' ticks by more.
DEADLINE = 5.0


@dataclass
class Written:
    due: int = 0  # pods whose cost had to change
    errors: list[KubeError] = field(default_factory=list)
    timed_out: bool = False

    @property
    def transient(self) -> bool:
        """Worth a tick's wait: the next attempt may land (a timeout, throttling, a server error)."""
        return self.timed_out or any(e.transient for e in self.errors)


async def patch_cost(kube: KubeApi, namespace: str, pod: str, cost: int | None) -> KubeError | None:
    """Sets one pod's cost (None: takes it off), or the error that stopped it. A pod deleted meanwhile (404)
    is no error: it is already out of the choice."""
    try:
        await kube.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod}", cost_patch(cost), answer=False)
    except KubeError as e:
        return None if e.status == 404 else e
    return None


async def write_costs(
    kube: KubeApi,
    namespace: str,
    pods: Iterable[Mapping[str, Any]],
    costs: Mapping[str, int],
    deadline: float,
) -> Written:
    """Patches the pods whose cost changed (or takes off the old costs when `costs` is empty)."""
    due = stale_costs(pods, costs)
    try:
        answers = await asyncio.wait_for(
            asyncio.gather(*(patch_cost(kube, namespace, p, c) for p, c in due.items())), deadline
        )
    except TimeoutError:
        return Written(len(due), [], timed_out=True)
    return Written(len(due), [e for e in answers if e is not None])


async def steer_scale_down(
    rt: Runtime,
    body: Mapping[str, Any],
    now: float,
    ts: TargetState,
    loads: Mapping[str, float],
    pods: Sequence[Mapping[str, Any]],
    replicas: int,
) -> str | None:
    """Sets the Ready pods' deletion costs before a scale-down to `replicas`; returns what the scale Event
    says of it, or None to put the scale-down off by one tick. A write that failed for a reason that may
    pass (a timeout, throttling) puts it off once, since the pods it missed keep older costs that could
    send a busy pod first; after that, or for any other failure, the scale-down goes ahead (its count is
    right either way) with a Warning, once per service."""
    meta = body.get("metadata") or {}
    ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
    ready_to_remove = len(ts.ready_pods) - replicas  # the controller removes the pods not Ready first
    if ready_to_remove <= 0:
        return ""
    costs = deletion_costs(ts.ready_pods, loads)
    ready = [p for p in pods if (p.get("metadata") or {}).get("name") in ts.ready_pods]
    theirs = foreign_costs(ready)
    if theirs:
        # someone else ranks these pods: overwriting their costs would undo a choice made on purpose
        return f"the ReplicaSet ranks the pods by the {ANNOTATION} set on {first_few(theirs)}, not by inferscale"
    try:
        written = await write_costs(rt.kube, ns, ready, costs, DEADLINE)
    except Exception:  # a bug here must not cost the scale-down its place after the record written ahead
        rt.logger.exception("%s/%s: setting deletion costs failed; scaling down without them", ns, name)
        return ""
    if not written.errors and not written.timed_out:
        rt.refused_costs.discard(uid)
        rt.deferred_costs.discard(uid)
        return removal_note(costs, ready_to_remove, len(template_hashes(ready)) > 1)
    metrics.KUBE_ERRORS.labels("deletion_cost").inc(max(1, len(written.errors)))
    if written.transient and uid not in rt.deferred_costs:
        rt.deferred_costs.add(uid)
        rt.logger.info("%s/%s: deletion costs not all written; scaling down at the next tick", ns, name)
        return None
    rt.deferred_costs.discard(uid)
    if uid not in rt.refused_costs:
        rt.refused_costs.add(uid)
        why = f"timed out after {DEADLINE:g}s" if written.timed_out else str(written.errors[0])
        failed = written.due if written.timed_out else len(written.errors)
        msg = (
            f"could not set {ANNOTATION} on {failed} of {written.due} pod(s) ({why}); those pods keep the "
            "cost they had, if any, so the ReplicaSet may remove a busier pod than the idlest"
        )
        await post_event(rt, body, "Warning", "DeletionCostFailed", msg, now)
    return ""
