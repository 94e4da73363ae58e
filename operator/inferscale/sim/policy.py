"""What the simulator asks of a scaling policy: inferscale's own, a baseline, or the oracle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from inferscale.scaling.types import Observation, RateSample


class ScalingPolicy(Protocol):
    name: str
    interval: float  # seconds between two decisions

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        """Desired replica count at `now`. `rate_history` holds the observed request rate, one sample
        per 60 s, oldest first, as the operator reads it with a Prometheus range query."""
        ...


def steers_deletion(policy: ScalingPolicy) -> bool:
    """Whether a scale-down removes the replicas the policy picks: inferscale sets pod-deletion-cost to the
    least loaded (`adapters/deletion_cost.py`); the oracles are bounds. The peers set the replica count
    only, and the ReplicaSet removes the newest Ready pods whatever they serve (none steers it:
    reference/peer-autoscalers.md §8 item 4)."""
    return bool(getattr(policy, "steers_deletion", False))
