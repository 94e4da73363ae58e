"""The oracle: it knows the future and provisions exactly ahead of it. The reference for GPU-hours.

For every 60-s window of the trace (or each window of a given rate curve) it computes the fewest
replicas that meet the SLO for that window's actual requests: the window's rate and mean input/output
lengths against `replica_capacity_rps` (whose TTFT P95 already accounts for Poisson queueing).
Safety, documented: (1) one Poisson standard deviation on the count (n + sqrt(n) requests instead of
n), for sparse windows; (2) the replicas run at most at `scaling.capacity.HEADROOM` (85 %) of that
capacity, the planning headroom inferscale itself uses. Capacity at the SLO is the edge where TTFT P95
equals the target: a fleet sized exactly there cannot drain the backlog a burst, a heavier-than-mean
window or the previous window leaves (measured on Azure conv x40, `inferscale simulate` defaults:
94.6 % attainment at 8.7 GPU-h without (2), 99.6 % at 10.1 GPU-h with it). Sharing inferscale's
headroom makes the comparison about timing and foresight, not about a different utilisation target.
At time t it returns the largest need over [t, t + lead + interval], the lead being the context's
`time_to_ready_max` (else its mean time-to-ready): a replica asked for at t is Ready by the time the
window at t + lead starts, and a replica is released as soon as no
window from now to then needs it. (Taking only [t + ttr, t + ttr + interval] would delete, at t, replicas
still needed before t + ttr, and cancel pending ones created for a peak inside the lead time.) Beyond
the end of the trace the need is min_replicas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferscale.scaling.capacity import HEADROOM
from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext

WINDOW = 60.0


class Oracle:
    name = "oracle"
    steers_deletion = True  # a bound: it loses nothing to the ReplicaSet's choice of pods

    def __init__(
        self, ctx: PolicyContext, window: float = WINDOW, headroom: float = HEADROOM, poisson_pad: bool = True
    ) -> None:
        """`headroom` and `poisson_pad`: the safety above (the benchmark's lean oracle, `sim/lean_oracle.py`,
        takes them off to find how little a replay can be served with)."""
        if not 0 < headroom <= 1:
            raise ValueError(f"the oracle's headroom is a share of capacity in (0, 1], got {headroom!r}")
        self.headroom, self.poisson_pad = headroom, poisson_pad
        self.interval = ctx.interval
        self.lead = ctx.time_to_ready if ctx.time_to_ready_max is None else ctx.time_to_ready_max
        curve = ctx.load_curve(window)
        self.window = curve[1].t - curve[0].t if len(curve) > 1 else window
        self.start = curve[0].t
        self.needs = [self._need(ctx, p.rate, p.mean_input, p.mean_output) for p in curve]
        self.clamp = ctx.clamp

    def _need(self, ctx: PolicyContext, rate: float, mean_in: float | None, mean_out: float | None) -> int:
        if rate <= 0 or mean_in is None or mean_out is None:
            return ctx.clamp(0)
        n = rate * self.window
        burst_rate = (n + math.sqrt(n)) / self.window if self.poisson_pad else rate
        return ctx.clamp(ctx.replicas_for(burst_rate / self.headroom, mean_in, mean_out))

    def replicas_at(self, t: float, until: float | None = None) -> int:
        """Replicas needed from `t` to `until` (default `t + interval`), without lead."""
        end = t + self.interval if until is None else until
        first = math.floor((t - self.start) / self.window)
        last = math.ceil((end - self.start) / self.window) - 1
        needs = [self.needs[i] for i in range(max(first, 0), min(last, len(self.needs) - 1) + 1)]
        return max(needs) if needs else self.clamp(0)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        return self.replicas_at(now, now + self.lead + self.interval)
