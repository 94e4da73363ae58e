from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

import inferscale.commands.simulate as simulate_cmd
from inferscale.cli import app
from inferscale.perf import replica_profile
from inferscale.sim.run import RunResult, Timeline, parallel
from inferscale.sim.scores import Scores

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_has_the_scenario_and_every_requested_policy(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    png = tmp_path / "r.png"
    code, stdout, stderr = invoke(
        "--trace", str(azure_trace), "--policy", "static-peak", "--policy", "oracle", "--time-to-ready", "60s",
        "--json", str(out), "--plot", str(png), "--workers", "1",
    )  # fmt: skip
    assert code == 0, stdout
    assert "warning" not in stderr  # 10 minutes outlast the 2-minute warm-up plus 60 s to Ready
    doc = json.loads(out.read_text())
    assert doc["scenario"]["requests"] == 1200 and doc["scenario"]["time_to_ready"] == "60s"
    assert doc["scenario"]["format"] == "azure"  # detected, and recorded as such
    assert list(doc["policies"]) == ["static-peak", "oracle"]
    keys = {"slo_attainment", "gpu_hours", "ttft_p95_s", "ttft_p99_s", "itl_mean_s", "scale_actions", "requests"}
    for scores in doc["policies"].values():
        assert keys <= set(scores)
        assert scores["requests"] == 1200 and 0.0 <= scores["slo_attainment"] <= 1.0 and scores["gpu_hours"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "static-peak" in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "magic"], "unknown policy 'magic'; known: "),
        (["--policy", "hpa", "--policy", "hpa"], "unknown policy 'hpa'; known: "),  # named once
        (["--policy", "", "--policy", "x"], "unknown policies '', 'x'; known: "),
        (["--model", "gpt-17"], "gpt-17"),
        (["--gpu", "tpu-v9"], "tpu-v9"),
        (["--duration", "soon"], "--duration"),
        (["--start", "soon"], "--start: invalid duration 'soon'"),
        (["--start", "10m"], "--start 10m is at or past the trace's end (599.5s in)"),
        (["--slo-ttft", "-1s"], "--slo-ttft"),
        (["--slo-tpot-p95", "0s"], "--slo-tpot-p95"),
        # what inferscale's spec would refuse mid-replay, refused as the flags are read
        (["--slo-ttft", "3000000h"], "--slo-ttft must be shorter than about 2562047h"),
        (["--slo-itl", "3000000h"], "--slo-itl must be shorter than about 2562047h"),
        (["--slo-tpot-p95", "3000000h"], "--slo-tpot-p95 must be shorter than about 2562047h"),
        (["--time-to-ready", "100s-3000000h"], "--time-to-ready must be shorter than about 2562047h"),
        # inferscale's spec refuses a warmup.timeToReady over 1h: a traceback from pydantic until 2026-12-03
        (
            ["--time-to-ready", "30m-2h"],
            "--time-to-ready must be at most 1h (no model load takes an hour), got '30m-2h'",
        ),
        (["--interval", "3000000h"], "--interval must be shorter than about 2562047h"),
        (["--interval", "10ms"], "--interval must be at least 1s (Prometheus samples are seconds apart)"),
        (["--slo-ttft", "0.0000001ms"], "--slo-ttft must be at least a nanosecond, got '0.0000001ms'"),
        (["--capacity-utilization", "0"], "--capacity-utilization must be a fraction in (0, 1], got 0.0"),
        (["--capacity-utilization", "1.5"], "--capacity-utilization must be a fraction in (0, 1], got 1.5"),
        (["--scale-down-release", "gradual"], "--scale-down-release 'gradual' is not known; known: Linear, Hold"),
        (["--scale-down-window", "5 minutes"], "--scale-down-window: invalid duration '5 minutes'"),
        (["--time-to-ready", "4m-2m"], "--time-to-ready"),
        (["--rate-scale", "0"], "--rate-scale"),
        (["--rate-scale", "1e15"], "--rate-scale 1e+15 takes the busiest minute to 2e+15 requests/s; at most 1e+07"),
        (["--format", "parquet"], "--format"),
        (["--mode", "fast"], "--mode"),
        (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
        (["--workers", "-3"], "--workers must be >= 0"),
        (
            ["--max-num-batched-tokens", "512"],
            "--max-num-batched-tokens 512 must be >= --max-num-seqs 1024 (vLLM's default on h100-80gb)",
        ),
        (["--max-num-seqs", "0"], "--max-num-seqs must be a whole number >= 1, got 0"),
        (["--max-num-batched-tokens", "-2"], "--max-num-batched-tokens must be a whole number >= 1, got -2"),
        (["--time-scale", "1e-6"], "--time-scale 1e-06 stretches the trace's 9.99 minutes to 19 years"),
        (["--policy", "keda-queue", "--policy", "oracle", "--policy", "keda-queue"], "--policy keda-queue is given"),
        (["--baseline-target", "keda-queue:10"], "--baseline-target takes NAME=VALUE, e.g. keda-queue=10, got"),
        (["--baseline-target", "dynamo-sla=3"], "'dynamo-sla' takes no target here; those that do: hpa-gpu-util, "),
        (["--baseline-target", "hpa-gpu-util=70"], "hpa-gpu-util=70: its target is the GPU busy share"),
        (["--baseline-target", "keda-queue=0"], "keda-queue=0: its target is waiting requests per replica"),
        (
            ["--policy", "keda-queue", "--baseline-target", "keda-queue=3", "--baseline-target", "keda-queue=4"],
            "--baseline-target keda-queue is given twice",
        ),
        (
            ["--policy", "oracle", "--baseline-target", "aibrix-apa=0.5"],
            "--baseline-target aibrix-apa: not among the policies; add --policy aibrix-apa",
        ),
        (["--metrics-outage", "20m"], "--metrics-outage takes START+DURATION, e.g. 20m+10m, got '20m'"),
        (["--metrics-outage", "soon+10m"], "--metrics-outage start: invalid duration 'soon'"),
        (["--metrics-outage", "2m+0s"], "--metrics-outage duration must be positive, got '0s'"),
        (["--metrics-outage", "2m+1m", "--outage-kind", "dns"], "--outage-kind 'dns' is not known; known: "),
        (["--metrics-outage", "10m+1m"], "--metrics-outage starts at 10m, at or after the replay's end (10m)"),
        # a flag that modifies another, or a policy's own, given without it: dropped unseen until 2026-12-06
        (["--duration", "0.000001ms"], "--duration must be at least 1s (nothing is scraped or decided sooner)"),
        (["--outage-kind", "vllm-unscraped"], "--outage-kind vllm-unscraped needs --metrics-outage START+DURATION"),
        (
            ["--policy", "static-peak", "--capacity-utilization", "0.5", "--scale-down-window", "2m"],
            "--capacity-utilization, --scale-down-window: set inferscale's spec, and inferscale is not among the "
            "policies; add --policy inferscale",
        ),
        # a fluid replay of no request scored 100%; a request-level one of 24 M requests built them all
        (["--mode", "fluid", "--rate-scale", "1e-9"], "requests at --rate-scale 1e-09; nothing to simulate"),
        (
            ["--mode", "request", "--rate-scale", "20000"],
            "--mode request: the selected window stands for 24,000,000 requests, more than the 20,000,000",
        ),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(azure_trace: Path, args: list[str], message: str) -> None:
    code, _, stderr = invoke("--trace", str(azure_trace), *args)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr


def test_a_metrics_outage_is_replayed_and_recorded(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, stdout, _ = invoke(
        "--trace", str(azure_trace), "--policy", "inferscale", "--time-to-ready", "60s", "--metrics-outage", "3m+4m",
        "--outage-kind", "vllm-unscraped", "--json", str(out), "--workers", "1",
    )  # fmt: skip
    assert code == 0, stdout
    outage = json.loads(out.read_text())["scenario"]["metrics_outage"]
    assert outage == {"kind": "vllm-unscraped", "start_s": 180.0, "end_s": 420.0}


def test_unparsable_or_missing_trace_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("hello,world\n1,2\n")
    code, _, stderr = invoke("--trace", str(bad))
    assert code == 2 and "bad.csv" in stderr and "Traceback" not in stderr
    code, _, stderr = invoke("--trace", str(tmp_path / "nope.csv"))
    assert code == 2 and "no such file" in stderr
    code, _, stderr = invoke("--trace", str(tmp_path))
    assert code == 2 and "is a directory" in stderr
    code, _, stderr = invoke("--trace", str(bad))
    assert "--format" in stderr  # the option to pass, not the loader's parameter


def test_a_line_nested_past_the_json_parsers_depth_is_invalid_json_not_a_traceback(tmp_path: Path) -> None:
    trace = tmp_path / "deep.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n' + "[" * 100_000 + "\n")
    code, _, stderr = invoke("--trace", str(trace))
    assert code == 2 and f"{trace}:2: not valid JSON" in stderr and "Traceback" not in stderr


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "trace.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.timeout(30)  # opening a FIFO that has no writer blocks: the old code hung there
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("/dev/null", "--trace /dev/null: is not a regular file (a device, pipe or socket)"),
        ("fifo", "--trace {fifo}: is not a regular file (a device, pipe or socket); the trace is read more than once"),
        ("empty", "--trace {empty}: is empty"),
    ],
)
def test_a_trace_that_is_not_a_readable_file_says_what_it_is(
    tmp_path: Path, fifo: Path, name: str, message: str
) -> None:
    empty = tmp_path / "empty.csv"
    empty.touch()
    path = {"fifo": str(fifo), "empty": str(empty)}.get(name, name)
    code, _, stderr = invoke("--trace", path)
    assert code == 2 and message.format(fifo=fifo, empty=empty) in stderr
    assert "no such file" not in stderr and "Traceback" not in stderr


def test_format_is_case_insensitive(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, _, stderr = invoke(
        "--trace", str(azure_trace), "--format", "AZURE", "--policy", "static-peak", "--json", str(out)
    )  # fmt: skip
    assert code == 0, stderr
    assert json.loads(out.read_text())["scenario"]["format"] == "azure"


@pytest.fixture
def no_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_args: object, **_kwargs: object) -> dict[str, RunResult]:
        raise AssertionError("the replay ran")

    monkeypatch.setattr(simulate_cmd, "parallel", fail)


@pytest.mark.parametrize(
    ("option", "target", "message"),
    [
        ("--json", "missing/r.json", "folder {tmp}/missing does not exist"),
        ("--json", "azure.csv/r.json", "{tmp}/azure.csv is not a folder"),
        ("--json", ".", "is a directory"),
        ("--json", "/proc/r.json", "cannot write there"),
        ("--plot", "missing/r.png", "folder {tmp}/missing does not exist"),
        ("--plot", "/proc/r.png", "cannot write there"),
        ("--plot", "r.txt", "cannot write a .txt image"),
        ("--plot", "r.pgf", "cannot write a .pgf image"),  # matplotlib would need a LaTeX installation
        ("--plot", "timeline", "give the image's suffix, e.g. timeline.png"),  # matplotlib would add it
    ],
)
@pytest.mark.usefixtures("no_replay")
def test_unusable_output_paths_exit_2_before_the_replay(
    azure_trace: Path, tmp_path: Path, option: str, target: str, message: str
) -> None:
    code, _, stderr = invoke("--trace", str(azure_trace), option, str(tmp_path / target))
    assert code == 2, stderr
    assert f"error: {option} " in stderr and message.format(tmp=tmp_path) in stderr and "Traceback" not in stderr
    assert not (tmp_path / "missing").exists()  # neither output creates folders


@pytest.mark.parametrize("option", ["--json", "--plot", "--decisions"])
@pytest.mark.usefixtures("no_replay")
def test_a_named_pipe_as_an_output_is_refused_not_waited_on(azure_trace: Path, tmp_path: Path, option: str) -> None:
    pipe = tmp_path / "pipe.png"
    os.mkfifo(pipe)  # no reader: opening it to write would block the command before any message
    code, _, stderr = invoke("--trace", str(azure_trace), option, str(pipe))
    assert code == 2 and f"error: {option} {pipe}: is a named pipe" in stderr


@pytest.mark.usefixtures("no_replay")
def test_checking_an_output_path_leaves_no_file_behind(azure_trace: Path, tmp_path: Path) -> None:
    # --json is checked (by creating the file) and passes; --plot fails after it: nothing may be left
    out = tmp_path / "r.json"
    code, _, stderr = invoke("--trace", str(azure_trace), "--json", str(out), "--plot", str(tmp_path / "r.txt"))
    assert code == 2 and "cannot write a .txt image" in stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("first", "second", "name"),
    [("--json", "--plot", "r.png"), ("--json", "--plot", "./r.png"), ("--json", "--decisions", "r.png")],
)
@pytest.mark.usefixtures("no_replay")
def test_two_outputs_cannot_be_the_same_file(
    azure_trace: Path, tmp_path: Path, first: str, second: str, name: str
) -> None:
    path = tmp_path / "r.png"
    code, _, stderr = invoke("--trace", str(azure_trace), first, str(tmp_path / name), second, str(path))
    assert code == 2 and f"error: {first} and {second} are the same file {path}" in stderr
    assert not path.exists()


