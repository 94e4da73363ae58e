"""Which decisions are worth a line: the operator's log and a replay's decisions file keep the same ones.

A line per tick buries the few that matter. So a line is written for a scale, for a new count, for a
breach that begins or ends, and for a reason that is not routine (metrics missing, a limit): `kubectl
logs` then reads as the service's scaling history, as HPA's events do. A hold at the count last told for
a routine reason (within tolerance, a scale-down window, replicas pending, a second reading awaited) is
not news, however its reason flips from tick to tick as the per-replica capacity swings: an hour of Azure at
the bench's scale told 155 lines, 119 of them such flips, and tells 38 now, 35 of them scales. The status
keeps each tick's reason for whoever wants it.

But a service whose SLO is missed while the operator holds would then go quiet exactly when an SRE is
reading: "is it still breached, and is it still waiting for the same replicas?" Such a hold is told again
every `HEARTBEAT`.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferscale.scaling.types import Decision, Reason

HEARTBEAT = 60.0  # seconds between lines of a held count while the SLO is missed

# holds on a count that is right, or on a change already under way: their reason is the status's, not news
ROUTINE = frozenset(
    r.value
    for r in (
        Reason.CURRENT,
        Reason.WITHIN_TOLERANCE,
        Reason.STABILIZING,
        Reason.UP_STABILIZING,
        Reason.SCALE_UP_PENDING,
        Reason.CONSOLIDATION_REFUSED,
        Reason.CAPACITY,
        Reason.KV_CACHE,
        Reason.QUEUE,
        Reason.SCHEDULE,
    )
)


@dataclass(frozen=True)
class Told:
    """The decision last told: its reason, the count it left, whether the SLO was met then, and when."""

    reason: str
    replicas: int
    slo_met: bool | None
    at: float

    @classmethod
    def of(cls, decision: Decision, now: float) -> Told:
        return cls(decision.reason.value, decision.replicas, decision.slo_met, now)


def worth_telling(decision: Decision, told: Told | None, now: float) -> bool:
    """Whether `decision` is worth a line, after `told` (None when nothing was told yet: a new process tells
    where it stands)."""
    if decision.changed or told is None or decision.replicas != told.replicas:
        return True
    if (decision.slo_met is False) != (told.slo_met is False):
        return True  # a breach begins, or ends
    reason = decision.reason.value
    if reason != told.reason and not (reason in ROUTINE and told.reason in ROUTINE):
        return True
    # a clock stepped back tells again rather than staying quiet through a breach
    return decision.slo_met is False and not 0.0 <= now - told.at < HEARTBEAT
