"""The operator's `--prometheus-bearer-token-file` and `--prometheus-ca-file` against real components: a
second, plain-HTTP Prometheus reached only through the kube-apiserver's service proxy
(`/api/v1/namespaces/NS/services/NAME:PORT/proxy`), with ServiceAccount tokens minted by the apiserver.

The service proxy stands in for kube-rbac-proxy in front of OpenShift's thanos-querier: it authenticates a
ServiceAccount bearer token as a TokenReview would, authorizes it with RBAC (`services/proxy`: get for a
GET, create for a POST) and serves TLS from a CA of the cluster's own; its URL also has a path prefix. With a
token that may proxy, the operator scales as usual; with one RBAC refuses, it holds the count and its status
says Prometheus refused the credentials (HTTP 403); and when the token file is replaced the way the kubelet
replaces a projected token (a new `..data` symlink renamed over the old), it picks up the new token without
a restart."""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.e2e.cluster import Cluster, eventually
from tests.e2e.exporter import Exporter
from tests.e2e.infsvc import (
    TICK,
    condition,
    metrics_condition,
    replicas,
    sample_replicas,
    scale_up_status,
    service,
    status,
)
from tests.e2e.operator_proc import OperatorProcess, running
from tests.e2e.second_prometheus import second_prometheus

pytestmark = pytest.mark.usefixtures("crd")

SERVICE, PORT = "thanos-querier", 9091  # the names OpenShift gives its guarded querier
REFUSED = "Prometheus refused the operator's credentials (HTTP 403)"


def _routable_ipv4() -> str | None:
    """An IPv4 address of this machine the apiserver's proxy will dial: it refuses loopback and link-local."""
    candidates: list[str] = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # UDP: no packet is sent, the kernel only picks the route's source address
        candidates.append(str(s.getsockname()[0]))
    with contextlib.suppress(OSError):  # no route at all: the addresses the host name resolves to
        candidates += [str(a[4][0]) for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    for text in candidates:
        ip = ipaddress.ip_address(text)
        if not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast):
            return text
    return None


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Backend:
    ip: str
    port: int


