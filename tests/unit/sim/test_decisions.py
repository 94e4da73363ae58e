"""The decisions a replay keeps: every scale and every change of reason, chained, in the operator's words."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from tests.unit.sim.policies.policy_fixtures import PROFILE, make_ctx, make_obs, steady_trace

from inferscale.perf import replica_capacity_rps
from inferscale.scaling.telling import ROUTINE
from inferscale.scaling.types import Decision, Observation, RateSample, Reason, ScalerState
from inferscale.sim.decisions import DecisionLog, DecisionRecord, write_jsonl
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import run_fluid
from inferscale.sim.policies import PolicyContext
from inferscale.sim.policies.inferscale import Inferscale
from inferscale.sim.policies.static_peak import StaticPeak
from inferscale.sim.policy import ScalingPolicy
from inferscale.sim.run import RunConfig, RunResult, Workload, parallel, run_policy
from inferscale.sim.traces import RatePoint

CAPACITY = replica_capacity_rps(PROFILE, 1000, 200, 0.5, 0.05)
# 2 replicas' worth, then 6 from minute 5 to minute 15, then 2 again: a scale-up, a hold, a scale-down
SEGMENTS = [(0.0, 300.0, 2 * CAPACITY), (300.0, 900.0, 6 * CAPACITY), (900.0, 1800.0, 2 * CAPACITY)]


class Capturing(Inferscale):
    """inferscale, remembering every decision it made (not only the ones the log keeps)."""

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        self.every: list[tuple[float, Decision]] = []

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        n = super().decide(obs, now, rate_history)
        assert self.last_decision is not None
        self.every.append((now, self.last_decision))
        return n


def kept_by_the_rule(every: list[tuple[float, Decision]]) -> list[tuple[float, int, int, str]]:
    """The documented rule, applied to every decision: a scale; a count, a reason or an SLO state unlike the
    last kept, except a routine hold after a routine hold; or a minute since the last kept while the SLO is
    missed."""
    kept: list[tuple[float, int, int, str]] = []
    missed: list[bool] = []
    for at, d in every:
        if kept:
            last_at, _, last_replicas, last_reason = kept[-1]
            quiet = d.reason.value in ROUTINE and last_reason in ROUTINE
            news = d.current != last_replicas or (d.slo_met is False) != missed[-1]
            news = news or (d.reason.value != last_reason and not quiet)
            again = d.slo_met is False and at - last_at >= 60.0
        if not kept or d.changed or news or again:
            kept.append((at, d.current, d.replicas, d.reason.value))
            missed.append(d.slo_met is False)
    return kept


def as_kept(records: list[DecisionRecord]) -> list[tuple[float, int, int, str]]:
    return [(r.at, r.current, r.replicas, r.reason) for r in records]


def config(initial: int) -> RunConfig:
    engine = EngineConfig.from_profile(PROFILE)
    return RunConfig(engine, PROFILE.gpus, 0.5, 0.05, TimeToReady.parse("60s"), initial, warmup=10.0)


@cache
def request_level() -> tuple[RunResult, Capturing]:
    """inferscale's request-level replay of the steps, run once for the module (a few seconds)."""
    trace = steady_trace(SEGMENTS)
    n = len(trace.requests)
    workload = Workload(
        "steps",
        np.fromiter((r.arrival for r in trace.requests), np.float64, n),
        np.full(n, 1000, np.int64),
        np.full(n, 200, np.int64),
        trace.duration,
    )
    ctx = make_ctx(trace=trace, time_to_ready=60.0, max_replicas=20, initial_replicas=3)
    policy = Capturing(ctx)
    return run_policy(workload, policy, config(3)), policy


def assert_chained(records: list[DecisionRecord], scale_actions: int) -> None:
    assert records, "no decision kept"
    assert all(a.at < b.at for a, b in pairwise(records))
    # Nothing between two records changed the count: each starts where the one before left it.
    assert all(b.current == a.replicas for a, b in pairwise(records))
    assert sum(r.changed for r in records) == scale_actions > 0
    # and no two records in a row say the same thing about the same count, but while the SLO is missed, a minute on
    assert all(
        b.changed
        or (a.reason, a.replicas, a.slo_met is False) != (b.reason, b.current, b.slo_met is False)
        or (b.slo_met is False and b.at - a.at >= 60.0)
        for a, b in pairwise(records)
    )
    assert all(r.message and r.recommendations for r in records)


