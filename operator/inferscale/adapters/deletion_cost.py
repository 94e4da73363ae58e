"""Which pods a scale-down removes: the ReplicaSet controller's choice, steered by pod-deletion-cost.

Without a hint, the ReplicaSet deletes the most recently Ready pod first, however busy it is, and every
request that pod holds is cut off or drains for minutes on a GPU that is already paid for. Before a
scale-down the operator sets `controller.kubernetes.io/pod-deletion-cost` on the target's Ready pods to
the requests each one holds, so the controller removes the idlest ones (as the simulator's fleet does).
The controller still removes pods that are not Ready before any Ready one, whatever their cost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
MAX_COST = 2**31 - 1  # the annotation is an int32


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


def current_cost(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)


def stale_costs(pods: Iterable[Mapping[str, Any]], costs: Mapping[str, int]) -> dict[str, int]:
    """The costs that differ from what the pods carry: only those are written."""
    by_name = {(p.get("metadata") or {}).get("name"): p for p in pods}
    return {pod: cost for pod, cost in costs.items() if pod in by_name and current_cost(by_name[pod]) != str(cost)}


def likely_removed(costs: Mapping[str, int], ready_to_remove: int) -> list[str]:
    """The Ready pods the controller will remove first: the cheapest (ties fall to the controller's own
    order, so a tied pod named here may be spared for another of the same cost)."""
    if ready_to_remove <= 0:
        return []
    return sorted(costs, key=lambda pod: (costs[pod], pod))[:ready_to_remove]
