"""Before a scale-down: write each Ready pod's deletion cost, so the ReplicaSet removes the idlest pods."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from inferscale.adapters.deletion_cost import ANNOTATION, stale_costs
from inferscale.adapters.kube import KubeApi, KubeError


async def write_costs(
    kube: KubeApi, namespace: str, pods: Iterable[Mapping[str, Any]], costs: Mapping[str, int]
) -> tuple[int, list[KubeError]]:
    """Patches the pods whose cost changed; returns how many were due and the errors. A pod deleted
    meanwhile (404) is no error: it is already out of the choice."""

    async def one(pod: str, cost: int) -> KubeError | None:
        body = {"metadata": {"annotations": {ANNOTATION: str(cost)}}}
        try:
            await kube.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod}", body, answer=False)
        except KubeError as e:
            return None if e.status == 404 else e
        return None

    due = stale_costs(pods, costs)
    answers = await asyncio.gather(*(one(pod, cost) for pod, cost in due.items()))
    return len(due), [e for e in answers if e is not None]
