"""Before a scale-down: write each Ready pod's deletion cost, so the ReplicaSet removes the idlest pods."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inferscale.adapters.deletion_cost import ANNOTATION, stale_costs
from inferscale.adapters.kube import KubeApi, KubeError

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


async def write_costs(
    kube: KubeApi,
    namespace: str,
    pods: Iterable[Mapping[str, Any]],
    costs: Mapping[str, int],
    deadline: float,
) -> Written:
    """Patches the pods whose cost changed (or takes off the old costs when `costs` is empty). A pod
    deleted meanwhile (404) is no error: it is already out of the choice."""

    async def one(pod: str, cost: int | None) -> KubeError | None:
        body = {"metadata": {"annotations": {ANNOTATION: None if cost is None else str(cost)}}}
        try:
            await kube.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod}", body, answer=False)
        except KubeError as e:
            return None if e.status == 404 else e
        return None

    due = stale_costs(pods, costs)
    try:
        answers = await asyncio.wait_for(asyncio.gather(*(one(p, c) for p, c in due.items())), deadline)
    except TimeoutError:
        return Written(len(due), [], timed_out=True)
    return Written(len(due), [e for e in answers if e is not None])
