"""E2e tests run by default, against the local stack (started when needed) or, when KUBECONFIG
names another cluster, against that one. Opt out explicitly with INFERSCALE_SKIP_E2E=1."""

from __future__ import annotations

import os
import pathlib
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.cluster import E2E_DIR, REPO, Cluster, eventually, external_cluster, start_local_cluster
from tests.e2e.exporter import Exporter
from tests.e2e.operator_proc import OperatorProcess
from tests.e2e.proxy import Proxy
from tests.e2e.test_stack import gpu_deployment

_SKIP = os.environ.get("INFERSCALE_SKIP_E2E", "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.e2e)
            if _SKIP:
                item.add_marker(pytest.mark.skip(reason="INFERSCALE_SKIP_E2E is set: e2e tests skipped on request"))


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    kc = os.environ.get("KUBECONFIG")
    if kc and os.path.abspath(kc) != str(E2E_DIR / "kubeconfig"):
        yield external_cluster(kc)
        return
    was_running = subprocess.run(
        ["bash", str(REPO / "e2e" / "cluster.sh"), "status"], capture_output=True, text=True, check=False
    ).stdout.count(": running")
    c = start_local_cluster()
    yield c
    # Leave a cluster that was already running (make cluster) as it was; stop one we started.
    if not was_running and not os.environ.get("INFERSCALE_KEEP_CLUSTER"):
        subprocess.run(["bash", str(REPO / "e2e" / "cluster.sh"), "down"], check=False)


@pytest.fixture
def local_cluster(cluster: Cluster) -> Cluster:
    if not cluster.local:
        pytest.skip("needs the local stack (kwok GPU nodes and pod delays)")
    return cluster


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    # Pods are refused until the controller-manager has created the namespace's default ServiceAccount.
    eventually(
        lambda: cluster.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        60,
        f"the default ServiceAccount in {name}",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "crds/inferscale.dev_inferenceservices.yaml")
    cluster.kubectl("wait", "--for=condition=Established", "crd/inferenceservices.inferscale.dev", "--timeout=60s")


@pytest.fixture
def target(cluster: Cluster, namespace: str) -> Iterator[Exporter]:
    """A 1-replica GPU Deployment and a metrics fixture following its Ready pods."""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("llm", 1, 1))
    exporter = Exporter(cluster, namespace, "llm", "m").start()
    yield exporter
    exporter.stop()


@pytest.fixture
def operator(cluster: Cluster, namespace: str) -> Iterator[OperatorProcess]:
    op = OperatorProcess(cluster, namespace, interval="5s")
    yield op
    op.stop()
    op.assert_no_tracebacks()


@pytest.fixture
def proxied(local_cluster: Cluster, tmp_path: pathlib.Path) -> Iterator[tuple[Proxy, pathlib.Path]]:
    """A proxy in front of the local API server, and a kubeconfig that reaches the server through it (another
    cluster's certificate need not name 127.0.0.1)."""
    config = yaml.safe_load(local_cluster.kubectl("config", "view", "--raw", "--minify").stdout)
    server = urllib.parse.urlparse(config["clusters"][0]["cluster"]["server"])
    proxy = Proxy(server.hostname or "127.0.0.1", server.port or 443).start()
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"  # the certificate names the IP
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    yield proxy, path
    proxy.stop()