def test_decisions_are_written_as_json_lines_that_account_for_every_scale(tmp_path: Path) -> None:
    # 10 minutes at 2 requests/s, then 10 at 8: the warm fleet is sized on the first 10, so inferscale scales
    lines = [AZURE_HEADER]
    t = 0.0
    while t < 1200.0:
        m, sec = divmod(t, 60)
        lines.append(f"2023-11-16 18:{10 + int(m):02d}:{sec:09.6f},{300 + int(t) % 350},{20 + int(t) % 40}\n")
        t += 0.5 if t < 600.0 else 0.125
    trace = tmp_path / "step.csv"
    trace.write_text("".join(lines))
    out, log = tmp_path / "r.json", tmp_path / "decisions.jsonl"
    code, _, stderr = invoke(
        "--trace", str(trace), "--rate-scale", "20", "--policy", "inferscale", "--policy", "static-peak",
        "--time-to-ready", "60s", "--json", str(out), "--decisions", str(log), "--workers", "1",
    )  # fmt: skip
    assert code == 0, stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert records and {line["policy"] for line in records} == {"inferscale"}  # static-peak does not explain
    scaled = [line for line in records if line["from"] != line["to"]]
    assert len(scaled) == json.loads(out.read_text())["policies"]["inferscale"]["scale_actions"] > 0
    assert all(b["from"] == a["to"] and b["at_s"] > a["at_s"] for a, b in pairwise(records))
    assert all(line["message"] and line["reason"] for line in records)
    assert scaled[0]["to"] > scaled[0]["from"] and scaled[0]["at_s"] > 600.0


