"""Faults on the local stack's processes, by pid (reference/reliability-testing.md §5.1): SIGKILL and a
restart with the same command line, environment and log, or SIGSTOP and SIGCONT.

`e2e/cluster.sh` records each component's pid in `.e2e/pids/<name>.pid`; a restarted process is
recorded there too, so `cluster.sh down` and `status` keep working on it. Every fault is a context
manager that puts the component back, and waits until it answers again, whatever the test did
inside: one failed test must not leave the shared stack broken for the next.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tests.e2e.cluster import E2E_DIR, Cluster, eventually

# How long a restarted component may take to answer again (kube-apiserver replays its caches from etcd).
RECOVERY = 120.0


@dataclass(frozen=True)
class Process:
    """What it takes to start a component again exactly as it ran."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: str


class Faults:
    def __init__(self, cluster: Cluster, e2e_dir: pathlib.Path = E2E_DIR) -> None:
        if not cluster.local:
            raise RuntimeError("process faults need the local stack (e2e/cluster.sh), not an external cluster")
        self.cluster = cluster
        self.pids, self.logs = e2e_dir / "pids", e2e_dir / "logs"
        self._children: list[subprocess.Popen[bytes]] = []

    def _recorded_pid(self, name: str) -> int:
        return int((self.pids / f"{name}.pid").read_text().strip())

    def pid(self, name: str) -> int:
        pid = self._recorded_pid(name)
        if not _alive(pid):
            raise ProcessLookupError(f"{name} (pid {pid}) is not running")
        return pid

    def snapshot(self, name: str) -> Process:
        pid = self.pid(name)
        proc = pathlib.Path(f"/proc/{pid}")
        argv = [a.decode() for a in proc.joinpath("cmdline").read_bytes().split(b"\0")[:-1]]  # "" args kept
        pairs = (e.decode(errors="replace").split("=", 1) for e in proc.joinpath("environ").read_bytes().split(b"\0"))
        env = {kv[0]: kv[1] for kv in pairs if len(kv) == 2}
        return Process(name, argv, env, os.readlink(proc / "cwd"))

    def kill(self, name: str) -> None:
        """SIGKILL, as an OOM kill or a node losing power would."""
        pid = self.pid(name)
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: not _alive(pid), 30, f"{name} (pid {pid}) to exit after SIGKILL")
        for child in self._children:
            child.poll()  # reap what this run started, so a killed child is not a zombie that reads as alive

    def start(self, process: Process) -> int:
        with open(self.logs / f"{process.name}.log", "ab") as log:
            child = subprocess.Popen(
                process.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=process.env,
                cwd=process.cwd,
                start_new_session=True,  # outlives this test run, like the processes cluster.sh started
            )
        self._children.append(child)
        (self.pids / f"{process.name}.pid").write_text(f"{child.pid}\n")
        return child.pid

    @contextlib.contextmanager
    def killed(self, name: str) -> Iterator[Process]:
        """`name` is down inside the block; started again with the same flags after it, and waited for."""
        process = self.snapshot(name)
        try:
            self.kill(name)
            yield process
        finally:
            if not _alive(self._recorded_pid(name)):
                self.start(process)
            self.wait_healthy(name)

    @contextlib.contextmanager
    def stopped(self, name: str) -> Iterator[int]:
        """`name` is frozen (SIGSTOP) inside the block: its sockets still accept connections, nothing answers."""
        with self.stopped_pid(self.pid(name)) as pid:
            yield pid
        self.wait_healthy(name)

    @contextlib.contextmanager
    def stopped_pid(self, pid: int) -> Iterator[int]:
        """Any process of the test's, frozen inside the block (the operator: a long GC pause, a throttled pod)."""
        os.kill(pid, signal.SIGSTOP)
        try:
            yield pid
        finally:
            os.kill(pid, signal.SIGCONT)

    def wait_healthy(self, name: str) -> None:
        probe = self._probes().get(name)
        if probe is not None:
            eventually(probe, RECOVERY, f"{name} to answer again", interval=1.0)

    def _probes(self) -> dict[str, Callable[[], bool]]:
        return {
            "prometheus": lambda: _http_ok(f"{self.cluster.prometheus_url}/-/ready"),
            "kube-apiserver": self._api_ready,
            "etcd": lambda: _http_ok("http://127.0.0.1:2379/health") and self._api_ready(),
        }

    def _api_ready(self) -> bool:
        return self.cluster.kubectl("get", "--raw=/readyz", check=False).returncode == 0


def bindable(port: int) -> bool:
    """Whether a listener can bind 127.0.0.1:`port` as Go's does (SO_REUSEADDR). A killed server's
    connections to a client that was frozen linger in closing states, and while they do kube-apiserver
    cannot bind its port again."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"  # a zombie has exited; its parent has not reaped it
    except FileNotFoundError:
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return bool(r.status == 200)
    except OSError:
        return False
