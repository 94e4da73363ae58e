"""Which pods a scale-down removes: the ReplicaSet controller's choice, steered by pod-deletion-cost.

Without a hint, the ReplicaSet deletes the most recently Ready pod first, however busy it is, and every
request that pod holds is cut off or drains for minutes on a GPU that is already paid for. Before a
scale-down the operator sets `controller.kubernetes.io/pod-deletion-cost` on the target's Ready pods to
the requests each one holds, so the controller removes the idlest ones (as the simulator's fleet does).
The controller still removes pods that are not Ready before any Ready one, whatever their cost, and
during a rollout the Deployment splits a scale-down between its ReplicaSets, each ranking only its own.
A cost the operator writes is copied into a second annotation of its own (`OWNER`): a cost without that
copy, or that differs from it, was set by someone else, and the operator then leaves the choice to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
OWNER = "inferscale.dev/pod-deletion-cost"  # the cost inferscale wrote, to tell it from one a user set
MAX_COST = 2**31 - 1  # the annotation is an int32
TEMPLATE_HASH = "pod-template-hash"  # the label that tells a Deployment's ReplicaSets apart
_NAMED = 5  # pods an Event names before it counts the rest


def deletion_costs(ready_pods: Iterable[str], loads: Mapping[str, float]) -> dict[str, int]:
    """The cost of each Ready pod: the requests it holds. A pod whose load is unknown costs more than
    the busiest known one, since an unknown load is never taken for an idle pod; with no load known at
    all there is nothing to steer by, and no cost is set."""
    ready = sorted(ready_pods)
    known = {pod: min(MAX_COST, max(0, round(loads[pod]))) for pod in ready if pod in loads}
    if not known:
        return {}
    unknown = min(MAX_COST, max(known.values()) + 1)
    return {pod: known.get(pod, unknown) for pod in ready}


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(pod).get("annotations") or {}


def current_cost(pod: Mapping[str, Any]) -> str | None:
    return _annotations(pod).get(ANNOTATION)


def foreign_costs(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The pods whose cost inferscale did not write (a user's, another controller's)."""
    return sorted(
        str(_meta(p).get("name"))
        for p in pods
        if current_cost(p) is not None and _annotations(p).get(OWNER) != current_cost(p)
    )


def owned_cost(pod: Mapping[str, Any]) -> bool:
    """Whether the pod carries a cost inferscale wrote (or only inferscale's copy of one taken off since)."""
    mine = _annotations(pod).get(OWNER)
    return mine is not None and current_cost(pod) in (None, mine)


def stale_costs(pods: Iterable[Mapping[str, Any]], costs: Mapping[str, int]) -> dict[str, int | None]:
    """The writes that bring the pods to `costs`: changed costs only. With no costs to set, the costs an
    earlier scale-down left are taken off (None), so an old ranking does not steer this one unseen."""
    by_name = {_meta(p).get("name"): p for p in pods}
    if not costs:
        return {name: None for name, p in by_name.items() if isinstance(name, str) and current_cost(p) is not None}
    return {pod: cost for pod, cost in costs.items() if pod in by_name and current_cost(by_name[pod]) != str(cost)}


def cost_patch(cost: int | None) -> dict[str, Any]:
    """The merge patch that sets a cost (or takes it off) together with inferscale's copy of it."""
    value = None if cost is None else str(cost)
    return {"metadata": {"annotations": {ANNOTATION: value, OWNER: value}}}


def template_hashes(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str((_meta(p).get("labels") or {}).get(TEMPLATE_HASH, "")) for p in pods}


def _names(pods: list[str], costs: Mapping[str, int]) -> list[str]:
    shown = [f"{pod} ({costs[pod]})" for pod in pods[:_NAMED]]
    return shown + ([f"{len(pods) - _NAMED} more"] if len(pods) > _NAMED else [])


def removal_note(costs: Mapping[str, int], ready_to_remove: int, rollout: bool) -> str:
    """What the scale Event says of the Ready pods that go. Pods tied at the last cost that goes are
    named as a group: the controller breaks such ties by its own order (pods sharing a node, then the
    most recently Ready), which the operator does not see."""
    if ready_to_remove <= 0 or not costs:
        return ""
    if rollout:
        return "the Deployment splits the scale-down between its ReplicaSets (a rollout); each removes its idlest pods"
    order = sorted(costs, key=lambda pod: (costs[pod], pod))
    k = min(ready_to_remove, len(order))
    last = costs[order[k - 1]]
    sure = [pod for pod in order if costs[pod] < last]
    tied = [pod for pod in order if costs[pod] == last]
    parts = _names(sure, costs)
    if k - len(sure) == len(tied):
        parts += _names(tied, costs)
    elif len(tied) <= _NAMED:
        parts.append(f"{k - len(sure)} of {', '.join(tied)} ({last} each)")
    else:
        parts.append(f"{k - len(sure)} of the {len(tied)} pods holding {last}")
    return "the idlest Ready pods go first, by requests held: " + ", ".join(parts)
