"""Which decisions are worth a line: the operator's log and a replay's decisions file keep the same ones.

A line per tick buries the few that matter, so a steady run of identical holds is told once. But a
service whose SLO is missed while the operator holds (its replicas pending, a limit, a dead-band) would
then go quiet exactly when an SRE is reading: "is it still breached, and is it still waiting for the
same replicas?" Such a hold is told again every `HEARTBEAT`.
"""

from __future__ import annotations

from inferscale.scaling.types import Decision

HEARTBEAT = 60.0  # seconds between lines of an unchanged decision while the SLO is missed


def worth_telling(decision: Decision, before: tuple[object, object] | None, told_at: float | None, now: float) -> bool:
    """Whether `decision` is worth a line, after the decision last told (`before`: its reason and replica
    count, as written, which a hand-edited status may hold anything as; None when none was) at `told_at`."""
    if decision.changed or before != (decision.reason.value, decision.replicas):
        return True
    # a clock stepped back tells again rather than staying quiet through a breach
    return decision.slo_met is False and (told_at is None or not 0.0 <= now - told_at < HEARTBEAT)