@pytest.fixture(scope="module")
def backend(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    """A second Prometheus scraping the same targets, plain HTTP without auth, on a non-loopback address."""
    if not cluster.local:
        pytest.skip("the apiserver must dial a Prometheus on this machine: needs the local stack")
    ip = _routable_ipv4()
    if ip is None:
        pytest.skip("this machine has no non-loopback, non-link-local IPv4 address for the apiserver's proxy to dial")
    d = tmp_path_factory.mktemp("backend-prometheus")
    port = _free_port(ip)

    def ready() -> bool:
        return requests.get(f"http://{ip}:{port}/-/ready", timeout=2).ok

    with second_prometheus(cluster, d, f"{ip}:{port}", ready):
        yield Backend(ip, port)


@dataclass
class Guarded:
    url: str  # the service-proxy URL the operator is given, no trailing slash
    ca: Path  # the apiserver's CA
    reader: str  # a token RBAC lets through
    stranger: str  # a valid token without the grant
    dir: Path


def _apiserver(cluster: Cluster, into: Path) -> tuple[str, Path]:
    """The apiserver's URL and its CA (written to a file) from the kubeconfig."""
    cfg = json.loads(cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    entry = cfg["clusters"][0]["cluster"]
    ca = into / "apiserver-ca.pem"
    if entry.get("certificate-authority-data"):
        ca.write_bytes(base64.b64decode(entry["certificate-authority-data"]))
    else:
        src = Path(entry["certificate-authority"])
        ca.write_bytes((src if src.is_absolute() else Path(cluster.kubeconfig).parent / src).read_bytes())
    return str(entry["server"]).rstrip("/"), ca


def _backend_objects(namespace: str, backend: Backend) -> str:
    """A selector-less Service and its hand-made Endpoints and EndpointSlice. The proxy dials an address only
    when it names a Pod of the namespace with that IP, so a Pod no scheduler binds (nothing runs it, nothing
    rewrites its status) is given the backend's IP below."""
    pod = {"kind": "Pod", "name": "prometheus-backend", "namespace": namespace}
    items = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "prometheus-backend", "labels": {"app": "backend"}},
         "spec": {"schedulerName": "inferscale-e2e-nobody",
                  "containers": [{"name": "prometheus", "image": "quay.io/prometheus/prometheus"}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE},
         "spec": {"ports": [{"name": "web", "port": PORT, "targetPort": backend.port}]}},
        {"apiVersion": "v1", "kind": "Endpoints",  # what the proxy reads; not mirrored, the slice is given
         "metadata": {"name": SERVICE, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
         "subsets": [{"addresses": [{"ip": backend.ip, "targetRef": pod}],
                      "ports": [{"name": "web", "port": backend.port}]}]},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": f"{SERVICE}-manual", "labels": {"kubernetes.io/service-name": SERVICE}},
         "addressType": "IPv4", "endpoints": [{"addresses": [backend.ip], "targetRef": pod}],
         "ports": [{"name": "web", "port": backend.port}]},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "stranger"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "query-prometheus"},
         "rules": [{"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": [f"{SERVICE}:{PORT}"],
                    "verbs": ["get", "create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "reader"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "query-prometheus"},
         "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]},
    ]  # fmt: skip
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.fixture
def guarded(cluster: Cluster, namespace: str, backend: Backend, tmp_path: Path) -> Guarded:
    """The second Prometheus behind the apiserver's proxy in the test's namespace, with the guard proven."""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=_backend_objects(namespace, backend))
    ip = json.dumps({"status": {"podIP": backend.ip, "podIPs": [{"ip": backend.ip}]}})
    cluster.kubectl("patch", "pod", "prometheus-backend", "-n", namespace, "--subresource=status",
                    "--type=merge", "-p", ip)  # fmt: skip
    server, ca = _apiserver(cluster, tmp_path)
    url = f"{server}/api/v1/namespaces/{namespace}/services/{SERVICE}:{PORT}/proxy"

    def token(sa: str) -> str:
        return cluster.kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()

    reader, stranger = token("reader"), token("stranger")

    def get(path: str, bearer: str | None) -> requests.Response:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else {}
        return requests.get(f"{url}{path}", headers=headers, verify=str(ca), timeout=10)

    def answers(bearer: str) -> bool:
        r = get("/api/v1/query?query=up", bearer)
        return r.status_code == 200 and r.json()["status"] == "success"

    # RBAC reaches the apiserver's authorizer through an informer: the binding takes a moment to count
    eventually(lambda: answers(reader), 30, "the reader's query through the apiserver's proxy")
    flags = get("/api/v1/status/flags", reader).json()["data"]
    assert flags["web.listen-address"] == f"{backend.ip}:{backend.port}", flags  # the second Prometheus answers
    posted = requests.post(f"{url}/api/v1/query", data={"query": "up"}, headers={"Authorization": f"Bearer {reader}"},
                           verify=str(ca), timeout=10)  # fmt: skip
    assert posted.status_code == 200, posted.text  # a POST is RBAC's create, granted as well
    # the guard is real: anonymous, a forged token and a valid token without the grant are all refused
    assert get("/api/v1/query?query=up", None).status_code in (401, 403)
    assert get("/api/v1/query?query=up", "not-a-service-account-token").status_code == 401
    # a valid token (its ServiceAccount known to the authenticator: 403, not 401) RBAC does not let through
    eventually(lambda: get("/api/v1/query?query=up", stranger).status_code == 403, 30, "the stranger's HTTP 403")
    return Guarded(url, ca, reader, stranger, tmp_path)


class ProjectedToken:
    """A token file laid out as the kubelet projects one: `token -> ..data/token`, `..data -> ..<timestamp>`;
    a new token goes into a new directory and a new `..data` symlink is renamed over the old one (the kubelet's
    AtomicWriter), so a reader sees the old file or the new, never a half-written one."""

    def __init__(self, root: Path, token: str) -> None:
        self.root = root
        root.mkdir()
        self.write(token)
        (root / "token").symlink_to("..data/token")

    @property
    def path(self) -> Path:
        return self.root / "token"

    def write(self, token: str) -> None:
        data = self.root / "..data"
        old = data.resolve() if data.is_symlink() else None
        fresh = self.root / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.time_ns()}"
        fresh.mkdir()
        (fresh / "token").write_text(token)
        tmp = self.root / "..data_tmp"
        tmp.symlink_to(fresh.name)
        os.replace(tmp, data)
        if old is not None:
            shutil.rmtree(old)