def test_a_request_level_replay_keeps_every_scale_and_every_change_of_reason() -> None:
    r, policy = request_level()
    assert_chained(r.decisions, r.scores.scale_actions)
    assert as_kept(r.decisions) == kept_by_the_rule(policy.every)
    assert len(policy.every) > 2 * len(r.decisions)  # the steady holds between them are left out
    ups = [d for d in r.decisions if d.replicas > d.current]
    downs = [d for d in r.decisions if d.replicas < d.current]
    assert ups and downs
    assert 300.0 <= ups[0].at < 900.0  # the load step, not before it
    assert downs[-1].at > 900.0
    # once the SLO is met again, the holds between the steps down flip between routine reasons (the capacity, a
    # window): the status's, not the log's, which keeps only the steps
    settled = next(b.at for a, b in pairwise(r.decisions) if a.slo_met is False and b.slo_met)
    assert len({d.reason for at, d in policy.every if at > settled and not d.changed}) >= 2
    assert all(d.changed for d in r.decisions if d.at >= settled)
    # a step down the window releases names it
    assert any(d.reason == "ScaleDownStabilizing" and "released linearly" in d.message for d in downs)
    assert all(d.horizon == 60.0 for d in r.decisions)  # the lead is the time-to-ready


def fluid(policy: ScalingPolicy) -> RunResult:
    curve = [RatePoint(t, rate, 1000.0, 200.0) for t, _end, rate in SEGMENTS]
    return run_fluid(curve, 1800.0, policy, PROFILE, config(3))


def fluid_ctx() -> PolicyContext:
    return make_ctx(time_to_ready=60.0, max_replicas=20, initial_replicas=3)


def test_the_fluid_replay_keeps_them_too() -> None:
    policy = Capturing(fluid_ctx())
    r = fluid(policy)
    assert_chained(r.decisions, r.scores.scale_actions)
    assert as_kept(r.decisions) == kept_by_the_rule(policy.every)


def test_the_decisions_come_back_from_the_process_pool() -> None:
    def job(name: str) -> RunResult:
        return fluid(Inferscale(fluid_ctx()) if name == "inferscale" else StaticPeak(fluid_ctx()))

    pooled = parallel(["inferscale", "static-peak"], job, workers=2)
    alone = parallel(["inferscale", "static-peak"], job, workers=1)
    assert pooled["inferscale"].decisions and pooled["inferscale"].decisions == alone["inferscale"].decisions
    assert pooled["static-peak"].decisions == []


def test_a_policy_that_does_not_explain_leaves_no_record() -> None:
    r = fluid(StaticPeak(fluid_ctx()))
    assert r.scores.scale_actions >= 1 and r.decisions == []  # it scaled, and explained none of it


def test_the_json_lines_carry_the_policy_and_no_nan(tmp_path: Path) -> None:
    r, _ = request_level()
    first = r.decisions[0]
    records = [first, replace(first, forecast_rps=float("nan"))]
    path = tmp_path / "d.jsonl"
    assert write_jsonl(path, [("inferscale", records)]) == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["policy"] for line in lines] == ["inferscale", "inferscale"]
    assert lines[0]["from"] == first.current and lines[0]["to"] == first.replicas
    assert lines[0]["message"] == first.message
    assert lines[1]["forecast_rps"] is None


class Holding:
    """A policy that holds 4 for the given reason, whether its SLO is met or not."""

    def __init__(self, slo_met: bool | None) -> None:
        self.slo_met = slo_met
        self.last_decision: Decision | None = None

    def decide(self, now: float) -> None:
        self.last_decision = Decision(
            4, 4, Reason.SCALE_UP_PENDING, "holds", (), (), True, self.slo_met, None, 240.0, ScalerState()
        )


@pytest.mark.parametrize(("slo_met", "kept"), [(False, [0.0, 60.0, 120.0]), (True, [0.0]), (None, [0.0])])
def test_a_hold_while_the_slo_is_missed_is_kept_once_a_minute(slo_met: bool | None, kept: list[float]) -> None:
    policy = Holding(slo_met)
    log = DecisionLog(policy)
    for now in range(0, 130, 10):
        policy.decide(float(now))
        log.after_decide(make_obs(4), float(now))
    assert [r.at for r in log.records] == kept
    assert all(r.to_json("p")["slo_met"] is slo_met for r in log.records)
