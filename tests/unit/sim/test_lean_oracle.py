"""The lean oracle: the cheapest headroom whose replay still reaches the goal."""

from __future__ import annotations

import pytest
from tests.unit.sim.test_reactive_reference import result

from inferscale.sim.lean_oracle import HEADROOMS, LeanRow, goal_row, leanest, section


class Replays:
    """Attainment falls as the headroom rises (fewer replicas): `attainment[headroom]`."""

    def __init__(self, attainment: dict[float, float]) -> None:
        self.attainment = attainment
        self.asked: list[float] = []

    def __call__(self, headroom: float) -> object:
        self.asked.append(headroom)
        return result(10.0 / headroom, self.attainment[headroom])


def test_the_cheapest_headroom_that_reaches_the_goal_is_kept_and_no_dearer_one_is_run() -> None:
    replays = Replays({1.0: 0.97, 0.95: 0.991, 0.9: 0.999, 0.85: 0.9995})
    lean = leanest(replays, 0.99)  # type: ignore[arg-type]
    assert lean.headroom == 0.95 and lean.tried == 2 and replays.asked == [1.0, 0.95]
    assert lean.result.scores.gpu_hours == pytest.approx(10.0 / 0.95)


def test_a_replay_no_headroom_serves_says_so_rather_than_name_one() -> None:
    replays = Replays(dict.fromkeys(HEADROOMS, 0.9))
    lean = leanest(replays, 0.99)  # type: ignore[arg-type]
    assert lean.headroom is None and lean.tried == len(HEADROOMS) and replays.asked == sorted(HEADROOMS, reverse=True)
    row = LeanRow("trace (request-level)", result(12.0, 0.99), result(11.0, 0.999), lean)
    assert "none of 100%-85% reaches the goal" in "\n".join(section([row]))
    assert goal_row([row], 1.15)[0].endswith("trace (request-level) — |")


def test_inferscale_is_read_against_both_oracles() -> None:
    lean = leanest(Replays({1.0: 0.995}), 0.99, headrooms=(1.0,))  # type: ignore[arg-type]
    row = LeanRow("Azure (request-level)", result(13.0, 0.999), result(12.0, 0.999), lean)
    table = section([row])
    assert "| Azure (request-level) | 99.90% at 12.00 GPU-h | 100%: 99.50% at 10.00 GPU-h |" in "\n".join(table)
    assert table[-2].endswith("| 1.083× | 1.300× |")
    assert "Azure (request-level) 1.300×" in goal_row([row], 1.15)[0]
