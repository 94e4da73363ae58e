"""The tick's watch-fed cache against the real API server: it follows a Deployment being created, scaled
through /scale and deleted, and pods turning Ready, as the server streams them."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from inferscale.adapters.informer import Informer
from inferscale.adapters.kube import Credentials, KubeApi
from inferscale.handlers.collector import slim
from tests import polling
from tests.e2e.cluster import Cluster
from tests.e2e.test_stack import gpu_deployment


async def until(check: Callable[[], bool], what: str) -> None:
    await polling.until(check, what, timeout=60.0, interval=0.2)  # a real API server and its watch delays


async def test_the_cache_follows_the_api_server(cluster: Cluster, namespace: str) -> None:
    kube = KubeApi(Credentials.load(cluster.kubeconfig))
    listed: list[str] = []
    list_versioned = kube.list_versioned

    async def counted(*args: Any, **kwargs: Any) -> Any:
        listed.append(args[1])
        return await list_versioned(*args, **kwargs)

    kube.list_versioned = counted  # type: ignore[method-assign]
    deployments = Informer(kube, "apps/v1", "deployments", namespace, partial(slim, plural="deployments"))
    pods = Informer(kube, "v1", "pods", namespace, partial(slim, plural="pods"))
    for inf in (deployments, pods):
        inf.start()
    try:
        await until(lambda: deployments.items() == [] and pods.items() == [], "both caches to list")
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("cached", 1, 0, "1s"))

        def cached() -> dict[str, Any] | None:
            return next((d for d in deployments.items() or [] if d["metadata"]["name"] == "cached"), None)

        await until(lambda: cached() is not None, "the new Deployment")

        def ready_pods() -> int:
            conds = [c for p in pods.items() or [] for c in p["status"].get("conditions") or []]
            return sum(1 for c in conds if c["type"] == "Ready" and c["status"] == "True")

        await until(lambda: ready_pods() == 1, "its pod, Ready")
        assert "managedFields" not in (cached() or {})["metadata"]  # slimmed as the tick's lists are

        patch = json.dumps({"spec": {"replicas": 3}})
        cluster.kubectl("patch", "deployment", "cached", "-n", namespace, "--subresource=scale", "-p", patch)
        await until(lambda: (cached() or {}).get("spec", {}).get("replicas") == 3, "the /scale write")
        await until(lambda: ready_pods() == 3, "three Ready pods")

        cluster.kubectl("delete", "deployment", "cached", "-n", namespace, "--wait=false")
        await until(lambda: deployments.items() is not None and cached() is None, "the deletion")
        assert sorted(listed) == ["deployments", "pods"]  # one list each; everything else came by watch
    finally:
        for inf in (deployments, pods):
            await inf.stop()
        await kube.close()
