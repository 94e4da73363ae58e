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