@pytest.mark.usefixtures("no_replay")
def test_decisions_need_the_policy_that_explains_them(azure_trace: Path, tmp_path: Path) -> None:
    log = tmp_path / "d.jsonl"
    code, _, stderr = invoke("--trace", str(azure_trace), "--policy", "oracle", "--decisions", str(log))
    assert code == 2
    assert "error: --decisions: only inferscale explains its decisions, and it is not among the policies" in stderr
    assert not log.exists()


@pytest.mark.parametrize("option", ["--json", "--plot", "--decisions"])
@pytest.mark.usefixtures("no_replay")
def test_no_output_is_written_over_the_trace(azure_trace: Path, option: str) -> None:
    before = azure_trace.read_bytes()
    code, _, stderr = invoke("--trace", str(azure_trace), "--policy", "inferscale", option, str(azure_trace))
    assert code == 2 and f"error: {option} {azure_trace} is the trace itself" in stderr
    linked = azure_trace.with_name("results.out")
    os.link(azure_trace, linked)  # a hard link: another path, the same file
    code, _, stderr = invoke("--trace", str(azure_trace), "--policy", "inferscale", option, str(linked))
    assert code == 2 and f"error: {option} {linked} is the trace itself" in stderr
    assert azure_trace.read_bytes() == before


@pytest.mark.parametrize(("duration", "noted"), [("20m", True), ("10m", False), ("5m", False)])
def test_a_duration_longer_than_the_trace_is_noted(azure_trace: Path, duration: str, noted: bool) -> None:
    code, stdout, stderr = invoke("--trace", str(azure_trace), "--policy", "static-peak", "--duration", duration)
    assert code == 0 and "static-peak" in stdout
    note = "note: the trace covers only 10m; the replay stops there, not at the 20m of --duration"
    assert (note in stderr) is noted


