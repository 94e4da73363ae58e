"""`inferscale run` as a subprocess against the test cluster, with its output kept for assertions."""

from __future__ import annotations

import pathlib
import signal
import socket
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from tests.e2e.cluster import REPO, Cluster, eventually

INFERSCALE = str(REPO / ".venv" / "bin" / "inferscale")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        interval: str = "5s",
        extra_env: dict[str, str] | None = None,
        prometheus_url: str | None = None,
        extra_args: Sequence[str] = (),
    ):
        self.cluster, self.namespace, self.interval = cluster, namespace, interval
        self.prometheus_url = prometheus_url or cluster.prometheus_url
        self.extra_args = list(extra_args)
        self.port = free_port()
        self.env = {**cluster.env(), **(extra_env or {})}
        self.log = pathlib.Path(tempfile.mkstemp(prefix=f"inferscale-{namespace}-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> OperatorProcess:
        args = [
            INFERSCALE,
            "run",
            "--namespace",
            self.namespace,
            "--prometheus-url",
            self.prometheus_url,
            "--interval",
            self.interval,
            "--metrics-port",
            str(self.port),
            *self.extra_args,
        ]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=REPO)
        eventually(self.healthy, 60, "the operator's /healthz")
        return self

    def healthy(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"inferscale run exited with {self.proc.returncode}:\n{self.output()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def metrics(self, timeout: float = 5) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=timeout) as r:
            return str(r.read().decode())

    def metric_values(self, timeout: float = 5) -> dict[str, float]:
        """/metrics as {series with its labels, as exposed: value}."""
        out = {}
        for line in self.metrics(timeout).splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash or an OOM kill."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.kill()

    def assert_no_tracebacks(self) -> None:
        text = self.output()
        assert "Traceback (most recent call last)" not in text, text[-4000:]


@contextmanager
def running(op: OperatorProcess) -> Iterator[OperatorProcess]:
    """Started for the block and stopped after it, whatever happened; a traceback in its log fails a block
    that passed."""
    try:
        yield op.start()
    finally:
        op.stop()
    op.assert_no_tracebacks()
