"""The deletion costs of pods inferscale no longer scales are taken off.

A cost steers every later scale-down of its ReplicaSet, whoever makes it. Left on the pods of a service
that was deleted, switched to Advisory or stood down for an HPA, it would rank them by the loads of a
scale-down long past, unseen by whoever scales them now (an HPA, `kubectl scale`). So at the end of each
tick the costs inferscale wrote (`adapters.deletion_cost.OWNER`) come off every pod that no Active
InferenceService scales; a cost someone else set is left as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from inferscale.adapters.deletion_cost import owned_cost
from inferscale.adapters.kube import KubeError
from inferscale.adapters.workload import conflicting_autoscalers, selector_matches
from inferscale.handlers import metrics
from inferscale.handlers.collector import Obj, Tick
from inferscale.handlers.runtime import Runtime
from inferscale.handlers.scale_down import patch_cost
from inferscale.handlers.status import first_few

BATCH = 100  # pods released per tick: a fleet stood down at once is released over a few ticks, not in a burst
DEADLINE = 5.0  # the releases come after the tick's decisions; past this the rest wait for the next tick


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def unsteered(tick: Tick) -> list[Obj]:
    """The pods carrying inferscale's cost that no Active InferenceService scales: its target is scaled by
    an HPA or a ScaledObject, or no valid Active service names it. A named target that does not exist
    protects nothing: the tick's view comes from caches in sync (or a fresh list), so no pod is its."""
    steered: dict[str, list[Obj]] = {}
    for ns, target in tick.services_by_target:
        if conflicting_autoscalers(ns, "Deployment", target, tick.hpas, tick.scaled_objects):
            continue  # the service stands down (Conflict): the other autoscaler scales these pods
        deployment = tick.deployments.get((ns, target))
        if deployment is not None:
            steered.setdefault(ns, []).append((deployment.get("spec") or {}).get("selector") or {})
    return [
        pod
        for ns, pods in sorted(tick.pods.items())
        for pod in pods
        if owned_cost(pod)
        and not _meta(pod).get("deletionTimestamp")
        and not any(selector_matches(sel, _meta(pod).get("labels") or {}) for sel in steered.get(ns, ()))
    ]


async def release_costs(rt: Runtime, tick: Tick) -> int:
    """Takes inferscale's cost off the unsteered pods (`BATCH` at most); returns how many were released. A
    pod whose patch is refused for good (a 403 once the grant is gone) is not tried again while the operator
    runs; one that failed for a reason that may pass is tried at the next tick."""
    if not rt.deletion_cost or tick.kube_error is not None:
        return 0  # without a fresh view, a service's pods could be taken for another's
    due = [p for p in unsteered(tick) if str(_meta(p).get("uid")) not in rt.refused_releases][:BATCH]
    if not due:
        return 0
    try:
        answers: Sequence[KubeError | None] = await asyncio.wait_for(
            asyncio.gather(
                *(patch_cost(rt.kube, _meta(p).get("namespace", ""), _meta(p).get("name", ""), None) for p in due)
            ),
            DEADLINE,
        )
    except TimeoutError:
        rt.logger.info("taking inferscale's deletion cost off %d pod(s) timed out; trying at the next tick", len(due))
        return 0
    failed = [(pod, e) for pod, e in zip(due, answers, strict=True) if e is not None]
    if failed:
        metrics.KUBE_ERRORS.labels("deletion_cost_release").inc(len(failed))
        refused = [(pod, e) for pod, e in failed if not e.transient]
        rt.refused_releases.update(str(_meta(pod).get("uid")) for pod, _ in refused)
        if refused:
            pod, e = refused[0]
            rt.logger.warning(
                "could not take inferscale's deletion cost off %d pod(s) no InferenceService scales (%s/%s: %s); "
                "not tried again until the operator restarts",
                len(refused),
                _meta(pod).get("namespace"),
                _meta(pod).get("name"),
                e,
            )
    released = len(due) - len(failed)
    if released:
        names = [
            f"{_meta(p).get('namespace')}/{_meta(p).get('name')}" for p, e in zip(due, answers, strict=True) if not e
        ]
        rt.logger.info(
            "took inferscale's deletion cost off %d pod(s) no InferenceService scales: %s", released, first_few(names)
        )
    return released
