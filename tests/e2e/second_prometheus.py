"""A second, real Prometheus scraping the stack's targets, for the tests of how the operator reaches one
(TLS and basic auth in front of it, or the API server's proxy)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from tests.e2e.cluster import Cluster, eventually


@contextmanager
def second_prometheus(cluster: Cluster, d: Path, listen: str, ready: Callable[[], bool], *flags: str) -> Iterator[None]:
    """Runs it on `listen` with its data in `d` until the block ends; `ready` says when it answers (a
    request that fails is "not yet")."""
    (d / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 5s\n  evaluation_interval: 5s\nscrape_configs:\n- job_name: local\n"
        f"  honor_labels: true\n  file_sd_configs:\n  - files: ['{cluster.targets_dir}/*.json']\n"
        "    refresh_interval: 5s\n"
    )
    log = open(d / "prometheus.log", "wb")  # noqa: SIM115 - open for the process's whole life
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}",
         f"--web.listen-address={listen}", *flags],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip

    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {(d / 'prometheus.log').read_text()[-2000:]}")
        try:
            return ready()
        except requests.RequestException:
            return False

    try:
        eventually(answers, 30, f"the second Prometheus on {listen} to be ready")
        yield
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
