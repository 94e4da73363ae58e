"""Reading and writing InferenceServices and their Deployments in e2e tests."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from tests.e2e.cluster import Cluster, eventually

TICK = 5.0
SCRAPE = 5.0


def service(name: str, target: str | None = "llm", **spec: Any) -> str:
    body: dict[str, Any] = {
        "model": {"name": "m"},
        "replicas": {"min": 1, "max": 8},
        "behavior": {"interval": "5s"},
    }
    if target:
        body["scaleTargetRef"] = {"name": target}
    for key, value in spec.items():
        body[key] = {**body.get(key, {}), **value} if isinstance(value, dict) else value
    return json.dumps(
        {"apiVersion": "inferscale.dev/v1alpha1", "kind": "InferenceService", "metadata": {"name": name}, "spec": body}
    )


def replicas(cluster: Cluster, ns: str, name: str = "llm") -> int:
    return int(cluster.kubectl_json("get", "deployment", name, "-n", ns)["spec"]["replicas"])


def status(cluster: Cluster, ns: str, name: str = "llm") -> dict[str, Any]:
    out: dict[str, Any] = cluster.kubectl_json("get", "inferenceservice", name, "-n", ns).get("status") or {}
    return out


def status_where(
    cluster: Cluster, ns: str, holds: Callable[[dict[str, Any]], bool], timeout: float, what: str
) -> dict[str, Any]:
    """The first status for which `holds` is true. The operator scales before it writes status in the same
    tick, so a status read just after a scale is seen can still be the tick before's."""
    found: dict[str, Any] = eventually(lambda: st if holds(st := status(cluster, ns)) else None, timeout, what)
    return found


def scale_up_status(cluster: Cluster, ns: str) -> dict[str, Any]:
    """The status of the tick that scaled up from 1, once the test has seen the Deployment grow (see `status_where`)."""
    return status_where(cluster, ns, lambda s: s.get("desiredReplicas", 0) > 1, TICK + 5, "the scale-up's status")


def condition(st: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in st.get("conditions") or [] if c.get("type") == kind), None)


def metrics_condition(cluster: Cluster, namespace: str) -> dict[str, Any] | None:
    return condition(status(cluster, namespace), "MetricsAvailable")


def events(cluster: Cluster, ns: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl_json("get", "events", "-n", ns)["items"]
    return [e for e in items if e.get("reason") == reason and e["involvedObject"].get("kind") == "InferenceService"]


def waiting_seen(cluster: Cluster, ns: str, value: float) -> bool:
    result = cluster.prometheus_query(f'vllm:num_requests_waiting{{namespace="{ns}"}}')
    return bool(result) and all(float(r["value"][1]) == value for r in result)


def sample_replicas(cluster: Cluster, ns: str, seconds: float) -> list[tuple[float, int]]:
    """The Deployment's replicas once a second for `seconds` (a negative window: nothing may change)."""
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        out.append((time.monotonic(), replicas(cluster, ns)))
        time.sleep(1.0)
    return out
