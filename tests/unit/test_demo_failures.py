"""`make demo`'s ways to fail: each ends in one line and exit code 1 (or 2 for a bad flag), and no child
process outlives the demo. The cluster, kubectl, helm and the two children are stand-ins."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from e2e import demo

RESULT = {
    "requests": 100,
    "finished": 100,
    "slo_attainment": 0.97,
    "missed_ttft": 3,
    "missed_itl_only": 0,
    "ttft_p95_s": 0.3,
    "ttft_p99_s": 0.6,
    "gpu_hours": 0.5,
    "static_peak_replicas": 10,
    "static_peak_gpu_hours": 0.9,
    "timeline": [{"t": 0, "arrivals_per_s": 1, "pods": 3, "ready": 3, "waiting": 0, "kv": 0.1}],
}


class Child:
    """A child process: `exits` is its exit code once it has stopped by itself (None: runs until signalled)."""

    def __init__(self, exits: int | None) -> None:
        self.returncode = exits
        self.signals: list[int] = []

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        self.returncode = -sig

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Demo:
    def __init__(self) -> None:
        self.ready = 99
        self.operator = Child(None)
        self.emulator = Child(0)
        self.result: dict[str, Any] = dict(RESULT)
        self.cluster_started = False
        self.started: list[list[str]] = []

    def sh(self, *args: str, **_: Any) -> str:
        if args[:3] == ("kubectl", "get", "deployment"):
            return json.dumps({"status": {"readyReplicas": self.ready}})
        if args[:3] == ("kubectl", "get", "events"):
            return json.dumps({"items": []})
        return ""

    def run(self, *_: Any, **__: Any) -> types.SimpleNamespace:
        self.cluster_started = True
        return types.SimpleNamespace(returncode=0)

    def popen(self, argv: list[str], **_: Any) -> Child:
        self.started.append(argv)
        if argv[1] == "emulate":
            (demo.OUT / "emulator.json").write_text(json.dumps(self.result))
            return self.emulator
        return self.operator


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Demo:
    d = Demo()
    monkeypatch.setattr(demo, "OUT", tmp_path)
    monkeypatch.setattr(demo, "sh", d.sh)
    monkeypatch.setattr(
        demo, "read_env", lambda: {"E2E_BIN": "/none", "PROMETHEUS_URL": "x", "E2E_PROMETHEUS_TARGETS": "t"}
    )
    monkeypatch.setattr(demo, "warm_replicas", lambda *_: 3)
    monkeypatch.setattr(demo, "operator_kubeconfig", lambda _: tmp_path / "kubeconfig")
    monkeypatch.setattr(demo, "plot", lambda *_: None)
    monkeypatch.setattr(demo, "exit_on_signals", lambda: None)  # pytest's own handlers stay
    monkeypatch.setattr(
        demo,
        "subprocess",
        types.SimpleNamespace(
            run=d.run, Popen=d.popen, STDOUT=subprocess.STDOUT, TimeoutExpired=subprocess.TimeoutExpired
        ),
    )
    (tmp_path / "operator.log").write_text("")
    return d


def test_a_duration_in_minutes_is_read_as_emulate_reads_it() -> None:
    assert demo.parse_args(["--duration", "5m"]).duration == 300.0


def test_a_bad_duration_fails_before_the_cluster_starts(fake: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        demo.main(["--duration", "soon"])
    assert e.value.code == 2 and "--duration: invalid duration 'soon'" in capsys.readouterr().err
    assert not fake.cluster_started


def test_the_whole_demo_with_stand_ins_passes_the_duration_on_in_seconds(fake: Demo) -> None:
    assert demo.main(["--duration", "5m"]) == 0
    emulate = next(a for a in fake.started if a[1] == "emulate")
    assert emulate[emulate.index("--duration") + 1] == "300s"


@pytest.mark.timeout(30)  # the old view waited for the emulator alone, 2 s at a time
def test_an_operator_that_exits_fails_the_demo(fake: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    fake.operator, fake.emulator = Child(1), Child(None)
    assert demo.main([]) == 1
    assert f"demo: the operator exited with 1; see {demo.OUT / 'operator.log'}" in capsys.readouterr().err
    assert fake.emulator.signals == [signal.SIGTERM]  # the replay stopped with the demo


def test_a_replay_that_served_nobody_fails_the_demo_in_one_line(fake: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    fake.result.update(finished=0, slo_attainment=0.0, ttft_p95_s=None, ttft_p99_s=None)
    fake.result["timeline"] = [{"t": 0, "arrivals_per_s": 1, "pods": 3, "ready": 0, "waiting": 9, "kv": None}]
    assert demo.main([]) == 1
    err = capsys.readouterr().err
    assert "demo: no request finished: no pod of llama-8b was Ready during the replay" in err
    assert "Traceback" not in err


def test_the_summary_prints_a_missing_value_as_a_dash(capsys: pytest.CaptureFixture[str]) -> None:
    demo.report({**RESULT, "ttft_p95_s": None, "ttft_p99_s": None, "slo_attainment": None})
    assert "TTFT P95 -s, P99 -s" in capsys.readouterr().out


def test_a_fleet_that_never_becomes_ready_stops_the_demo(
    fake: Demo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.ready = 1
    monkeypatch.setattr(demo, "READY_TIMEOUT", 0.05)
    monkeypatch.setattr(demo, "READY_POLL", 0.01)
    assert demo.main([]) == 1
    assert "demo: 1 of 3 pods of llama-8b became Ready in 0 s" in capsys.readouterr().err
    assert fake.operator.signals == [] and not (demo.OUT / "emulator.json").exists()  # neither child started


def test_sigterm_and_sighup_exit_through_the_finally_blocks() -> None:
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        demo.exit_on_signals()
        for sig in saved:
            with pytest.raises(SystemExit) as e:
                signal.raise_signal(sig)
            assert e.value.code == 128 + sig
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.mark.timeout(60)
def test_no_child_outlives_the_view_however_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    # the operator ignores SIGTERM, as a hung process would: it is killed after the wait
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
    operator = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE)
    emulator = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert operator.stdout is not None and operator.stdout.readline() == b"\n"  # its handler is in place

    def interrupted(*_: Any) -> list[dict[str, Any]]:
        raise SystemExit(128 + signal.SIGTERM)  # what exit_on_signals raises

    monkeypatch.setattr(demo, "live", interrupted)
    stop = demo.stop
    monkeypatch.setattr(demo, "stop", lambda proc, sig, timeout: stop(proc, sig, min(timeout, 1.0)))
    with pytest.raises(SystemExit):
        demo.watch({}, operator, emulator, 1.0)
    assert emulator.returncode == -signal.SIGTERM and operator.returncode == -signal.SIGKILL
    operator.stdout.close()
