"""Replays at shorter times-to-ready: the scaled start-up times are the ones replayed, and they matter."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from inferscale.sim.cold_start import replay, scaled
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import run_fluid
from inferscale.sim.run import run_policy
from inferscale.sim.scenario import Scenario, prepare, prepare_fluid

HEADER = "window_start_s,total_rate_rps,active_clients,mean_input_tokens,mean_output_tokens\n"
NAMES = ("inferscale", "oracle")


def step_curve(tmp_path: Path) -> Path:
    """Half an hour at 200 req/s, then an hour at five times that: a jump no history foretells."""
    rates = [200.0] * 3 + [1000.0] * 6
    p = tmp_path / "sg.csv"
    p.write_text(HEADER + "".join(f"{600 * i},{r},1,300,60\n" for i, r in enumerate(rates)))
    return p


def azure_step(tmp_path: Path) -> Path:
    """Ten minutes at 20 req/s, then ten at 60: a few thousand requests."""
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"]
    t = 0.0
    while t < 1200.0:
        lines.append(f"2023-11-16 18:{int(t) // 60:02d}:{t % 60:010.7f},600,120\n")
        t += 1 / 20 if t < 600 else 1 / 60
    p = tmp_path / "az.csv"
    p.write_text("".join(lines))
    return p


def test_a_scaled_time_to_ready_keeps_its_relative_spread() -> None:
    assert scaled(TimeToReady(210.0, 270.0), 0.25) == TimeToReady(52.5, 67.5)
    assert scaled(TimeToReady(240.0, 240.0), 0.5) == TimeToReady(120.0, 120.0)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive"):
            scaled(TimeToReady(210.0, 270.0), bad)


def test_no_factor_or_no_policy_replays_nothing(tmp_path: Path) -> None:
    s = Scenario(step_curve(tmp_path))
    assert replay(s, NAMES, (), fluid=True) == []
    assert replay(s, (), (0.5,), fluid=True) == []


def test_the_fluid_replay_at_a_quarter_of_the_start_up_is_that_scenario_and_a_faster_start_pays(
    tmp_path: Path,
) -> None:
    s = Scenario(step_curve(tmp_path), time_to_ready=TimeToReady(240.0, 240.0))
    [quarter] = replay(s, NAMES, (0.25,), fluid=True)
    assert quarter.time_to_ready == TimeToReady(60.0, 60.0)
    fp = prepare_fluid(replace(s, time_to_ready=TimeToReady(60.0, 60.0)))
    for name in NAMES:
        direct = run_fluid(fp.curve, fp.duration, fp.policy(name), fp.profile, fp.run_config)
        assert quarter.results[name].scores == direct.scores

    slow = prepare_fluid(s)
    default = {n: run_fluid(slow.curve, slow.duration, slow.policy(n), slow.profile, slow.run_config) for n in NAMES}
    # the jump comes unannounced: replicas that arrive sooner serve more of it within the SLO
    assert quarter.results["inferscale"].scores.slo_attainment > default["inferscale"].scores.slo_attainment
    # the oracle provisions one time-to-ready ahead: a shorter lead costs fewer GPU-hours before the jump
    assert quarter.results["oracle"].scores.gpu_hours < default["oracle"].scores.gpu_hours


def test_the_request_level_replay_runs_each_factor_in_order(tmp_path: Path) -> None:
    s = Scenario(azure_step(tmp_path), time_to_ready=TimeToReady(200.0, 240.0))
    runs = replay(s, ("inferscale",), (0.25, 0.5), fluid=False)
    assert [r.time_to_ready for r in runs] == [TimeToReady(50.0, 60.0), TimeToReady(100.0, 120.0)]
    for run in runs:
        p = prepare(replace(s, time_to_ready=run.time_to_ready))
        direct = run_policy(p.workload, p.policy("inferscale"), p.run_config)
        assert run.results["inferscale"].scores == direct.scores
