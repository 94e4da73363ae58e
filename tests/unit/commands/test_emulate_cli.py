"""`inferscale emulate`'s input checks, which run before it touches the cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.cli import app

runner = CliRunner()
AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "azure.csv"
    p.write_text(AZURE)
    return p


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["emulate", "--deployment", "llm", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--duration", "soon"], "--duration: invalid duration 'soon'"),
        (["--duration", "0s"], "--duration must be positive, got '0s'"),
        (["--start", "soon"], "--start: invalid duration 'soon'"),
        (["--start", "5s"], "--start 5s is at or past the trace's end (4.315s in)"),
        (["--model", "gpt-9"], "unknown model 'gpt-9'"),
        (["--format", "mooncake"], "azure.csv"),
        (["--format", "parquet"], "--format 'parquet' is not known"),
        (
            ["--max-num-batched-tokens", "512"],
            "--max-num-batched-tokens 512 must be >= --max-num-seqs 1024 (vLLM's default on h100-80gb)",
        ),
        (
            ["--max-num-seqs", "9000"],
            "--max-num-batched-tokens 8192 (vLLM's default on h100-80gb) must be >= --max-num-seqs 9000",
        ),
        (["--max-num-seqs", "0"], "--max-num-seqs must be a whole number >= 1, got 0"),
        (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
        (["--slo-ttft", "0s"], "--slo-ttft must be positive, got '0s'"),
        (["--slo-itl", "0ms"], "--slo-itl must be positive, got '0ms'"),
        (["--slo-itl", "fast"], "--slo-itl: invalid duration 'fast'"),
        (["--rate-scale", "0"], "--rate-scale must be a positive number, got 0.0"),
        (["--time-scale", "nan"], "--time-scale must be a positive number, got nan"),
        (["--time-scale", "1e-9"], "--time-scale 1e-09 stretches the trace's 4.315 s to 137 years"),
        (["--tp", "0"], "--tp must be at least 1, got 0"),
        (["--tp", "3"], "--tp 3: tensor parallelism 3 does not divide llama-3.1-8b's 8 KV heads"),
        (["--deployment", ""], "--deployment '' is not a valid object name"),
        (["--deployment", "My_Llm"], "--deployment 'My_Llm' is not a valid object name"),
        (["--namespace", ""], "--namespace '' is not a namespace name"),
        (["-n", " "], "--namespace ' ' is not a namespace name"),
        (["-n", "LLM"], "--namespace 'LLM' is not a namespace name"),
        (["--model-name", ""], "--model-name must not be empty, got ''"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(trace: Path, extra: list[str], message: str) -> None:
    code, err = run("--trace", str(trace), *extra)
    assert code == 2 and message in err and err.startswith("inferscale emulate: ")


def test_a_trace_error_names_the_file_and_line(tmp_path: Path) -> None:
    huge = tmp_path / "huge.csv"
    huge.write_text(AZURE + "2023-11-16 18:15:51.0,100000000000000000000000,44\n")
    code, err = run("--trace", str(huge))
    assert code == 2 and f"{huge}:4: ContextTokens too large" in err and err.count("\n") == 1


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    """Credentials that load: no cluster is asked anything before the replay starts."""
    p = tmp_path / "kubeconfig"
    p.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return p


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The durations the emulator is asked to replay; it replays nothing."""
    from inferscale.emulator import Emulator

    asked: list[float] = []

    async def fake_run(self: Emulator, stop: object = None) -> dict[str, object]:
        asked.append(self.cfg.duration)
        return {"finished": len(self.cfg.requests), "requests": len(self.cfg.requests), "slo_attainment": 1.0}

    monkeypatch.setattr(Emulator, "run", fake_run)
    return asked


@pytest.mark.parametrize(("duration", "noted"), [("1m", True), ("4s", False), ("2s", False)])
def test_a_duration_longer_than_the_trace_is_noted(
    trace: Path, kubeconfig: Path, replays: list[float], duration: str, noted: bool
) -> None:
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--duration", duration)
    assert code == 0, err
    assert ("note: the trace covers only 4.31s; the replay lasts the 1m of --duration" in err) is noted
    assert replays == [{"1m": 60.0, "4s": 4.0, "2s": 2.0}[duration]]