def _operator(cluster: Cluster, namespace: str, guarded: Guarded, token_file: Path) -> OperatorProcess:
    return OperatorProcess(cluster, namespace, interval="5s", prometheus_url=guarded.url,
                           extra_args=["--prometheus-bearer-token-file", str(token_file),
                                       "--prometheus-ca-file", str(guarded.ca)])  # fmt: skip


def _refused(cluster: Cluster, namespace: str) -> dict[str, str] | None:
    c = metrics_condition(cluster, namespace)
    return c if c is not None and c["status"] == "False" and REFUSED in c["message"] else None


def test_with_a_token_rbac_grants_the_operator_scales_through_the_apiserver_proxy(
    cluster: Cluster, namespace: str, target: Exporter, guarded: Guarded
) -> None:
    target.set(kv=0.95, waiting=20, running=30)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    token = guarded.dir / "token"
    token.write_text(guarded.reader + "\n")
    with running(_operator(cluster, namespace, guarded, token)) as op:
        eventually(lambda: replicas(cluster, namespace) > 1, 90, "a scale-up read through the apiserver's proxy")
        st = scale_up_status(cluster, namespace)
        metrics = condition(st, "MetricsAvailable")
        assert metrics is not None and metrics["status"] == "True", metrics
        assert f"bearer token; CA {guarded.ca}" in op.output()  # the start line says how it reaches Prometheus
        assert guarded.reader not in op.output()


def test_with_a_token_rbac_refuses_the_count_holds_and_status_says_403(
    cluster: Cluster, namespace: str, target: Exporter, guarded: Guarded
) -> None:
    target.set(kv=0.95, waiting=20, running=30)  # a saturation the operator cannot see
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    token = guarded.dir / "token"
    token.write_text(guarded.stranger + "\n")
    with running(_operator(cluster, namespace, guarded, token)) as op:
        found = eventually(lambda: _refused(cluster, namespace), 60, "MetricsAvailable=False saying HTTP 403")
        assert "check the token or password file" in found["message"], found
        assert guarded.stranger not in json.dumps(status(cluster, namespace))
        started = time.monotonic()
        eventually(lambda: status(cluster, namespace).get("desiredReplicas") == 1, 30, "a held decision")
        assert replicas(cluster, namespace) == 1, f"held for {time.monotonic() - started:.0f}s"
        # a negative window of three ticks: a token that got through would have scaled within it (see above)
        assert {n for _, n in sample_replicas(cluster, namespace, 3 * TICK)} == {1}
        assert guarded.stranger not in op.output()


def test_a_token_the_kubelet_rotates_is_read_again_without_a_restart(
    cluster: Cluster, namespace: str, target: Exporter, guarded: Guarded
) -> None:
    target.set(kv=0.95, waiting=20, running=30)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
    projected = ProjectedToken(guarded.dir / "serviceaccount", guarded.stranger)
    with running(_operator(cluster, namespace, guarded, projected.path)) as op:
        assert op.proc is not None
        pid = op.proc.pid
        eventually(lambda: _refused(cluster, namespace), 60, "MetricsAvailable=False saying HTTP 403")
        assert replicas(cluster, namespace) == 1
        projected.write(guarded.reader)  # the kubelet's rotation: the same path, a new file behind it
        eventually(lambda: replicas(cluster, namespace) > 1, 90, "a scale-up with the rotated token")
        st = scale_up_status(cluster, namespace)
        metrics = condition(st, "MetricsAvailable")
        assert metrics is not None and metrics["status"] == "True", metrics
        assert op.proc.poll() is None and op.proc.pid == pid, "the operator was restarted"
        assert op.output().count("inferscale started") == 1, op.output()[-3000:]
