from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from inferscale.cli import app
from inferscale.commands import tune as tune_cmd
from inferscale.sim.scores import Scores
from inferscale.sim.tune import Trial


def invoke(trace: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["tune", "--trace", str(trace), "--workers", "1", *args])
    return result.exit_code, result.stdout, result.stderr


def tuned(trace: Path, out: Path, *args: str) -> tuple[int, str, dict[str, Any]]:
    ttr = () if "--time-to-ready" in args else ("--time-to-ready", "60s")
    code, stdout, stderr = invoke(trace, *ttr, "--rate-scale", "30", "--json", str(out), *args)
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    doc: dict[str, Any] = json.loads(out.read_text())
    return code, stdout, doc


def test_the_cheapest_value_that_meets_the_target_is_recommended_with_its_spec(
    azure_trace: Path, tmp_path: Path
) -> None:
    code, stdout, doc = tuned(
        azure_trace, tmp_path / "t.json", "--capacity-utilization", "1", "--capacity-utilization", "0.5",
        "--target-attainment", "0.5",
    )  # fmt: skip
    assert code == 0
    trials = {t["capacity_utilization"]: t for t in doc["trials"]}
    assert list(trials) == [0.5, 1.0]  # in order, whatever order they were given in
    assert trials[0.5]["gpu_hours"] > 1.3 * trials[1.0]["gpu_hours"]  # the headroom is bought with GPU-hours
    cheaper = min(trials.values(), key=lambda t: t["gpu_hours"])
    assert cheaper["meets_target"] and doc["recommended"] == cheaper["capacity_utilization"] == 1.0
    assert doc["target_attainment"] == 0.5 and doc["oracle"]["gpu_hours"] > 0
    assert trials[1.0]["oracle_ratio"] == pytest.approx(trials[1.0]["gpu_hours"] / doc["oracle"]["gpu_hours"])
    assert doc["scenario"]["requests"] == 36000 and "capacity_utilization" not in doc["scenario"]
    assert "capacityUtilization 1 is the cheapest value tried" in stdout
    assert "targets:\n      capacityUtilization: 1\n" in stdout


