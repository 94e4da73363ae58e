from __future__ import annotations

import pytest

from inferscale.scaling import Release, TimedReplicas
from inferscale.scaling.stabilization import held, holding, stabilize

WINDOW = 300.0


@pytest.mark.parametrize(
    ("at", "replicas", "desired", "release", "expected"),
    [
        (100.0, 34, 17, Release.HOLD, 34),  # whole for the whole window
        (100.0, 34, 17, Release.LINEAR, 26),  # half the window gone: 17 + 17 x 0.5 = 25.5, rounded up
        (250.0, 34, 17, Release.LINEAR, 34),  # recommended now: all of it
        (0.0, 34, 17, Release.LINEAR, 18),  # a tick before the window ends: 17.57
        (150.0, 10, 12, Release.LINEAR, 10),  # below today's recommendation: nothing to release
        (150.0, 10, 1, Release.LINEAR, 7),  # 1 + 9 x (1 - 100/300) is 7.000000000000001 in floats: 7, not 8
    ],
)
def test_a_recommendation_holds_whole_or_released_linearly(
    at: float, replicas: int, desired: int, release: Release, expected: int
) -> None:
    now = 250.0 if at != 0.0 else 290.0
    assert held(TimedReplicas(at, replicas), desired, now, WINDOW, release) == expected


def test_the_holder_is_the_recommendation_that_holds_most_now() -> None:
    # 30 long ago holds less than 24 a moment ago: 10 + 20 x 0.1 = 12 against 10 + 14 x 0.9 = 22.6
    history = [TimedReplicas(20.0, 30), TimedReplicas(260.0, 24), TimedReplicas(280.0, 8)]
    assert holding(10, history, 290.0, WINDOW, Release.LINEAR) == (23, TimedReplicas(260.0, 24))
    assert holding(10, history, 290.0, WINDOW, Release.HOLD) == (30, TimedReplicas(20.0, 30))
    assert holding(30, history, 290.0, WINDOW, Release.LINEAR) is None  # nothing above today's 30
    assert holding(10, history, 400.0, WINDOW, Release.HOLD) == (24, TimedReplicas(260.0, 24))  # 30 aged out


def test_stabilize_steps_down_through_the_window_when_released_linearly() -> None:
    history = [TimedReplicas(0.0, 20)]
    hold = [stabilize(4, 20, history, t, 0.0, WINDOW) for t in (60.0, 150.0, 240.0, 299.0, 300.0)]
    linear = [stabilize(4, 20, history, t, 0.0, WINDOW, Release.LINEAR) for t in (60.0, 150.0, 240.0, 299.0, 300.0)]
    assert hold == [20, 20, 20, 20, 4]
    assert linear == [17, 12, 8, 5, 4]  # 4 + 16 x (1 - t/300), rounded up
    # a scale-up is never held back by the release
    assert stabilize(25, 20, history, 60.0, 0.0, WINDOW, Release.LINEAR) == 25
