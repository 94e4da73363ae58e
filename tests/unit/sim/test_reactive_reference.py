"""The margin search that puts the reactive oracle at a GPU-hour budget."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from inferscale.sim.reactive_reference import MAX_RUNS, TOLERANCE, at_budget
from inferscale.sim.run import RunResult, Timeline
from inferscale.sim.scores import Scores


def result(gpu_hours: float, attainment: float = 0.95) -> RunResult:
    return RunResult("reactive-oracle", Scores(attainment, gpu_hours, 0.1, 0.2, 0.01, 3, 1000, 0), Timeline(), 1.0)


class Replays:
    """A replay whose GPU-hours follow `cost(margin)`, counting the margins asked for."""

    def __init__(self, cost: Callable[[float], float]) -> None:
        self.cost = cost
        self.margins: list[float] = []

    def __call__(self, margin: float) -> RunResult:
        self.margins.append(margin)
        return result(self.cost(margin), attainment=min(1.0, 0.9 + 0.05 * margin))


@pytest.mark.parametrize(
    ("cost", "within"),
    [
        (lambda m: 100.0 * m, TOLERANCE),  # in proportion: one secant step
        (lambda m: 80.0 + 20.0 * m**2, TOLERANCE),  # convex
        (lambda m: 100.0 * math.ceil(10 * m) / 10, 0.05),  # steps of 10 GPU-h, as whole replicas make them
    ],
)
def test_the_search_lands_within_tolerance_of_the_budget(cost: Callable[[float], float], within: float) -> None:
    replays = Replays(cost)
    found = at_budget(replays, 123.0, result(cost(1.0)))
    assert abs(found.off_budget) <= within and len(replays.margins) <= MAX_RUNS
    assert found.result.scores.gpu_hours == pytest.approx(cost(found.margin))
    assert found.budget_gpu_hours == 123.0


def test_a_proportional_cost_needs_a_single_replay() -> None:
    replays = Replays(lambda m: 100.0 * m)
    found = at_budget(replays, 130.0, result(100.0))
    assert replays.margins == [pytest.approx(1.3)] and found.off_budget == pytest.approx(0.0)


def test_a_budget_under_the_margin_one_cost_keeps_margin_one() -> None:
    replays = Replays(lambda m: 100.0 * m)
    first = result(100.0)
    found = at_budget(replays, 90.0, first)
    assert found.margin == 1.0 and found.result is first and replays.margins == []
    assert found.off_budget == pytest.approx(100.0 / 90.0 - 1.0)


def test_the_closest_replay_is_kept_when_the_steps_miss_the_budget() -> None:
    replays = Replays(lambda m: 100.0 if m < 1.5 else 200.0)  # nothing between 100 and 200 GPU-h
    found = at_budget(replays, 140.0, result(100.0))
    assert found.result.scores.gpu_hours == 100.0 and len(replays.margins) <= MAX_RUNS


@pytest.mark.parametrize("budget", [0.0, -1.0, math.nan, math.inf])
def test_a_budget_that_is_not_a_positive_number_is_refused(budget: float) -> None:
    with pytest.raises(ValueError, match="budget"):
        at_budget(Replays(lambda m: m), budget, result(1.0))