def test_over_several_seeds_a_value_is_scored_by_its_worst_replay_and_its_mean_cost(tmp_path: Path) -> None:
    trace = tmp_path / "step.csv"  # 1 request/s for 5 minutes, then 10: the fleet grows, each seed's cold starts differ
    rows, t = [], 0.0
    while t < 900:
        rows.append(f"2023-11-16 18:{10 + int(t // 60):02d}:{t % 60:09.6f},{300 + 7 * (len(rows) % 50)},40\n")
        t += 1.0 if t < 300 else 0.1
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(rows))

    def run(*seeds: str) -> tuple[str, dict[str, Any]]:
        _, stdout, doc = tuned(
            trace, tmp_path / "t.json", "--capacity-utilization", "0.9", "--time-to-ready", "20s-200s", *seeds
        )
        return stdout, doc

    stdout, doc = run("--seed", "3", "--seed", "1")
    assert doc["seeds"] == [3, 1] and "seed" not in doc["scenario"]
    (trial,) = doc["trials"]
    runs = trial["per_seed"]
    assert [r["seed"] for r in runs] == [3, 1] and [r["seed"] for r in doc["oracle"]["per_seed"]] == [3, 1]
    assert trial["slo_attainment"] == min(r["slo_attainment"] for r in runs)
    assert trial["gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in runs) / 2)
    assert runs[0]["gpu_hours"] != runs[1]["gpu_hours"]  # each seed draws its own cold starts
    assert "over 2 seeds: the lowest attainment" in stdout
    _, alone = run("--seed", "1")  # the second seed's replay is the one a tune on that seed alone runs
    assert alone["trials"][0]["per_seed"][0]["gpu_hours"] == runs[1]["gpu_hours"]


def test_no_recommendation_and_exit_1_when_no_value_meets_the_target(azure_trace: Path, tmp_path: Path) -> None:
    # no prompt of this trace is prefilled within 1 ms: every request misses whatever the headroom
    code, stdout, doc = tuned(
        azure_trace, tmp_path / "t.json", "--capacity-utilization", "0.6", "--capacity-utilization", "0.9",
        "--slo-ttft", "1ms",
    )  # fmt: skip
    assert code == 1
    assert doc["recommended"] is None and not any(t["meets_target"] for t in doc["trials"])
    assert "no capacityUtilization tried reaches 99%" in stdout
    assert "token budget" not in stdout  # short prompts: the engine's steps are within the ITL SLO
    assert "An idle replica's TTFT P95" in stdout and "over the SLO (1ms, 50ms): no replica count meets it" in stdout
    assert "still rises" not in stdout and "Lower values do not raise it" not in stdout


def test_a_replay_too_short_for_a_value_to_matter_is_refused_rather_than_answered(azure_trace: Path) -> None:
    code, stdout, stderr = invoke(azure_trace, "--duration", "90s", "--capacity-utilization", "0.8")
    assert code == 2 and "no policy can act" in stderr and "Traceback" not in stderr
    assert "capacityUtilization:" not in stdout
    # an --interval past the replay: every value ties with no decision made
    code, stdout, stderr = invoke(azure_trace, "--interval", "9999h", "--capacity-utilization", "0.8")
    assert code == 2 and "first decision at 9999h" in stderr and "inferscale cannot act" in stderr
    assert "capacityUtilization:" not in stdout


def test_values_that_differ_only_past_the_second_decimal_are_two_replays(azure_trace: Path, tmp_path: Path) -> None:
    _, stdout, doc = tuned(
        azure_trace, tmp_path / "t.json", "--capacity-utilization", "0.7000001", "--capacity-utilization", "0.7"
    )
    assert [t["capacity_utilization"] for t in doc["trials"]] == [0.7, 0.7000001]
    assert "0.7000001" in stdout and "0.70" in stdout


def test_with_no_value_meeting_it_an_engine_step_over_the_itl_slo_is_named_with_the_flags_that_fix_it(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "long.csv"  # 12,000-token prompts, 20-token answers: 8,192-token chunks take ~150 ms
    rows = [f"2023-11-16 18:{10 + i // 30:02d}:{(2 * i) % 60:09.6f},12000,20\n" for i in range(300)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(rows))
    code, stdout, stderr = invoke(
        trace, "--capacity-utilization", "0.8", "--slo-ttft", "1ms", "--slo-itl", "50ms", "--time-to-ready", "60s"
    )
    assert code == 1, stderr
    assert "The engine's token budget caps it too" in stdout
    fix = re.search(r"vLLM --max-num-batched-tokens (\d+) --max-num-seqs (\d+) keeps it within", stdout)
    assert fix is not None and int(fix[1]) < 8192  # a smaller budget than vLLM's default on an H100


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--capacity-utilization", "0"], "--capacity-utilization must be a fraction in (0, 1], got 0.0"),
        (["--capacity-utilization", "1.2"], "--capacity-utilization must be a fraction in (0, 1], got 1.2"),
        (
            ["--capacity-utilization", "0.7", "--capacity-utilization", "0.7"],
            "--capacity-utilization 0.7 is given more than once",
        ),
        (["--target-attainment", "99"], "--target-attainment must be a fraction in (0, 1], got 99.0"),
        (["--slo-ttft", "fast"], "--slo-ttft"),
        (["--slo-itl", "3000000h"], "--slo-itl must be shorter than about 2562047h (Kubernetes durations are int64"),
        (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
        (["--seed", "2", "--seed", "0", "--seed", "2"], "--seed 2 is given more than once"),
        (["--model", "gpt-17"], "gpt-17"),
        (["--workers", "-1"], "--workers must be >= 0"),
        (["--mode", "fast"], "--mode 'fast' is not known"),
        (["--rate-scale", "1e15"], "--rate-scale 1e+15 takes the busiest minute to 2e+15 requests/s; at most 1e+07"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(azure_trace: Path, args: list[str], message: str) -> None:
    code, _, stderr = invoke(azure_trace, *args)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr


def test_the_results_are_never_written_over_the_trace(azure_trace: Path) -> None:
    before = azure_trace.read_bytes()
    code, _, stderr = invoke(azure_trace, "--json", str(azure_trace))
    assert code == 2 and "is the trace itself" in stderr
    assert azure_trace.read_bytes() == before


def test_a_start_tunes_on_the_rest_of_the_trace(azure_trace: Path, tmp_path: Path) -> None:
    # as a user checks last week's value on this week's traffic (--start 168h on a 14-day trace)
    _, _, doc = tuned(azure_trace, tmp_path / "t.json", "--capacity-utilization", "0.8", "--start", "2m")
    # 8 of the 10 minutes of 2 requests/s x 30 (the copies are jittered across the cut)
    assert doc["scenario"]["start_s"] == 120.0
    assert doc["scenario"]["requests"] == pytest.approx(36000 * 8 / 10, rel=0.01)


def test_values_the_replay_cannot_tell_apart_are_said_to_tie() -> None:
    def trial(cu: float, gpu_hours: float, actions: int) -> Trial:
        return Trial(cu, (Scores(1.0, gpu_hours, 0.1, 0.2, 0.02, actions, 100, 0),))

    tied = [trial(0.5, 0.167, 0), trial(0.9, 0.167, 0)]
    assert "The values 0.5, 0.9 tie (the same GPU-hours and no scale action)" in tune_cmd._tie(tied, 0.99, tied[1])
    apart = [trial(0.5, 0.2, 3), trial(0.9, 0.167, 2)]
    assert tune_cmd._tie(apart, 0.99, apart[1]) == ""
