"""The operator's startup handler, which kopf runs again when it fails."""

from __future__ import annotations

import socket
from pathlib import Path

import kopf
import pytest

from inferscale.handlers import metrics
from inferscale.handlers.operator import OperatorConfig, cleanup, startup

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def _registered_counts() -> int:
    return sum(isinstance(c, metrics.RequestCounts) for c in list(metrics.REGISTRY._collector_to_names))


async def test_a_startup_retried_after_its_port_was_busy_starts_clean(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    busy = socket.socket()
    busy.bind(("0.0.0.0", 0))
    busy.listen()
    port = busy.getsockname()[1]
    memo = kopf.Memo(config=OperatorConfig("http://127.0.0.1:9", 10.0, ["ns"], port, kubeconfig=str(kubeconfig)))
    before = _registered_counts()
    with pytest.raises(OSError, match="address already in use"):
        await startup(settings=kopf.OperatorSettings(), memo=memo)
    assert _registered_counts() == before  # nothing of the failed attempt stays registered
    busy.close()
    try:
        await startup(settings=kopf.OperatorSettings(), memo=memo)  # kopf's retry: its own error, if any
        assert _registered_counts() == before + 1
    finally:
        await cleanup(memo=memo)
    assert _registered_counts() == before
