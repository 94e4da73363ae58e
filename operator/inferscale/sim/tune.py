"""Choosing `spec.targets.capacityUtilization` by replaying the user's own traffic at several values.

How much standing headroom a fleet needs is a property of its traffic: how far demand moves within one
cold start. No single default suits every trace (docs/where-inferscale-loses.md, "Standing headroom"), so
the answer is measured: the same replay at each candidate value, and the cheapest that meets the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from inferscale.sim.policies import PolicyContext, make_policy
from inferscale.sim.policies.inferscale import Inferscale
from inferscale.sim.policy import ScalingPolicy
from inferscale.sim.scores import Scores

# 0.50 to 0.95: the default (0.80) among them; below half, a fleet is mostly spare
DEFAULT_CANDIDATES = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))


@dataclass(frozen=True)
class Trial:
    """One value replayed once per seed."""

    capacity_utilization: float
    runs: tuple[Scores, ...]

    @property
    def attainment(self) -> float:
        """The lowest seed's: a value is only as good as its worst replay."""
        return lowest_attainment(self.runs)

    @property
    def gpu_hours(self) -> float:
        return sum(r.gpu_hours for r in self.runs) / len(self.runs) if self.runs else math.nan

    def meets(self, target_attainment: float) -> bool:
        return not math.isnan(self.attainment) and self.attainment >= target_attainment


def lowest_attainment(runs: Sequence[Scores]) -> float:
    """The worst replay's attainment; NaN if any replay scored no request (unknown is not a score)."""
    values = [r.slo_attainment for r in runs]
    return math.nan if not values or any(math.isnan(v) for v in values) else min(values)


def inferscale_at(ctx: PolicyContext, capacity_utilization: float) -> ScalingPolicy:
    """inferscale as the operator runs it, with this `capacityUtilization` in its spec."""
    return make_policy(Inferscale.name, replace(ctx, capacity_utilization=capacity_utilization))


def cheapest_meeting(trials: Sequence[Trial], target_attainment: float) -> Trial | None:
    """The trial that meets the target on every seed with the fewest GPU-hours (mean over seeds); on a tie,
    the higher value (less headroom held for the same cost). None when no trial meets it: a value that
    misses is never recommended."""
    meeting = [t for t in trials if t.meets(target_attainment)]
    return min(meeting, key=lambda t: (t.gpu_hours, -t.capacity_utilization), default=None)


def best_attainment(trials: Sequence[Trial]) -> Trial | None:
    """The trial with the highest attainment; on a tie, the cheaper. None when no trial has one."""
    scored = [t for t in trials if not math.isnan(t.attainment)]
    return max(scored, key=lambda t: (t.attainment, -t.gpu_hours), default=None)


def still_rising(trials: Sequence[Trial]) -> bool:
    """Whether the lowest value tried (trials in increasing order) scores strictly above the next: lower
    values, more headroom, may then reach what these did not."""
    return len(trials) >= 2 and trials[0].attainment > trials[1].attainment
