"""The lean oracle: the benchmark's oracle without its safety, to say how much of the GPU-hour reference is it.

The oracle (`policies/oracle.py`) sizes each window for one Poisson deviation more requests than it had, at 85%
of a replica's capacity at the SLO: the headroom inferscale plans with, so that the comparison is about timing
and foresight. A user comparing inferscale with "the fewest replicas that could have served this traffic" asks
for less: the oracle with no Poisson pad and its headroom taken up as far as the replay still reaches the
attainment goal. `leanest` tries headrooms from 100% (each window at exactly its capacity at the SLO) down to
the oracle's own 85% and keeps the first that reaches the goal, so inferscale's GPU-hours can be read against
both references.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inferscale.sim.run import RunResult
from inferscale.sim.scores import share_text as _pct

HEADROOMS = (1.0, 0.95, 0.9, 0.85)  # cheapest first


@dataclass(frozen=True)
class Lean:
    headroom: float | None  # None: no headroom tried reached the goal
    result: RunResult  # the replay at `headroom`, else the last one tried
    tried: int


def leanest(replay: Callable[[float], RunResult], goal: float, headrooms: Sequence[float] = HEADROOMS) -> Lean:
    """The cheapest of `headrooms` whose replay (`replay(headroom)`, the oracle without its Poisson pad) reaches
    `goal` attainment."""
    if not headrooms:
        raise ValueError("the lean oracle needs at least one headroom to try")
    result: RunResult | None = None
    for i, headroom in enumerate(sorted(headrooms, reverse=True), start=1):
        result = replay(headroom)
        result.outcomes = None  # per-request arrays: only the scores are compared
        if result.scores.slo_attainment >= goal:
            return Lean(headroom, result, i)
    assert result is not None
    return Lean(None, result, len(headrooms))


@dataclass(frozen=True)
class LeanRow:
    replay: str
    inferscale: RunResult
    oracle: RunResult
    lean: Lean


def _lean_cell(lean: Lean) -> str:
    s = lean.result.scores
    if lean.headroom is None:
        return f"none of {HEADROOMS[0]:.0%}-{HEADROOMS[-1]:.0%} reaches the goal ({_pct(s.slo_attainment)} at 85%)"
    return f"{lean.headroom:.0%}: {_pct(s.slo_attainment)} at {s.gpu_hours:,.2f} GPU-h"


def _against_lean(row: LeanRow) -> str:
    return f"{row.inferscale.scores.gpu_hours / row.lean.result.scores.gpu_hours:.3f}×" if row.lean.headroom else "—"


def goal_row(rows: Sequence[LeanRow], goal_ratio: float) -> list[str]:
    if not rows:
        return []
    cells = [f"{r.replay} {_against_lean(r)}" for r in rows]
    return [
        f"| inferscale's GPU-h against the lean oracle (no Poisson pad; the cheapest headroom of "
        f"{HEADROOMS[0]:.0%}-{HEADROOMS[-1]:.0%} that reaches 99%), where the goal's ratio is {goal_ratio}× | "
        + "; ".join(cells)
        + " |"
    ]


def section(rows: Sequence[LeanRow]) -> list[str]:
    if not rows:
        return []
    lines = [
        "## The oracle's padding",
        "",
        "The oracle sizes each window for one Poisson deviation more requests than it had, at 85% of a replica's "
        "capacity at the SLO (`sim/policies/oracle.py`), the headroom inferscale plans with: the ratios above "
        "compare timing and foresight at one utilisation target. The lean oracle drops the pad and runs each "
        "window as close to its capacity at the SLO as still reaches 99% (headrooms tried from 100% down to 85%, "
        "`sim/lean_oracle.py`): the fewest GPU-hours these replays can be served with by a policy that knows the "
        "future, and inferscale's ratio to it is what a user comparing with \"the fewest replicas that could have "
        'served this" reads.',
        "",
        "| replay | oracle | lean oracle (headroom: attainment at GPU-h) | inferscale | inferscale × oracle "
        "| inferscale × lean oracle |",
        "|---|---|---|---|---:|---:|",
    ]
    for r in rows:
        me, oracle = r.inferscale.scores, r.oracle.scores
        lines.append(
            f"| {r.replay} | {_pct(oracle.slo_attainment)} at {oracle.gpu_hours:,.2f} GPU-h | {_lean_cell(r.lean)} "
            f"| {_pct(me.slo_attainment)} at {me.gpu_hours:,.2f} GPU-h | {me.gpu_hours / oracle.gpu_hours:.3f}× "
            f"| {_against_lean(r)} |"
        )
    return [*lines, ""]
