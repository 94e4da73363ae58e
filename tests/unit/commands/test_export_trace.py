"""`inferscale export-trace` against a real Prometheus, its TSDB backfilled by promtool with counters whose rates
are known, and the curve it writes replayed by the simulator's ServeGen loader."""

from __future__ import annotations

import csv
import io
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.unit.ship.helpers import tool
from typer.testing import CliRunner

from inferscale.cli import app
from inferscale.commands.export_trace import IDLE_RATE, MAX_STEPS, Window, chunks, to_csv, window_grid
from inferscale.sim.traces import load_rate_curve

STEP = 15  # seconds between samples
HOUR = 3600
# the data's first sample: whole hours, hours enough in the past that the backfilled blocks lie behind the head
T0 = (int(time.time()) // HOUR - 8) * HOUR
GAP = (T0 + 40 * 60, T0 + 50 * 60)  # no sample in (start, end]: the scrape stopped


def _pod(model: str, pod: str, ns: str = "llm") -> str:
    return f'namespace="{ns}",pod="{pod}",model_name="{model}"'


LONG = "llama-3-1-70b-instruct-vllm-production-us-east-1ab"
# (labels, requests/s in the first hour, in the second); each request 500 prompt tokens, 100 generated
COUNTERS = [
    (_pod("m", "vllm-m-7d9f8c6b5-x2x4q"), 1.0, 3.0),
    (_pod("m", "vllm-m-7d9f8c6b5-b7kqz"), 1.0, 1.0),
    (_pod("m", "canary-7d9f8c6b5-q7kmd"), 0.5, 0.5),  # another Deployment of the same model
    (_pod("other", "vllm-other-6c8d5f7b9-z9k2w"), 2.0, 2.0),  # another model in the namespace
    (_pod("m", "vllm-m-5b7c9d8f6-p2v8r", ns="elsewhere"), 7.0, 7.0),  # another namespace
    # a Deployment name of 50 characters: Kubernetes cuts <name>-<hash>- to 58 characters before the random 5
    (_pod("l", f"{LONG}-7d9f8c6x2x4q", ns="long"), 1.0, 1.0),
    (_pod("l", f"{LONG}-7d9f8c6b5-x2x4q", ns="long"), 0.5, 0.5),  # a ReplicaSet whose hash fits
    (_pod("l", f"{LONG}-canary-b7kqz", ns="long"), 4.0, 4.0),  # a Deployment named <name>-canary
]


def _openmetrics() -> str:
    lines = []
    for family, per_request in (
        ("vllm:request_success", 1),
        ("vllm:prompt_tokens", 500),
        ("vllm:generation_tokens", 100),
    ):
        lines.append(f"# TYPE {family} counter")
        for labels, first, second in COUNTERS:
            value = 0.0
            for t in range(T0, T0 + 2 * HOUR + 1, STEP):
                if t > T0:
                    value += (first if t <= T0 + HOUR else second) * STEP * per_request
                if not GAP[0] < t <= GAP[1]:
                    lines.append(f"{family}_total{{{labels}}} {value} {t}")
    lines += _busy()
    return "\n".join(lines) + "\n# EOF\n"


# Namespace "busy": a fleet that falls behind in the first hour and catches up in the second, one vLLM pod and one
# SGLang pod of model "b": (pod, finished/s, {gauge: (value at T0, growth/s in the first hour, in the second)})
BUSY = [
    (
        "vllm-b-7d9f8c6b5-x2x4q",
        "vllm",
        2.0,
        {"vllm:num_requests_waiting": (0.0, 1.0, -1.0), "vllm:num_requests_running": (8.0, 0.0, 0.0)},
    ),
    (
        "sglang-b-7d9f8c6b5-b7kqz",
        "sglang",
        1.0,
        {"sglang:num_queue_reqs": (5.0, 0.0, 0.5), "sglang:num_running_reqs": (4.0, 0.0, 0.0)},
    ),
]
BUSY_ARRIVALS = (2.0 + 1.0 + 1.0, 2.0 + 1.0 - 1.0 + 0.5)  # finished plus the growth in flight, per hour


def _busy() -> list[str]:
    times = [t for t in range(T0, T0 + 2 * HOUR + 1, STEP) if not GAP[0] < t <= GAP[1]]
    lines = []
    for pod, engine, finished, gauges in BUSY:
        labels = _pod("b", pod, ns="busy")
        requests = "vllm:request_success" if engine == "vllm" else "sglang:num_requests"
        for family, per_request in (
            (requests, 1),
            (f"{engine}:prompt_tokens", 500),
            (f"{engine}:generation_tokens", 100),
        ):
            lines.append(f"# TYPE {family} counter")
            lines += [f"{family}_total{{{labels}}} {(t - T0) * finished * per_request} {t}" for t in times]
        for gauge, (at_t0, first, second) in gauges.items():
            lines.append(f"# TYPE {gauge} gauge")
            for t in times:
                s = t - T0
                value = at_t0 + first * min(s, HOUR) + second * max(0, s - HOUR)
                lines.append(f"{gauge}{{{labels}}} {value} {t}")
    return lines


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus on the backfilled TSDB, scraping nothing."""
    promtool, server = tool("promtool", "make setup (Debian's prometheus)"), tool("prometheus", "make setup")
    root = tmp_path_factory.mktemp("prometheus")
    (root / "data.om").write_text(_openmetrics())
    made = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(root / "data.om"), str(root / "tsdb")],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    (root / "prometheus.yml").write_text("global: {}\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'tsdb'}"]
    args += [f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"]
    log = (root / "prometheus.log").open("w")
    proc = subprocess.Popen([server, *args], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (root / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "Prometheus was not ready within 60 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _until() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + 2 * HOUR))


def _export(url: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, ["export-trace", "--prometheus-url", url, "--until", _until(), "--since", "2h", *args]
    )
    return result.exit_code, result.stdout, result.stderr


def test_the_curve_holds_each_windows_rate_and_lengths_and_the_simulator_replays_it(
    prometheus: str, tmp_path: Path
) -> None:
    out = tmp_path / "m.csv"
    code, _, err = _export(prometheus, "-n", "llm", "--model", "m", "--deployment", "vllm-m", "--out", str(out))
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["window_start_s"] for r in rows] == [str(600 * k) for k in range(12)]
    rates = [float(r["total_rate_rps"]) for r in rows]
    # the two vllm-m pods: 2 req/s in the first hour, 4 in the second; the canary, the other model and the other
    # namespace left out; the scrape's gap a window without a sample, written as 0
    assert rates == pytest.approx([2, 2, 2, 2, 0, 2, 4, 4, 4, 4, 4, 4], abs=1e-6)
    assert {r["mean_input_tokens"] for i, r in enumerate(rows) if i != 4} == {"500.0"}
    assert {r["mean_output_tokens"] for i, r in enumerate(rows) if i != 4} == {"100.0"}
    assert (rows[4]["mean_input_tokens"], rows[4]["mean_output_tokens"]) == ("", "")
    assert "1 window(s) without a sample" in err and "peak 4.00 req/s" in err
    assert "mean 3.09 req/s" in err  # over the 11 windows seen: the gap is filled from them, not a zero
    # the loader reads it as ServeGen's, the gap filled from the windows beside it
    curve = load_rate_curve(out)
    assert [p.rate for p in curve] == pytest.approx([2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4])
    assert {(p.mean_input, p.mean_output) for p in curve} == {(500.0, 100.0)}


def test_a_fleet_that_fell_behind_reads_its_arrivals_not_its_completions(prometheus: str, tmp_path: Path) -> None:
    out = tmp_path / "b.csv"
    code, _, err = _export(prometheus, "-n", "busy", "--out", str(out))
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    rates = [float(r["total_rate_rps"]) for r in rows]
    first, second = BUSY_ARRIVALS
    # 3 req/s finished throughout (vLLM's 2 and SGLang's 1); what came is that plus the growth of the waiting and
    # running requests of both engines. The window after the scrape's gap has no count at its start: its
    # completions. The lengths are those of the requests finished.
    assert rates == pytest.approx([first] * 4 + [0.0, 3.0] + [second] * 6, abs=1e-6)
    assert {r["mean_input_tokens"] for i, r in enumerate(rows) if i != 4} == {"500.0"}
    assert {r["mean_output_tokens"] for i, r in enumerate(rows) if i != 4} == {"100.0"}
    assert "(SGLang and vLLM)" in err
    assert "fell behind in 4 window(s), finishing as little as 3.00 req/s of 4.00 arriving" in err
    assert "1 window(s) without a waiting or running count read as their completions" in err


def test_the_in_flight_query_is_the_one_the_export_reads_from_its_first_windows_start() -> None:
    from inferscale.adapters import prometheus
    from inferscale.commands import export_trace

    assert export_trace.IN_FLIGHT == prometheus.IN_FLIGHT
    assert prometheus.IN_FLIGHT in prometheus.build_traffic_queries("busy", None, None, "600s")


def test_a_long_deployment_names_pods_are_its_own_though_kubernetes_cut_their_names(prometheus: str) -> None:
    code, stdout, err = _export(prometheus, "-n", "long", "--deployment", LONG, "--out", "-")
    assert code == 0, err
    rates = [float(r["total_rate_rps"]) for r in csv.DictReader(io.StringIO(stdout))]
    assert rates[:4] == pytest.approx([1.5] * 4)  # both of its pods, not the canary's


def test_the_whole_model_counts_every_deployment_of_it_and_a_window_of_a_minute_reads_as_fine(
    prometheus: str, tmp_path: Path
) -> None:
    out = tmp_path / "all.csv"
    code, _, err = _export(prometheus, "-n", "llm", "--model", "m", "--window", "1m", "--out", str(out))
    assert code == 0, err
    rates = [float(r["total_rate_rps"]) for r in csv.DictReader(io.StringIO(out.read_text()))]
    assert len(rates) == 120
    assert rates[:40] == pytest.approx([2.5] * 40) and rates[50:60] == pytest.approx([2.5] * 10)
    assert rates[40:50] == [0.0] * 10 and rates[60:] == pytest.approx([4.5] * 60)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-n", "llm"], "namespace 'llm' serves 2 models ('m', 'other'): pick one with --model"),
        (["-n", "llm", "--model", "nope"], "Prometheus holds no request counter"),
        (["-n", "LLM"], "--namespace 'LLM' is not a namespace name"),
        (["-n", "llm", "--window", "30s"], "--window must be whole seconds and at least 1m"),
        (["-n", "llm", "--window", "3h"], "--window 3h is longer than --since 2h"),
        (["-n", "llm", "--window", "1m", "--since", "1m"], "--since 1m holds one --window 1m: a curve needs two"),
        (["-n", "llm", "--window", "1h", "--since", "90m"], "--since 90m holds one --window 1h"),
        (["-n", "llm", "--since", "a week"], "--since: invalid duration 'a week'"),
        # before anything is asked of Prometheus (the windows of 11 million years were built in memory first)
        (["-n", "llm", "--since", "99999999999h"], "--since 99999999999h reaches back before 1970 (Unix time 0)"),
        (["-n", "llm", "--since", "17520h", "--window", "1m"], "--since 17520h is 1,051,200 windows of --window 1m"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    prometheus: str, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "x.csv"
    code, stdout, err = _export(prometheus, *args, "--out", str(out))
    assert code == 2, stdout + err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_an_until_without_a_zone_and_a_prometheus_that_does_not_answer_are_said_in_a_line(tmp_path: Path) -> None:
    out = tmp_path / "x.csv"
    args = ["export-trace", "-n", "llm", "--out", str(out), "--until", "2026-12-01T00:00:00"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "--until '2026-12-01T00:00:00' has no time zone" in result.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket closes
    result = CliRunner().invoke(
        app, ["export-trace", "-n", "llm", "--out", str(out), "--prometheus-url", f"http://127.0.0.1:{port}"]
    )
    assert result.exit_code == 2, result.output
    assert f"error: Prometheus at http://127.0.0.1:{port}: cannot connect" in result.stderr
    assert not out.exists()


def test_a_long_export_is_read_in_range_queries_prometheus_accepts_each_window_once() -> None:
    window = 60.0
    start, end = window_grid(until=14 * 24 * HOUR + 59, since=14 * 24 * HOUR, window=window)
    assert (start, end) == (0.0, 14 * 24 * HOUR)
    parts = chunks(start, end, window)
    ends = [t for first, last in parts for t in range(int(first), int(last) + 1, int(window))]
    assert ends == list(range(60, 14 * 24 * HOUR + 1, 60))  # 20,160 window ends, none twice, none left out
    assert all((last - first) / window + 1 <= MAX_STEPS for first, last in parts) and len(parts) == 3


def test_the_curve_goes_to_stdout_with_a_dash(prometheus: str) -> None:
    code, stdout, err = _export(prometheus, "-n", "llm", "--model", "other", "--out", "-")
    assert code == 0, err
    assert stdout.splitlines()[0] == "window_start_s,total_rate_rps,mean_input_tokens,mean_output_tokens"
    assert len(stdout.splitlines()) == 13 and "to stdout" in err


def test_a_window_in_which_nothing_arrived_replays_idle_and_a_gap_is_filled(tmp_path: Path) -> None:
    series = [
        Window(0.0, 2.0, 0.0, 500.0, 100.0),
        Window(600.0, 0.0, 0.0, None, None),  # nothing arrived: idle, not a gap
        Window(1200.0, None, None, None, None),  # no sample: a gap
        Window(1800.0, 0.5, -1.0, 500.0, 100.0),  # the queue drained faster than anything came: none arrived
        Window(2400.0, 2.0, 0.0, 500.0, 100.0),
    ]
    out = tmp_path / "idle.csv"
    out.write_text(to_csv(series))
    rates = [p.rate for p in load_rate_curve(out)]
    assert rates[1] == rates[3] == pytest.approx(IDLE_RATE)
    assert rates[2] == pytest.approx((IDLE_RATE + IDLE_RATE) / 2)  # filled from the windows beside it
    assert rates[0] == rates[4] == 2.0
