"""Static provisioning for the peak: what a team without an autoscaler runs.

The replica count that serves the trace's 1-minute peak request rate at the SLO (peak rate /
`replica_capacity_rps` at the trace's mean lengths, rounded up), all the time, with the same 85 %
planning headroom (`scaling.capacity.HEADROOM`) as the oracle and inferscale: capacity at the SLO is
the edge where TTFT P95 equals the target, and a fleet sized exactly there misses the SLO at the very
peak it was sized for (measured on ServeGen m-mid, 1 h at time-scale 24 and rate-scale 0.3: 81.7 %
attainment at 0.92x the oracle's GPU-hours without it). It looks at the trace by definition: the peak
is what such a team sizes for from its own history. The fleet starts at the warm count every policy
gets (`scenario._sized`), so it ramps to `replicas` at its first decision and pays that cold start.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferscale.scaling.capacity import HEADROOM
from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext

PEAK_WINDOW = 60.0
INTERVAL = 60.0


def peak_replicas(ctx: PolicyContext, window: float = PEAK_WINDOW) -> int:
    peak = max(p.rate for p in ctx.load_curve(window))
    return ctx.clamp(ctx.replicas_for(peak / HEADROOM, ctx.mean_input_tokens, ctx.mean_output_tokens))


class StaticPeak:
    name = "static-peak"

    def __init__(self, ctx: PolicyContext) -> None:
        self.interval = INTERVAL
        self.replicas = peak_replicas(ctx)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        return self.replicas