def test_a_start_replays_the_rest_of_the_trace_from_time_zero(
    trace: Path, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inferscale.emulator import Emulator

    arrivals: list[list[float]] = []

    async def fake_run(self: Emulator, stop: object = None) -> dict[str, object]:
        arrivals.append([float(a) for a in self.cfg.requests.arrival])
        return {"finished": len(self.cfg.requests), "requests": len(self.cfg.requests), "slo_attainment": 1.0}

    monkeypatch.setattr(Emulator, "run", fake_run)
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--start", "1s", "--duration", "1m")
    assert code == 0, err
    assert arrivals == [[pytest.approx(3.314579)]]  # the second request, 4.314579 s into the trace
    assert "note: the trace covers only 3.31s after --start 1s; the replay lasts the 1m of --duration" in err


def test_the_format_ignores_case_like_simulate(trace: Path, tmp_path: Path) -> None:
    # the trace loads, so the next check to fail is the cluster's credentials
    missing = tmp_path / "missing"
    code, err = run("--trace", str(trace), "--format", "AZURE", "--kubeconfig", str(missing))
    assert code == 2 and f"cannot load Kubernetes credentials from --kubeconfig {missing}: " in err


@pytest.mark.timeout(30)  # the old code opened the FIFO, which blocks without a writer
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("/dev/null", "--trace /dev/null: is not a regular file (a device, pipe or socket)"),
        ("fifo", "--trace {tmp}/trace.fifo: is not a regular file"),
        ("dir", "--trace {tmp}: is a directory, not a trace file"),
        ("empty", "--trace {tmp}/empty.csv: is empty"),
    ],
)
def test_a_trace_that_is_not_a_readable_file_says_what_it_is(tmp_path: Path, name: str, message: str) -> None:
    os.mkfifo(tmp_path / "trace.fifo")
    (tmp_path / "empty.csv").touch()
    path = {"fifo": tmp_path / "trace.fifo", "dir": tmp_path, "empty": tmp_path / "empty.csv"}.get(name, name)
    code, err = run("--trace", str(path))
    assert code == 2 and message.format(tmp=tmp_path) in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("azure.csv/r.json", "--results {tmp}/azure.csv/r.json: {tmp}/azure.csv is not a folder"),
        ("azure.csv/sub/r.json", "--results {tmp}/azure.csv/sub/r.json: folder {tmp}/azure.csv/sub does not exist"),
        (".", "is a directory; give a file name"),
        ("/proc/r.json", "--results /proc/r.json: cannot write there"),
    ],
)
def test_an_unwritable_results_path_exits_2_before_the_replay(
    trace: Path, kubeconfig: Path, replays: list[float], tmp_path: Path, target: str, message: str
) -> None:
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--results", str(tmp_path / target))
    assert code == 2 and message.format(tmp=tmp_path) in err and err.startswith("inferscale emulate: ")
    assert replays == []


def test_a_missing_results_folder_is_refused_not_made_as_simulate_refuses_it(
    trace: Path, kubeconfig: Path, replays: list[float], tmp_path: Path
) -> None:
    out = tmp_path / "runs" / "today" / "r.json"
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--results", str(out))
    assert code == 2 and f"--results {out}: folder {out.parent} does not exist" in err
    assert replays == [] and not (tmp_path / "runs").exists()


def test_a_writable_results_path_is_left_as_it_was_by_the_check(
    trace: Path, kubeconfig: Path, replays: list[float], tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--results", str(out))
    assert code == 0, err
    assert replays and not out.exists()  # the fake replay writes nothing; the check left no file behind


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("azure.csv", "--targets-dir {tmp}/azure.csv: is not a folder"),  # a file where the folder would be
        ("azure.csv/targets", "--targets-dir {tmp}/azure.csv/targets: {tmp}/azure.csv is not a folder"),
        ("/proc/targets", "--targets-dir /proc/targets: cannot write there"),
    ],
)
def test_a_targets_folder_that_cannot_be_written_exits_2_before_the_replay(
    trace: Path, kubeconfig: Path, replays: list[float], tmp_path: Path, folder: str, message: str
) -> None:
    target = folder if folder.startswith("/") else str(tmp_path / folder)
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--targets-dir", target)
    assert code == 2 and message.format(tmp=tmp_path) in err and replays == []


