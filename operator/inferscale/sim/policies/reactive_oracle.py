"""The reactive oracle: the oracle without its foresight. A reference, not a peer.

It knows the need of the window it is in exactly (the oracle's count for that window's actual rate and
lengths, with the same burst allowance and 85% headroom) and nothing after its next decision: at every
decision it asks for the largest need until the next one, and releases replicas the moment no window
until then needs them. `margin` multiplies the rate it sizes for (1: the oracle's own count). So it is as good as
any policy that only reacts can be, and it still pays the cold start at every rise, because what it asks
for is Ready a time-to-ready later. Where inferscale reaches more attainment than this reference at the same
GPU-hours, its forecast bought the difference; where it reaches less, the loss is the policy's, not the
traffic's unpredictability.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferscale.scaling.capacity import HEADROOM
from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.oracle import Oracle


class ReactiveOracle(Oracle):
    name = "reactive-oracle"

    def __init__(self, ctx: PolicyContext, margin: float = 1.0) -> None:
        if not (math.isfinite(margin) and margin >= 1.0):
            raise ValueError(f"the reactive oracle's margin must be a number >= 1, got {margin!r}")
        self.margin = margin
        super().__init__(ctx, headroom=HEADROOM / margin)  # its count times the margin

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        return self.replicas_at(now)
