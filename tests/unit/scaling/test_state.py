"""ScalerState through status: JSON-safe, exact round-trip, tolerant of garbage."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferscale.scaling import (
    CapacityLow,
    LastTick,
    ScaleEvent,
    ScalerState,
    TimedReplicas,
    state_from_status,
    state_to_status,
)
from inferscale.scaling.state import (
    MAX_CAPACITY_FACTOR,
    MAX_CAPACITY_RPS,
    MAX_TIME_TO_READY,
    MIN_CAPACITY_FACTOR,
    MIN_CAPACITY_RPS,
)

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
states = st.builds(
    ScalerState,
    recommendations=st.lists(st.builds(TimedReplicas, finite, st.integers(0, 10_000))).map(
        lambda xs: tuple(sorted(xs, key=lambda r: r.at))
    ),
    scale_events=st.lists(
        st.builds(ScaleEvent, finite, st.integers(0, 1000), st.integers(0, 1000), st.text(max_size=20))
    ).map(lambda xs: tuple(sorted(xs, key=lambda e: e.at))),
    time_to_ready=st.one_of(st.none(), st.floats(min_value=0.0, max_value=MAX_TIME_TO_READY)),
    capacity_rps=st.one_of(st.none(), st.floats(min_value=MIN_CAPACITY_RPS, max_value=MAX_CAPACITY_RPS)),
    capacity_factor=st.one_of(st.none(), st.floats(min_value=MIN_CAPACITY_FACTOR, max_value=MAX_CAPACITY_FACTOR)),
    last_tick=st.one_of(
        st.none(),
        st.builds(
            LastTick,
            finite,
            st.integers(0, 10_000),
            finite,
            st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e9)),
            st.one_of(st.none(), finite),
        ),
    ),
    capacity_low=st.one_of(
        st.none(),
        st.builds(
            CapacityLow,
            finite,
            st.floats(min_value=MIN_CAPACITY_RPS, max_value=1e6),
            st.one_of(st.none(), st.floats(min_value=MIN_CAPACITY_RPS, max_value=1e6)),
        ),
    ),
)


@given(states)
def test_round_trip_is_exact_through_json(state: ScalerState) -> None:
    status = json.loads(json.dumps(state_to_status(state), allow_nan=False))
    assert state_from_status(status) == state


def test_status_shape() -> None:
    state = ScalerState(
        recommendations=(TimedReplicas(10.0, 3),),
        scale_events=(ScaleEvent(10.0, 2, 3, "KVCacheSaturation"),),
        time_to_ready=95.5,
    )
    assert state_to_status(state) == {
        "recommendations": [{"at": 10.0, "replicas": 3}],
        "scaleEvents": [{"at": 10.0, "from": 2, "to": 3, "reason": "KVCacheSaturation"}],
        "timeToReady": 95.5,
        # null, not omitted: the status merge patch deletes a null key and keeps an omitted one
        "capacityRps": None,
        "capacityFactor": None,
        "lastTick": None,
        "capacityLow": None,
    }
    learned = state_to_status(ScalerState(capacity_rps=40.5, capacity_factor=0.9))
    assert learned["capacityRps"] == 40.5 and learned["capacityFactor"] == 0.9


@pytest.mark.parametrize("obj", [None, "garbage", 42, [], {}, {"recommendations": "x", "scaleEvents": 7}])
def test_unreadable_status_is_an_empty_state(obj: Any) -> None:
    assert state_from_status(obj) == ScalerState()


def test_bad_entries_are_dropped_and_good_ones_kept() -> None:
    obj = {
        "recommendations": [
            {"at": 5.0, "replicas": 2},
            {"at": "yesterday", "replicas": 2},
            {"at": 6.0, "replicas": -1},
            {"at": 7.0, "replicas": True},
            {"at": float("nan"), "replicas": 1},
            "junk",
            {"at": 1.0, "replicas": 4},
        ],
        "scaleEvents": [{"at": 3.0, "from": 1, "to": 2, "reason": "QueueBacklog"}, {"at": 4.0, "from": 1}],
        "timeToReady": -3,
        "capacityRps": "fast",
        "capacityFactor": -1.0,
        "unknownField": {"x": 1},
    }
    state = state_from_status(obj)
    assert state.recommendations == (TimedReplicas(1.0, 4), TimedReplicas(5.0, 2))
    assert state.scale_events == (ScaleEvent(3.0, 1, 2, "QueueBacklog"),)
    assert state.time_to_ready is None and state.capacity_rps is None and state.capacity_factor is None
    # a hand-edited start of 30 years would lead the forecast by as much and make every backlog drain at once
    assert state_from_status({"timeToReady": 1e9}).time_to_ready is None
    assert state_from_status({"timeToReady": 3600}).time_to_ready == 3600.0


def test_last_tick_round_trips_and_a_bad_one_is_dropped() -> None:
    state = ScalerState(last_tick=LastTick(30.0, 4, 10.0, 12.5, 20.0, 25.0, 6, 5.0))
    status = state_to_status(state)
    assert status["lastTick"] == {
        "at": 30.0,
        "ready": 4,
        "readySince": 10.0,
        "waiting": 12.5,
        "backlogSince": 20.0,
        "blindSince": 25.0,
        "capacityAsk": 6,
        "watchedSince": 5.0,
    }
    assert state_from_status(json.loads(json.dumps(status))) == state
    unknown_queue = ScalerState(last_tick=LastTick(30.0, 4, 10.0, None))
    assert state_to_status(unknown_queue)["lastTick"]["waiting"] is None
    assert state_from_status(state_to_status(unknown_queue)) == unknown_queue
    for bad in ({"at": 1.0, "ready": -1, "readySince": 0.0}, {"at": "x", "ready": 1, "readySince": 0.0}, [1]):
        assert state_from_status({"lastTick": bad}).last_tick is None
    for ask in ("6", -1, True, 6.5):  # a hand-edited ask is no reading: the next capacity scale-up waits a tick
        tick = {"at": 30.0, "ready": 4, "readySince": 10.0, "capacityAsk": ask}
        assert state_from_status({"lastTick": tick}).last_tick == LastTick(30.0, 4, 10.0, None)
    for since in ("5", True, float("nan"), None):  # unreadable: read as a watch begun long ago, not a new one
        tick = {"at": 30.0, "ready": 4, "readySince": 10.0, "watchedSince": since}
        assert state_from_status({"lastTick": tick}).last_tick == LastTick(30.0, 4, 10.0, None)


def test_capacity_low_round_trips_and_a_bad_one_is_dropped() -> None:
    state = ScalerState(capacity_low=CapacityLow(120.0, 27.5, 30.25))
    status = state_to_status(state)
    assert status["capacityLow"] == {"since": 120.0, "low": 27.5, "before": 30.25}
    assert state_from_status(json.loads(json.dumps(status))) == state
    assert state_to_status(ScalerState(capacity_low=CapacityLow(120.0, 27.5)))["capacityLow"]["before"] is None
    for bad in ({"since": 1.0, "low": -1.0}, {"since": "x", "low": 1.0}, {"low": 1.0}, [1]):
        assert state_from_status({"capacityLow": bad}).capacity_low is None
    assert state_from_status({"capacityLow": {"since": 1.0, "low": 2.0, "before": "x"}}).capacity_low == CapacityLow(
        1.0, 2.0
    )