def test_a_missing_targets_folder_is_left_for_the_replay_to_make(
    trace: Path, kubeconfig: Path, replays: list[float], tmp_path: Path
) -> None:
    folder = tmp_path / "prometheus" / "targets"
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--targets-dir", str(folder))
    assert code == 0, err
    assert replays and not (tmp_path / "prometheus").exists()


def test_the_results_are_never_written_over_the_trace_even_by_another_name(
    trace: Path, kubeconfig: Path, replays: list[float], tmp_path: Path
) -> None:
    linked = tmp_path / "results.json"
    os.link(trace, linked)  # a hard link: another path, the same file
    for results in (trace, linked):
        code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig), "--results", str(results))
        assert code == 2 and f"--results {results} is the trace itself" in err
    assert replays == [] and trace.read_text() == AZURE


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(60)  # the old code replayed the whole trace to nobody, then waited a minute for it to drain
@pytest.mark.parametrize(
    ("status", "message"),
    [
        (404, "inferscale emulate: deployment default/llm not found\n"),
        (403, 'inferscale emulate: cannot read deployment default/llm and its pods: HTTP 403: "llm" is forbidden\n'),
        (None, "inferscale emulate: cannot read deployment default/llm and its pods: no complete answer from the API"),
    ],
)
def test_a_deployment_that_cannot_be_read_is_one_line_and_exit_code_2_before_the_replay(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int | None, message: str
) -> None:
    if status is not None:

        async def refuse(self: KubeApi, path: str) -> dict[str, Any]:
            if "/deployments/" in path:
                raise KubeError(status, '"llm" is forbidden' if status == 403 else '"llm" not found')
            return {}  # the namespace exists

        monkeypatch.setattr(KubeApi, "get", refuse)
    config = tmp_path / "kubeconfig"  # the API server's address, with nothing listening there
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{closed_port()}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    results = tmp_path / "r.json"
    code, err = run("--trace", str(trace), "--kubeconfig", str(config), "--results", str(results))
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not results.exists()


def test_no_request_finished_is_exit_code_1(trace: Path, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from inferscale.emulator import Emulator

    async def nobody_served(self: Emulator, stop: object = None) -> dict[str, object]:
        return {"finished": 0, "requests": 2, "slo_attainment": 0.0, "timeline": [{"ready": 0}]}

    monkeypatch.setattr(Emulator, "run", nobody_served)
    code, err = run("--trace", str(trace), "--kubeconfig", str(kubeconfig))
    assert code == 1 and "no request finished: no pod of llm was Ready during the replay" in err


def test_sigterm_ends_the_replay_with_its_summary(
    trace: Path, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inferscale.emulator import Emulator

    async def until_stopped(self: Emulator, stop: asyncio.Event | None = None) -> dict[str, object]:
        assert stop is not None
        signal.raise_signal(signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 10)
        return {"finished": 1, "requests": 1, "slo_attainment": 1.0, "interrupted": True}

    def unhandled(signum: int, frame: object) -> None:
        raise AssertionError("SIGTERM reached the process: the replay would have died without a summary")

    monkeypatch.setattr(Emulator, "run", until_stopped)
    before = signal.signal(signal.SIGTERM, unhandled)
    try:
        result = runner.invoke(
            app, ["emulate", "--deployment", "llm", "--trace", str(trace), "--kubeconfig", str(kubeconfig)]
        )
    finally:
        signal.signal(signal.SIGTERM, before)
    assert result.exit_code == 128 + signal.SIGTERM, result.output
    assert "1/1 requests finished, SLO attainment 100.0% (stopped by SIGTERM)" in result.stdout
