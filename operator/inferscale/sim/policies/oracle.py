"""The oracle: it knows the future and provisions exactly ahead of it. The reference for GPU-hours.

For every 60-s window of the trace (or each window of a given rate curve) it computes the fewest
replicas that meet the SLO for that window's actual requests: the window's rate and mean input/output
lengths against `replica_capacity_rps` (whose TTFT P95 already accounts for Poisson queueing).
Burstiness within the window beyond that is covered by one Poisson standard deviation of headroom on
the count (n + sqrt(n) requests instead of n), small for busy windows and large for sparse ones.
At time t it returns the largest need over [t + time_to_ready, t + time_to_ready + interval], so new
replicas are Ready exactly when their window starts and a replica is released as soon as it is no
longer needed one time-to-ready ahead. Beyond the end of the trace the need is min_replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext

WINDOW = 60.0


class Oracle:
    name = "oracle"

    def __init__(self, ctx: PolicyContext, window: float = WINDOW) -> None:
        self.interval = ctx.interval
        self.lead = ctx.time_to_ready
        curve = ctx.load_curve(window)
        self.window = curve[1].t - curve[0].t if len(curve) > 1 else window
        self.start = curve[0].t
        self.needs = [self._need(ctx, p.rate, p.mean_input, p.mean_output) for p in curve]
        self.clamp = ctx.clamp

    def _need(self, ctx: PolicyContext, rate: float, mean_in: float | None, mean_out: float | None) -> int:
        if rate <= 0 or mean_in is None or mean_out is None:
            return ctx.clamp(0)
        n = rate * self.window
        burst_rate = (n + math.sqrt(n)) / self.window
        return ctx.clamp(ctx.replicas_for(burst_rate, mean_in, mean_out))

    def replicas_at(self, t: float) -> int:
        """Replicas needed from `t` to `t + interval` (no lead)."""
        first = math.floor((t - self.start) / self.window)
        last = math.ceil((t + self.interval - self.start) / self.window) - 1
        needs = [self.needs[i] for i in range(max(first, 0), min(last, len(self.needs) - 1) + 1)]
        return max(needs) if needs else self.clamp(0)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        return self.replicas_at(now + self.lead)