def test_a_start_replays_the_rest_of_the_trace_and_is_recorded(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, _, stderr = invoke(
        "--trace", str(azure_trace), "--policy", "static-peak", "--start", "4m", "--duration", "10m",
        "--time-to-ready", "30s", "--json", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    scenario = json.loads(out.read_text())["scenario"]
    # 2 requests/s over 10 minutes: the last 6 minutes (less the last arrival's half second) are left
    assert scenario["start_s"] == 240.0 and scenario["requests"] == 720
    assert scenario["duration_s"] == pytest.approx(359.5)
    note = "note: the trace covers only 6m after --start 4m; the replay stops there, not at the 10m of --duration"
    assert note in stderr


def test_the_note_on_a_short_trace_gives_its_length_on_the_compressed_axis(azure_trace: Path) -> None:
    code, _, stderr = invoke(
        "--trace", str(azure_trace), "--policy", "static-peak", "--time-scale", "2", "--duration", "10m"
    )  # fmt: skip
    assert code == 0
    assert "note: the trace covers only 5m at --time-scale 2; the replay stops there, not at the 10m" in stderr


@pytest.mark.parametrize("broken", ["--json", "--plot", "--decisions"])
def test_a_failed_write_is_one_line_and_the_other_output_is_still_written(
    azure_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    def disk_full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    if broken == "--json":
        monkeypatch.setattr(Path, "write_text", disk_full)
    else:
        monkeypatch.setattr(simulate_cmd, "plot_timelines" if broken == "--plot" else "write_jsonl", disk_full)
    out, png, log = tmp_path / "r.json", tmp_path / "r.png", tmp_path / "d.jsonl"
    code, _, stderr = invoke(
        "--trace", str(azure_trace), "--policy", "inferscale", "--json", str(out), "--plot", str(png),
        "--decisions", str(log),
    )  # fmt: skip
    assert code == 1
    assert f"error: {broken} " in stderr and "No space left on device" in stderr and "Traceback" not in stderr
    if broken != "--plot":
        assert png.read_bytes()[:4] == b"\x89PNG"
    if broken != "--json":
        assert json.loads(out.read_text())["policies"]["inferscale"]["requests"] == 1200
    if broken != "--decisions":
        assert log.read_text().count("\n") >= 1


def test_the_process_pool_is_no_larger_than_the_policies(azure_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []

    def recording(names: list[str], job: Callable[[str], RunResult], workers: int, **kw: Any) -> dict[str, RunResult]:
        sizes.append(workers)
        return parallel(names, job, 1, **kw)

    monkeypatch.setattr(simulate_cmd, "parallel", recording)
    code, _, stderr = invoke(
        "--trace", str(azure_trace), "--policy", "static-peak", "--policy", "oracle", "--workers", "64"
    )  # fmt: skip
    assert code == 0, stderr
    assert sizes == [2]


@pytest.mark.parametrize(
    ("duration", "message"),
    [
        ("2m", "no policy can act"),
        ("5m", "warm-up plus the 4m30s top of --time-to-ready"),
    ],
)
def test_a_replay_too_short_for_any_policy_to_matter_warns_but_runs(
    azure_trace: Path, duration: str, message: str
) -> None:
    code, stdout, stderr = invoke("--trace", str(azure_trace), "--policy", "static-peak", "--duration", duration)
    assert code == 0 and "static-peak" in stdout
    warnings = [line for line in stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and message in warnings[0] and "at least 6m30s" in warnings[0]


def test_an_interval_that_puts_the_first_decision_past_the_replay_warns_as_a_replay_too_short(
    azure_trace: Path,
) -> None:
    code, _, stderr = invoke("--trace", str(azure_trace), "--policy", "static-peak", "--interval", "9999h")
    assert code == 0
    (warning,) = [line for line in stderr.splitlines() if line.startswith("warning:")]
    # --interval is inferscale's own: the baselines still decide from the warm-up on
    assert "inferscale's first decision at 9999h (the first tick of --interval 9999h past the 2m warm-up)" in warning
    assert "inferscale cannot act" in warning and "no policy" not in warning


def test_fluid_mode_replays_the_rate_curve_with_the_same_json(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    code, stdout, _ = invoke(
        "--trace", str(azure_trace), "--mode", "fluid", "--policy", "static-peak", "--json", str(out), "--workers", "1"
    )  # fmt: skip
    assert code == 0, stdout
    doc = json.loads(out.read_text())
    assert doc["scenario"]["mode"] == "fluid"
    assert doc["scenario"]["requests"] == pytest.approx(1200, rel=0.01)
    assert doc["policies"]["static-peak"]["gpu_hours"] > 0


def replay_json(trace: Path, out: Path, *args: str) -> dict[str, Any]:
    """A replay that must succeed, one process, a 60 s time-to-ready unless given: its JSON document."""
    ttr = () if "--time-to-ready" in args else ("--time-to-ready", "60s")
    code, stdout, _ = invoke("--trace", str(trace), "--json", str(out), "--workers", "1", *ttr, *args)
    assert code == 0, stdout
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def test_the_per_request_tpot_slo_reaches_inferscales_spec(azure_trace: Path, tmp_path: Path) -> None:
    doc = replay_json(azure_trace, tmp_path / "r.json", "--policy", "inferscale", "--slo-tpot-p95", "40ms")
    assert doc["scenario"]["slo_tpot_p95_s"] == pytest.approx(0.04)


def test_a_lower_capacity_utilization_buys_inferscale_standing_headroom(azure_trace: Path, tmp_path: Path) -> None:
    def run(*utilization: str) -> dict[str, Any]:
        return replay_json(
            azure_trace, tmp_path / "r.json", "--policy", "inferscale", "--rate-scale", "30", *utilization
        )

    default, lower = run(), run("--capacity-utilization", "0.5")
    assert (default["scenario"]["capacity_utilization"], lower["scenario"]["capacity_utilization"]) == (None, 0.5)
    assert lower["policies"]["inferscale"]["gpu_hours"] > 1.3 * default["policies"]["inferscale"]["gpu_hours"]


def drop_trace(tmp_path: Path) -> Path:
    """20 requests/s for 5 minutes, then 2 for 10: a burst whose replicas a scale-down window gives back."""
    trace = tmp_path / "drop.csv"
    rows, t = [], 0.0
    while t < 900:
        rows.append(
            f"2023-11-16 18:{10 + int(t // 60):02d}:{t % 60:09.6f},{300 + 7 * (len(rows) % 50)},{20 + len(rows) % 40}\n"
        )
        t += 0.05 if t < 300 else 0.5
    trace.write_text(AZURE_HEADER + "".join(rows))
    return trace


def test_a_linear_release_returns_the_replicas_of_a_burst_sooner_than_a_hold(tmp_path: Path) -> None:
    trace = drop_trace(tmp_path)

    def run(*release: str) -> dict[str, Any]:
        window = ("--scale-down-window", "300s")  # HPA's, the release's to shape
        return replay_json(
            trace, tmp_path / "r.json", "--policy", "inferscale", "--rate-scale", "10", *window, *release
        )

    linear, hold = run(), run("--scale-down-release", "HOLD")  # any case
    assert (linear["scenario"]["scale_down_release"], hold["scenario"]["scale_down_release"]) == (None, "Hold")
    assert linear["policies"]["inferscale"]["gpu_hours"] < 0.97 * hold["policies"]["inferscale"]["gpu_hours"]


def test_the_scale_down_window_reaches_inferscales_spec_and_unset_follows_the_time_to_ready(tmp_path: Path) -> None:
    trace = drop_trace(tmp_path)

    def gpu_hours(*window: str) -> float:
        doc = replay_json(trace, tmp_path / "r.json", "--policy", "inferscale", "--rate-scale", "10", *window)
        assert doc["scenario"]["scale_down_window"] == (window[1] if window else None)
        return float(doc["policies"]["inferscale"]["gpu_hours"])

    # a 60 s time-to-ready: unset, the window is that and a minute, the same replay as a 2m given (300s, HPA's,
    # would keep the burst's replicas longer), and a window given does change the fleet
    unset, two_minutes = gpu_hours(), gpu_hours("--scale-down-window", "2m")
    short, long = gpu_hours("--scale-down-window", "30s"), gpu_hours("--scale-down-window", "5m")
    assert unset == two_minutes and short < unset < long, (short, unset, two_minutes, long)


def test_the_engines_token_budget_reaches_the_replicas_and_the_json(tmp_path: Path) -> None:
    trace = tmp_path / "long.csv"  # ten minutes of 2 requests/s with 12,000-token prompts and short answers
    rows = [f"2023-11-16 18:{10 + int(i // 120):02d}:{(i * 0.5) % 60:09.6f},12000,8\n" for i in range(1200)]
    trace.write_text(AZURE_HEADER + "".join(rows))

    def ttft_p95(*budget: str) -> float:
        doc = replay_json(trace, tmp_path / "r.json", "--policy", "static-peak", "--slo-ttft", "5s", *budget)
        assert doc["scenario"]["max_num_batched_tokens"] == (int(budget[1]) if budget else None)
        return float(doc["policies"]["static-peak"]["ttft_p95_s"])

    # a 12,000-token prompt takes 12 steps at a 1,024-token budget, 2 at vLLM's 8,192: 10 more fixed step costs
    step = replica_profile("llama-3.1-8b", "h100-80gb").step.c0
    assert ttft_p95("--max-num-batched-tokens", "1024") - ttft_p95() == pytest.approx(10 * step, rel=0.2)


def test_an_slo_no_replica_count_meets_is_refused_and_a_fleet_the_model_cannot_size_is_said(tmp_path: Path) -> None:
    trace = tmp_path / "long.csv"  # ten minutes of 2 requests/s with 12,000-token prompts and short answers
    rows = [f"2023-11-16 18:{10 + int(i // 120):02d}:{(i * 0.5) % 60:09.6f},12000,8\n" for i in range(1200)]
    trace.write_text(AZURE_HEADER + "".join(rows))
    # an idle replica's TTFT P95 at 12,000 tokens is about 220 ms: every fleet would be a 4-replica placeholder
    code, _, stderr = invoke("--trace", str(trace), "--policy", "oracle", "--slo-ttft", "100ms", "--workers", "1")
    assert code == 2 and "no replica count meets --slo-ttft 100ms" in stderr and "idle replica reaches" in stderr
    assert "Traceback" not in stderr
    # at a 1,024-token budget the capacity model cannot spread the prompt over 8 answer steps: the replay runs,
    # and says its fleets are not sized from the load
    args = ("--policy", "static-peak", "--slo-ttft", "5s", "--max-num-batched-tokens", "1024", "--workers", "1")
    code, stdout, stderr = invoke("--trace", str(trace), "--time-to-ready", "60s", *args)
    assert code == 0, stdout
    assert "capped at 4 replicas, not sized from the load" in stderr


def test_the_table_shows_a_short_replays_gpu_hours_rather_than_zero() -> None:
    def result(name: str, gpu_hours: float) -> RunResult:
        return RunResult(name, Scores(0.99, gpu_hours, 0.1, 0.2, 0.02, 1, 100, 0), Timeline(), 0.1)

    console = Console(width=160, record=True)
    console.print(simulate_cmd._table({"a": result("a", 0.0333), "b": result("b", 6140.82)}, 0.5))
    text = console.export_text()
    assert "0.0333" in text and "6140.8" in text


def test_requests_too_long_for_the_model_or_the_kv_cache_are_counted_and_noted(tmp_path: Path) -> None:
    # llama-3.1-8b on an H100: a 131,072-token context window, a 444,304-token KV cache
    rows = []
    for i in range(1200):
        tokens = {10: 200_000, 20: 500_000, 410: 200_000, 810: 140_000, 620: 600_000}.get(i, 300)
        rows.append(f"2023-11-16 18:{10 + int(i // 120):02d}:{(i * 0.5) % 60:09.6f},{tokens},20\n")
    trace = tmp_path / "long.csv"
    trace.write_text(AZURE_HEADER + "".join(rows))
    out = tmp_path / "r.json"
    code, _, stderr = invoke(
        "--trace", str(trace), "--policy", "static-peak", "--time-to-ready", "60s", "--json", str(out), "--workers", "1"
    )  # fmt: skip
    assert code == 0, stderr
    scenario = json.loads(out.read_text())["scenario"]
    assert scenario["context_window_tokens"] == 131_072
    # the three between the context window and the KV cache's size are refused too (until 2026-12-05 they were
    # served, and set the benchmark's TTFT target on Mooncake)
    assert scenario["requests_over_context_window"] == 5 and scenario["requests_refused_too_long"] == 5
    assert (
        "note: 5 of 1,200 requests are longer than llama-3.1-8b's context window (131,072 tokens): the engines "
        "refuse them, as vLLM does (HTTP 400), and each counts as a miss" in stderr
    )
    assert "KV cache holds" not in stderr


def test_a_trace_within_the_limits_has_no_note_and_zero_counts(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, _, stderr = invoke("--trace", str(azure_trace), "--policy", "static-peak", "--json", str(out))
    assert code == 0 and "note:" not in stderr
    scenario = json.loads(out.read_text())["scenario"]
    assert (scenario["requests_over_context_window"], scenario["requests_refused_too_long"]) == (0, 0)
    fluid = tmp_path / "f.json"
    invoke("--trace", str(azure_trace), "--policy", "static-peak", "--mode", "FLUID", "--json", str(fluid))  # any case
    scenario = json.loads(fluid.read_text())["scenario"]  # mean lengths: no request to count
    assert (scenario["requests_over_context_window"], scenario["requests_refused_too_long"]) == (None, None)
    assert scenario["mode"] == "fluid"


def test_a_build_scenario_argument_a_command_lacks_is_an_error_not_a_silent_default() -> None:
    flags = {"trace": Path("t.csv"), "rate_scale": 2.0}
    with pytest.raises(TypeError, match=r"missing from the command: .*model"):
        simulate_cmd.scenario_from_flags(flags)


def test_a_peers_target_given_reaches_the_replay_and_moves_its_fleet(tmp_path: Path) -> None:
    trace = drop_trace(tmp_path)

    def run(*given: str) -> dict[str, Any]:
        args = ("--policy", "hpa-gpu-util", "--policy", "keda-queue", "--rate-scale", "10")
        return replay_json(trace, tmp_path / "r.json", *args, *given)

    default = run()
    given = run("--baseline-target", "keda-queue=1", "--baseline-target", "hpa-gpu-util=0.95")
    assert (default["scenario"]["baseline_targets"], given["scenario"]["baseline_targets"]) == (
        {},
        {"keda-queue": 1.0, "hpa-gpu-util": 0.95},
    )
    # a GPU kept 95% busy takes fewer replicas than one kept at 60%
    hours = [doc["policies"]["hpa-gpu-util"]["gpu_hours"] for doc in (default, given)]
    assert hours[1] < 0.8 * hours[0], hours


@pytest.mark.parametrize(("cpu_max", "limit"), [("200000 100000\n", 2), ("50000 100000\n", 1), ("max 100000\n", None)])
def test_workers_by_default_stay_within_the_cgroups_cpu_limit(tmp_path: Path, cpu_max: str, limit: int | None) -> None:
    pinned = len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").write_text(cpu_max)
    assert simulate_cmd.usable_cpus(tmp_path / "cpu.max") == min(pinned, limit or pinned)
    assert simulate_cmd.usable_cpus(tmp_path / "absent") == pinned


def test_the_json_names_the_model_and_gpu_as_the_catalog_does(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ("--gpu", " H100 ", "--model", "Meta-Llama/Llama-3.1-8B-Instruct", "--json", str(out), "--workers", "1")
    code, stdout, _ = invoke("--trace", str(azure_trace), "--policy", "static-peak", "--time-to-ready", "60s", *args)
    assert code == 0, stdout
    scenario = json.loads(out.read_text())["scenario"]
    assert (scenario["model"], scenario["gpu"]) == ("llama-3.1-8b", "h100-80gb")
