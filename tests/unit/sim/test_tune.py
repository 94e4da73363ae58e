from __future__ import annotations

import math

from inferscale.api.spec import Targets
from inferscale.sim.scores import Scores
from inferscale.sim.tune import DEFAULT_CANDIDATES, Trial, best_attainment, cheapest_meeting, still_rising


def scores(attainment: float, gpu_hours: float) -> Scores:
    return Scores(attainment, gpu_hours, 0.1, 0.2, 0.02, 3, 1000, 0)


def trial(cu: float, attainment: float, gpu_hours: float) -> Trial:
    return Trial(cu, (scores(attainment, gpu_hours),))


def test_the_cheapest_trial_that_meets_the_target_is_chosen_over_a_cheaper_one_that_misses() -> None:
    trials = [trial(0.6, 0.999, 30.0), trial(0.7, 0.995, 26.0), trial(0.8, 0.991, 27.0), trial(0.9, 0.97, 22.0)]
    chosen = cheapest_meeting(trials, 0.99)
    assert chosen is not None and chosen.capacity_utilization == 0.7


def test_on_equal_cost_the_value_holding_less_headroom_is_chosen() -> None:
    chosen = cheapest_meeting([trial(0.7, 0.995, 26.0), trial(0.75, 0.995, 26.0)], 0.99)
    assert chosen is not None and chosen.capacity_utilization == 0.75


def test_no_trial_is_recommended_when_none_meets_the_target() -> None:
    assert cheapest_meeting([trial(0.5, 0.98, 40.0), trial(0.8, 0.95, 25.0)], 0.99) is None


def test_a_replay_that_scored_no_request_neither_meets_nor_is_the_best() -> None:
    empty = trial(0.8, math.nan, 1.0)
    assert not empty.meets(0.0)
    assert cheapest_meeting([empty], 0.0) is None
    best = best_attainment([empty, trial(0.5, 0.4, 2.0)])
    assert best is not None and best.capacity_utilization == 0.5
    assert best_attainment([empty]) is None


def test_the_best_attainment_breaks_ties_on_cost() -> None:
    best = best_attainment([trial(0.5, 0.97, 40.0), trial(0.6, 0.97, 35.0), trial(0.9, 0.9, 20.0)])
    assert best is not None and best.capacity_utilization == 0.6


def test_the_default_candidates_include_the_specs_default_and_are_fractions() -> None:
    assert Targets().capacity_utilization in DEFAULT_CANDIDATES
    assert all(0 < v <= 1 for v in DEFAULT_CANDIDATES) and list(DEFAULT_CANDIDATES) == sorted(set(DEFAULT_CANDIDATES))


def test_a_value_meets_the_target_only_if_it_does_on_every_seed_and_costs_its_mean() -> None:
    lucky = Trial(0.8, (scores(0.995, 24.0), scores(0.989, 25.0)))  # one seed under 99%
    steady = Trial(0.75, (scores(0.998, 26.0), scores(0.997, 27.0)))
    assert lucky.attainment == 0.989 and lucky.gpu_hours == 24.5
    chosen = cheapest_meeting([steady, lucky], 0.99)
    assert chosen is steady
    assert best_attainment([lucky, steady]) is steady
    assert math.isnan(Trial(0.8, (scores(0.99, 1.0), scores(math.nan, 1.0))).attainment)


def test_attainment_still_rises_only_when_the_lowest_value_scores_strictly_above_the_next() -> None:
    assert still_rising([trial(0.5, 0.97, 40.0), trial(0.55, 0.96, 35.0)])
    assert not still_rising([trial(0.5, 0.0, 40.0), trial(0.55, 0.0, 35.0)])  # all miss alike: no trend
    assert not still_rising([trial(0.5, 0.97, 40.0)])  # one value shows no trend
    assert not still_rising([trial(0.5, 0.95, 40.0), trial(0.55, 0.96, 35.0)])
