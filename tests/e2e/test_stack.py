"""The local stack is real: scheduling with GPU accounting, kwok start-up delays, CEL validation, the
scale subresource, and Prometheus scraping targets registered through its file discovery."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.cluster import Cluster, eventually


def gpu_deployment(
    name: str, replicas: int, gpus: int, ready_delay: str | None = None, ready_jitter: str | None = None
) -> str:
    """Pods Ready after `ready_delay`, or uniformly between it and `ready_jitter` (kwok's stage annotations)."""
    annotations = {"pod-ready.stage.kwok.x-k8s.io/delay": ready_delay} if ready_delay else {}
    if ready_jitter:
        annotations["pod-ready.stage.kwok.x-k8s.io/jitter-delay"] = ready_jitter
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}, "annotations": annotations},
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": "vllm/vllm-openai:v0.11.0",
                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                            }
                        ]
                    },
                },
            },
        }
    )


def pods(cluster: Cluster, ns: str, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl_json("get", "pods", "-n", ns, "-l", f"app={app}")["items"]
    return items


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return dict(c)
    return None


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_gpu_pods_become_ready_after_their_annotated_delay(local_cluster: Cluster, namespace: str) -> None:
    local_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("llm", 3, 1, ready_delay="6s"))

    def all_ready() -> list[dict[str, Any]] | None:
        items = pods(local_cluster, namespace, "llm")
        ok = [p for p in items if (c := condition(p, "Ready")) and c["status"] == "True"]
        return items if len(items) == 3 and len(ok) == 3 else None

    ready = eventually(all_ready, 90, "3 Ready pods")
    for pod in ready:
        assert pod["spec"]["nodeName"].startswith("gpu-node-")
        created = ts(pod["metadata"]["creationTimestamp"])
        became_ready = ts(condition(pod, "Ready")["lastTransitionTime"])  # type: ignore[index]
        # Timestamps have 1 s resolution: Ready no earlier than 6 s - 1 s after creation.
        assert (became_ready - created).total_seconds() >= 5, pod["metadata"]["name"]


def test_surplus_gpu_pods_stay_pending_for_insufficient_gpus(local_cluster: Cluster, namespace: str) -> None:
    nodes = local_cluster.kubectl_json("get", "nodes", "-l", "nvidia.com/gpu.product")["items"]
    gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", "0")) for n in nodes)
    per_pod = 8
    replicas = gpus // per_pod + 1
    local_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("big", replicas, per_pod))

    def one_unschedulable() -> list[dict[str, Any]] | None:
        items = pods(local_cluster, namespace, "big")
        pending = [
            p for p in items if (c := condition(p, "PodScheduled")) and c["status"] == "False" and c.get("message")
        ]
        scheduled = [p for p in items if p["spec"].get("nodeName")]
        return pending if len(items) == replicas and len(pending) == 1 and len(scheduled) == replicas - 1 else None

    pending = eventually(one_unschedulable, 60, f"{replicas - 1} scheduled and 1 Pending pod")
    assert pending[0]["status"]["phase"] == "Pending"
    assert "Insufficient nvidia.com/gpu" in condition(pending[0], "PodScheduled")["message"]  # type: ignore[index]


CEL_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.e2e.inferscale.dev}
spec:
  group: e2e.inferscale.dev
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              min: {type: integer}
              max: {type: integer}
            x-kubernetes-validations:
            - rule: self.min <= self.max
              message: spec.min must not exceed spec.max
"""


def test_cel_rule_rejects_a_bad_object_with_its_message(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("apply", "-f", "-", input=CEL_CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.e2e.inferscale.dev", "--timeout=60s")
    good = "apiVersion: e2e.inferscale.dev/v1\nkind: Widget\nmetadata: {name: ok}\nspec: {min: 1, max: 2}\n"
    bad = "apiVersion: e2e.inferscale.dev/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {min: 3, max: 2}\n"
    eventually(
        lambda: cluster.kubectl("apply", "-n", namespace, "-f", "-", input=good, check=False).returncode == 0,
        30,
        "the new CRD to serve objects",
    )
    proc = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=bad, check=False)
    assert proc.returncode != 0
    assert "spec.min must not exceed spec.max" in proc.stderr


def test_scale_subresource_patch_resizes_the_replicaset(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("scaled", 1, 1))
    cluster.kubectl(
        "patch",
        "deployment",
        "scaled",
        "-n",
        namespace,
        "--subresource=scale",
        "--type=merge",
        "-p",
        '{"spec":{"replicas":3}}',
    )

    def rs_replicas() -> int | None:
        items = cluster.kubectl_json("get", "replicasets", "-n", namespace, "-l", "app=scaled")["items"]
        return items[0]["spec"]["replicas"] if len(items) == 1 and items[0]["spec"]["replicas"] == 3 else None

    assert eventually(rs_replicas, 60, "the ReplicaSet to have 3 replicas") == 3


class _Metrics(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def exporter() -> Iterator[tuple[str, type[_Metrics]]]:
    handler = type("Handler", (_Metrics,), {"body": b""})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


def test_prometheus_scrapes_a_target_registered_in_the_targets_directory(
    cluster: Cluster, exporter: tuple[str, type[_Metrics]]
) -> None:
    address, handler = exporter
    marker = uuid.uuid4().hex[:8]
    handler.body = f'vllm:num_requests_waiting{{model_name="m-{marker}"}} 7\n'.encode()
    path = cluster.register_target(f"smoke-{marker}", address, {"namespace": "smoke", "pod": f"pod-{marker}"})
    try:
        started = time.monotonic()
        result = eventually(
            lambda: cluster.prometheus_query(f'vllm:num_requests_waiting{{model_name="m-{marker}"}}'),
            60,
            "Prometheus to scrape the registered target",
        )
        assert result[0]["metric"]["namespace"] == "smoke"
        assert result[0]["metric"]["pod"] == f"pod-{marker}"
        assert float(result[0]["value"][1]) == 7.0
        print(f"first sample visible {time.monotonic() - started:.1f}s after registration")
    finally:
        path.unlink()
