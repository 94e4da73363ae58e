"""The operator against a real Prometheus that serves only TLS (a private CA) and only to basic auth, as
`--web.config.file` sets it up: with the CA and the password it scales as usual; without either it holds
the count and its status says which flag is missing."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.e2e.cluster import Cluster, eventually
from tests.e2e.exporter import Exporter
from tests.e2e.infsvc import condition, metrics_condition, replicas, scale_up_status, service, status
from tests.e2e.operator_proc import OperatorProcess, free_port, running
from tests.e2e.second_prometheus import second_prometheus

USER, PASSWORD = "inferscale", "e2e-prometheus-password"
# bcrypt of PASSWORD (cost 4, so that Prometheus checks it quickly), as Prometheus's web config wants it
HASH = "$2b$04$Vli6MMkrCoEbKDMHXcDiw.Up31ZyH6kpeq/vQwNaHzQdhwtQmEhs."

pytestmark = pytest.mark.usefixtures("crd")


@dataclass
class Secured:
    url: str
    ca: Path
    password: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def secured(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """A second Prometheus scraping the same targets, over TLS with a CA of its own and basic auth."""
    d = tmp_path_factory.mktemp("secured-prometheus")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=inferscale e2e CA", cwd=d)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d)  # fmt: skip
    (d / "web.yml").write_text(
        f"tls_server_config:\n  cert_file: {d / 'server.pem'}\n  key_file: {d / 'server.key'}\n"
        f"basic_auth_users:\n  {USER}: {HASH}\n"
    )
    (d / "password").write_text(PASSWORD + "\n")
    port = free_port()
    url = f"https://127.0.0.1:{port}"

    def ready() -> bool:
        return requests.get(f"{url}/-/ready", verify=str(d / "ca.pem"), auth=(USER, PASSWORD), timeout=2).ok

    with second_prometheus(cluster, d, f"127.0.0.1:{port}", ready, f"--web.config.file={d / 'web.yml'}"):
        # the guard is real: no answer without the password
        assert requests.get(f"{url}/-/ready", verify=str(d / "ca.pem"), timeout=2).status_code == 401
        yield Secured(url, d / "ca.pem", d / "password")


def _operator(cluster: Cluster, namespace: str, secured: Secured, *args: str) -> OperatorProcess:
    return OperatorProcess(cluster, namespace, interval="5s", prometheus_url=secured.url, extra_args=args)


def test_with_the_ca_and_the_password_the_operator_scales_on_a_secured_prometheus(
    cluster: Cluster, namespace: str, target: Exporter, secured: Secured
) -> None:
    target.set(kv=0.95, waiting=20, running=30)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    args = ["--prometheus-ca-file", str(secured.ca), "--prometheus-username", USER,
            "--prometheus-password-file", str(secured.password)]  # fmt: skip
    with running(_operator(cluster, namespace, secured, *args)) as op:
        eventually(lambda: replicas(cluster, namespace) > 1, 90, "a scale-up read through TLS and basic auth")
        st = scale_up_status(cluster, namespace)
        metrics = condition(st, "MetricsAvailable")
        assert metrics is not None and metrics["status"] == "True", metrics
        assert "basic auth as inferscale; CA" in op.output()  # the start line says how it reaches Prometheus
        assert PASSWORD not in op.output()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("password only", "the TLS certificate is not trusted"),
        ("CA only", "answered HTTP 401: it wants credentials"),
    ],
)
def test_without_the_ca_or_the_password_the_count_holds_and_status_names_the_flag(
    cluster: Cluster, namespace: str, target: Exporter, secured: Secured, given: str, said: str
) -> None:
    target.set(kv=0.95, waiting=20, running=30)  # a saturation the operator cannot see
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    args = (
        ["--prometheus-username", USER, "--prometheus-password-file", str(secured.password)]
        if given == "password only"
        else ["--prometheus-ca-file", str(secured.ca)]
    )
    with running(_operator(cluster, namespace, secured, *args)):
        found = eventually(
            lambda: (c := metrics_condition(cluster, namespace)) is not None and c["status"] == "False" and c,
            60,
            "MetricsAvailable=False",
        )
        assert said in found["message"], found
        flag = "--prometheus-ca-file" if given == "password only" else "--prometheus-password-file"
        assert flag in found["message"], found
        started = time.monotonic()
        eventually(lambda: status(cluster, namespace).get("desiredReplicas") == 1, 30, "a held decision")
        assert replicas(cluster, namespace) == 1, f"held for {time.monotonic() - started:.0f}s"
