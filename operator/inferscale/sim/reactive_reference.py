"""The reactive oracle at a GPU-hour budget: the most a policy that only reacts can reach at that cost.

The reactive oracle (`policies/reactive_oracle.py`) knows each window's need the moment the window
starts and nothing later. Its replicas times a margin buy attainment with GPU-hours, so for any budget
there is a margin that spends it. The benchmark asks it at two budgets:

- inferscale's GPU-hours: above its attainment there, inferscale's forecast bought the difference; below,
  the loss is the policy's (late observation, holds), not the traffic's;
- the goal's 1.15x the oracle's GPU-hours: if it misses 99% there, no policy without foresight of the
  traffic (a schedule, a release calendar) meets the goal on that replay.

The margin is found by the secant method on the margin (GPU-hours grow about in proportion to it; a
step that leaves the bracket the runs so far have found is replaced by bisection), in at most
`MAX_RUNS` replays after the margin-1 one, stopping within `TOLERANCE` of the budget. The replay closest
to the budget is kept and its own GPU-hours reported: the comparison is as exact as the count's steps
allow, and says how exact it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from inferscale.sim.run import RunResult

MAX_RUNS = 5
TOLERANCE = 0.005  # relative distance to the budget that ends the search
MAX_MARGIN = 4.0


@dataclass(frozen=True)
class AtBudget:
    budget_gpu_hours: float
    margin: float
    result: RunResult

    @property
    def off_budget(self) -> float:
        """The kept replay's GPU-hours over the budget, minus one (0.01: 1% over)."""
        return self.result.scores.gpu_hours / self.budget_gpu_hours - 1.0


def at_budget(replay: Callable[[float], RunResult], budget: float, first: RunResult) -> AtBudget:
    """The reactive oracle's replay whose GPU-hours are closest to `budget`: `replay(margin)` runs it at a
    margin, `first` is its run at margin 1. A budget below that run's GPU-hours keeps margin 1 (the
    reactive oracle spends at least that much)."""
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"a GPU-hour budget must be a positive number, got {budget!r}")
    tried: list[tuple[float, RunResult]] = [(1.0, first)]
    if first.scores.gpu_hours >= budget:
        return AtBudget(budget, 1.0, first)
    for _ in range(MAX_RUNS):
        margin, result = min(tried, key=lambda t: abs(t[1].scores.gpu_hours - budget))
        if abs(result.scores.gpu_hours / budget - 1.0) <= TOLERANCE:
            break
        nxt = _next_margin(tried, budget)
        if nxt is None or any(math.isclose(nxt, m) for m, _ in tried):
            break
        result = replay(nxt)
        result.outcomes = None  # per-request arrays: only the scores are compared
        tried.append((nxt, result))
    margin, result = min(tried, key=lambda t: abs(t[1].scores.gpu_hours - budget))
    return AtBudget(budget, margin, result)


def _next_margin(tried: list[tuple[float, RunResult]], budget: float) -> float | None:
    """The secant step through the two runs nearest the budget, kept inside the bracket (bisection)."""
    points = sorted((m, r.scores.gpu_hours) for m, r in tried)
    below = [(m, g) for m, g in points if g < budget]
    above = [(m, g) for m, g in points if g >= budget]
    lo = max(below) if below else None
    hi = min(above) if above else None
    if lo is not None and hi is not None:
        (m0, g0), (m1, g1) = lo, hi
        guess = m0 + (budget - g0) * (m1 - m0) / (g1 - g0) if g1 > g0 else (m0 + m1) / 2
        inside = min(m0, m1) < guess < max(m0, m1)
        return guess if inside else (m0 + m1) / 2
    if lo is None:
        return None  # every run is over the budget: margin 1 already was
    m0, g0 = lo
    # only runs under the budget: GPU-hours about in proportion to the margin
    guess = m0 * budget / g0 if g0 > 0 else MAX_MARGIN
    return min(guess, MAX_MARGIN) if guess > m0 else None
