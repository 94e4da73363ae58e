"""Access to the cluster the e2e tests run against: the local stack (started on demand) or the
cluster named by KUBECONFIG."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

REPO = pathlib.Path(__file__).resolve().parents[2]
E2E_DIR = REPO / ".e2e"
T = TypeVar("T")


@dataclass(frozen=True)
class Cluster:
    kubeconfig: str
    bin_dir: str | None  # the locally built binaries, None for an external cluster
    prometheus_url: str
    targets_dir: pathlib.Path  # Prometheus file-SD directory: write <name>.json to register a target
    local: bool  # kwok nodes, pod delays and GPU nodes are available

    def env(self) -> dict[str, str]:
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '')}"
        return env

    @property
    def kubectl_exe(self) -> str:
        return os.path.join(self.bin_dir, "kubectl") if self.bin_dir else "kubectl"

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.kubectl_exe, *args], input=input, capture_output=True, text=True, env=self.env(), timeout=120,
            check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def prometheus_query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        result = body["data"]["result"]
        assert isinstance(result, list)
        return result

    def register_target(self, name: str, address: str, labels: dict[str, str]) -> pathlib.Path:
        """Adds a scrape target through file-based service discovery (written atomically)."""
        self.targets_dir.mkdir(parents=True, exist_ok=True)
        path = self.targets_dir / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([{"targets": [address], "labels": labels}]))
        tmp.replace(path)
        return path


def start_local_cluster() -> Cluster:
    proc = subprocess.run(["bash", str(REPO / "e2e" / "cluster.sh"), "up"], cwd=REPO, check=False)
    if proc.returncode != 0:
        raise RuntimeError("e2e/cluster.sh up failed; see its output above and .e2e/logs/")
    env = _read_env(E2E_DIR / "env")
    return Cluster(
        kubeconfig=env["KUBECONFIG"],
        bin_dir=env["E2E_BIN"],
        prometheus_url=env["PROMETHEUS_URL"],
        targets_dir=pathlib.Path(env["E2E_PROMETHEUS_TARGETS"]),
        local=True,
    )


def external_cluster(kubeconfig: str) -> Cluster:
    return Cluster(
        kubeconfig=kubeconfig,
        bin_dir=None,
        prometheus_url=os.environ.get("PROMETHEUS_URL", "http://127.0.0.1:9090"),
        targets_dir=pathlib.Path(os.environ.get("E2E_PROMETHEUS_TARGETS", str(E2E_DIR / "prometheus" / "targets"))),
        local=False,
    )


def _read_env(path: pathlib.Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            out[key] = value.strip('"')
    return out


def eventually(probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """Polls `probe` until it returns something truthy; fails with `what` and the last value after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = probe()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)
