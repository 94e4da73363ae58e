"""status.scaler as the operator really keeps it: written with a JSON merge patch, edited by hand,
written by a skewed clock. Whatever it holds, the next decision reads it safely."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given
from tests.unit.handlers.test_reconcile import merged
from tests.unit.scaling.helpers import observe
from tests.unit.scaling.test_state import states

from inferscale.handlers.status import has_news
from inferscale.scaling import (
    CapacityLow,
    LastTick,
    MetricsState,
    Observation,
    Policy,
    RateSample,
    Release,
    ScalerState,
    ScaleRule,
    decide,
    state_from_status,
    state_to_status,
)

NOW = 1_800_000_000.0


def _obs(at: float, waiting: float | None, current: int = 4, kv: float = 0.5) -> Observation:
    return observe(current, kv, waiting, at=at, request_rate=20.0, ttft_p95=0.3)


# D3: the merge patch keeps every key it omits, so a value that became unknown must be sent as null.


@given(states, states)
def test_a_state_written_over_another_by_merge_patch_reads_back_as_the_new_one(
    old: ScalerState, new: ScalerState
) -> None:
    stored = merged(merged({}, state_to_status(old)), state_to_status(new))
    assert state_from_status(stored) == new


def test_a_backlog_that_ended_is_not_read_back_from_the_merge_patched_status() -> None:
    pol = Policy(min_replicas=1, max_replicas=40, capacity_prior_rps=10.0)
    status: dict[str, Any] = {}
    backlog_since = []
    for at, waiting in ((NOW, 40.0), (NOW + 10, 0.0)):
        d = decide(_obs(at, waiting), pol, state_from_status(status), at)
        status = merged(status, state_to_status(d.state))
        backlog_since.append(state_from_status(status).last_tick.backlog_since)  # type: ignore[union-attr]
    assert backlog_since == [NOW, None]


def test_unknown_figures_are_deleted_from_the_merge_patched_status() -> None:
    known = ScalerState(
        capacity_rps=30.0,
        capacity_factor=0.9,
        time_to_ready=120.0,
        last_tick=LastTick(NOW, 4, NOW - 60, 12.0, NOW - 30),
        capacity_low=CapacityLow(NOW - 60, 25.0, 28.0),
    )
    unknown = ScalerState(last_tick=LastTick(NOW + 10, 4, NOW - 60, None, None), capacity_low=CapacityLow(NOW, 25.0))
    stored = merged(state_to_status(known), state_to_status(unknown))
    assert stored["lastTick"] == {"at": NOW + 10, "ready": 4, "readySince": NOW - 60}
    assert stored["capacityLow"] == {"since": NOW, "low": 25.0}
    assert not {"capacityRps", "capacityFactor", "timeToReady"} & stored.keys()
    assert state_from_status(stored) == unknown


def test_a_null_and_a_missing_key_are_no_news_so_a_steady_status_is_not_rewritten() -> None:
    def tick(at: float) -> dict[str, Any]:
        return {"scaler": state_to_status(ScalerState(last_tick=LastTick(at, 4, NOW - 600, 0.0, None)))}

    stored = merged({}, tick(NOW))  # as the API server keeps it: the nulls are gone
    assert "backlogSince" not in stored["scaler"]["lastTick"]
    assert not has_news(stored, tick(NOW + 10))
    ended = merged({"scaler": state_to_status(ScalerState(last_tick=LastTick(NOW, 4, NOW - 600, 40.0, NOW)))}, {})
    assert has_news(ended, tick(NOW + 10))  # a backlog that ended is news, once
    assert not has_news(merged(ended, tick(NOW + 10)), tick(NOW + 20))


# D4: a learned capacity is a divisor; a stored 0, subnormal or absurd one is read as absent.


def test_an_unusable_learned_capacity_is_read_as_absent() -> None:
    for bad in (0, 0.0, 1e-310, 1e-9, 1e308, 2**62, -1.0, float("inf"), True, "x"):
        state = state_from_status({"capacityRps": bad, "capacityFactor": bad})
        assert state.capacity_rps is None and state.capacity_factor is None, bad
    state = state_from_status({"capacityRps": 40.5, "capacityFactor": 0.9})
    assert state.capacity_rps == 40.5 and state.capacity_factor == 0.9


def test_a_zero_capacity_in_status_does_not_crash_a_scale_down() -> None:
    obs = observe(4, 0.1, 0.0, at=NOW, request_rate=5.0)
    recs = [{"at": NOW - 600, "replicas": 4}, {"at": NOW - 400, "replicas": 1}]
    for scaler, prior in (({"capacityRps": 0}, None), ({"capacityRps": 0.0, "capacityFactor": 0.0}, 20.0)):
        d = decide(
            obs, Policy(1, 8, capacity_prior_rps=prior), state_from_status({"recommendations": recs, **scaler}), NOW
        )
        assert 1 <= d.replicas < 4


def test_any_status_scaler_read_back_decides_without_raising() -> None:
    rnd = random.Random(7)
    times = [NOW, NOW + 1e6, NOW - 1e6, NOW - 30, NOW + 30]
    choices = [0, 0.0, -1, 1, 3, 1e-310, 1e-9, 0.5, 7.0, 1e9, 1e308, *times, 2**62, True, None, "x", float("nan")]

    def num() -> Any:
        return rnd.choice(choices)

    def scaler() -> dict[str, Any]:
        d: dict[str, Any] = {k: num() for k in ("timeToReady", "capacityRps", "capacityFactor") if rnd.random() < 0.9}
        if rnd.random() < 0.7:
            d["recommendations"] = [
                {"at": num(), "replicas": rnd.choice([0, 1, 3, 8, 2**62, -1])} for _ in range(rnd.randint(0, 4))
            ]
        if rnd.random() < 0.7:
            d["scaleEvents"] = [
                {"at": num(), "from": rnd.choice([0, 1, 4, 2**62]), "to": rnd.choice([0, 2, 8, 2**62]), "reason": "x"}
                for _ in range(rnd.randint(0, 4))
            ]
        if rnd.random() < 0.6:
            d["lastTick"] = {
                "at": num(),
                "ready": rnd.choice([0, 1, 4, 2**62]),
                "readySince": num(),
                "waiting": num(),
                "backlogSince": num(),
            }
        if rnd.random() < 0.6:
            d["capacityLow"] = {"since": num(), "low": num(), "before": num()}
        return d

    for _ in range(3000):
        status = scaler()
        obs = observe(
            rnd.choice([0, 1, 4, 8]),
            rnd.choice([None, 0.05, 0.5, 0.95]),
            rnd.choice([None, 0.0, 50.0]),
            at=NOW,
            ready_replicas=rnd.choice([0, 1, 4]),
            pods_reporting=4,
            state=rnd.choice([MetricsState.COMPLETE, MetricsState.PARTIAL, MetricsState.MISSING]),
            request_rate=rnd.choice([None, 0.0, 5.0, 500.0]),
            ttft_p95=rnd.choice([None, 0.2, 2.0]),
        )
        pol = Policy(1, 16, capacity_prior_rps=rnd.choice([None, 10.0]))
        history = [RateSample(NOW - 600 + 60 * j, 50.0 + j) for j in range(11)] if rnd.random() < 0.5 else []
        d = decide(obs, pol, state_from_status(status), NOW, history)
        assert pol.min_replicas <= d.replicas <= pol.max_replicas, status
        state_to_status(d.state)


# D8: a time after now (a skewed clock, a hand edit, milliseconds) counts as now, once.


def _overloaded(at: float) -> Observation:
    return observe(6, 0.99, 60.0, at=at, request_rate=30.0, ttft_p95=2.0)


def test_a_scale_event_dated_in_the_future_limits_scale_ups_for_one_period_not_until_its_date() -> None:
    pol = Policy(1, 32)
    period = pol.scale_up.period
    for ahead in (300.0, NOW * 1000 - NOW):  # a clock 5 minutes ahead; 'at' written in milliseconds
        status: dict[str, Any] = {
            "scaleEvents": [{"at": NOW + ahead, "from": 2, "to": 6, "reason": "KVCacheSaturation"}]
        }
        replicas = []
        at = NOW
        while at <= NOW + period:
            d = decide(_overloaded(at), pol, state_from_status(status), at)
            status = merged(status, state_to_status(d.state))
            replicas.append(d.replicas)
            at += 5.0
        assert replicas[-1] > 6, (ahead, replicas)


def test_a_recommendation_dated_in_the_future_does_not_hold_a_scale_up() -> None:
    state = state_from_status({"recommendations": [{"at": NOW + 300, "replicas": 6}]})
    d = decide(_overloaded(NOW), Policy(1, 32), state, NOW)
    assert d.replicas > 6


def test_a_recommendation_dated_in_the_future_still_holds_a_scale_down_for_a_full_window() -> None:
    pol = Policy(1, 32, scale_down=ScaleRule(300.0, 50.0, None, 60.0, Release.HOLD))  # held whole: its length shows
    window = pol.scale_down.stabilization_window
    # 2 recommended long ago, then 8 by a clock an hour ahead: the 8 counts as made at the first read
    status: dict[str, Any] = {"recommendations": [{"at": NOW - 600, "replicas": 2}, {"at": NOW + 3600, "replicas": 8}]}
    held_until = None
    at = NOW
    while at <= NOW + window + 60:
        d = decide(_obs(at, 0.0, current=8, kv=0.1), pol, state_from_status(status), at)
        status = merged(status, state_to_status(d.state))
        if d.replicas == 8:
            held_until = at
        at += 10.0
    assert held_until is not None and NOW + window - 10 <= held_until < NOW + window + 60
