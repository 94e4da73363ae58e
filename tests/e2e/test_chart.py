"""The Helm chart on the real API server: it installs, and its RBAC is both sufficient (the operator,
running as the chart's ServiceAccount, scales a Deployment and writes status and Events) and
minimal (that account cannot read Secrets or change what it does not own)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from inferscale.adapters.deletion_cost import cost_patch
from inferscale.adapters.kube import Credentials, KubeApi, KubeError
from tests.e2e.cluster import REPO, Cluster, eventually
from tests.e2e.exporter import Exporter
from tests.e2e.infsvc import events, replicas, service, status, waiting_seen
from tests.e2e.operator_proc import OperatorProcess
from tests.e2e.test_stack import gpu_deployment, pods


def helm(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    exe = os.path.join(cluster.bin_dir, "helm") if cluster.bin_dir else "helm"
    proc = subprocess.run([exe, *args], capture_output=True, text=True, env=cluster.env(), timeout=180, check=False)
    assert proc.returncode == 0, f"helm {' '.join(args)}: {proc.stderr}"
    return proc


@pytest.fixture
def release(cluster: Cluster, namespace: str, tmp_path: pathlib.Path) -> Iterator[tuple[str, str, Cluster]]:
    """The chart installed for one watched namespace; yields (release namespace, SA, a cluster view
    that authenticates as the chart's ServiceAccount)."""
    with installed(cluster, namespace, tmp_path) as view:
        yield view


@contextlib.contextmanager
def installed(
    cluster: Cluster, namespace: str, tmp_path: pathlib.Path, values: str = ""
) -> Iterator[tuple[str, str, Cluster]]:
    rel_ns = f"inferscale-{uuid.uuid4().hex[:6]}"
    helm(
        cluster,
        "install",
        "inferscale",
        str(REPO / "charts" / "inferscale"),
        "-n",
        rel_ns,
        "--create-namespace",
        "--set",
        f"watch.allNamespaces=false,watch.namespaces={{{namespace}}}" + (f",{values}" if values else ""),
    )
    sa = "inferscale"
    token = cluster.kubectl("create", "token", sa, "-n", rel_ns, "--duration=1h").stdout.strip()
    kc = json.loads(cluster.kubectl("config", "view", "--raw", "-o", "json").stdout)
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": kc["clusters"][0]["cluster"]}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": sa}}],
        "current-context": "c",
    }
    path = tmp_path / "sa-kubeconfig"
    path.write_text(json.dumps(cfg))
    yield rel_ns, sa, replace(cluster, kubeconfig=str(path))
    helm(cluster, "uninstall", "inferscale", "-n", rel_ns)
    cluster.kubectl("delete", "namespace", rel_ns, "--wait=false", check=False)


def can_i(cluster: Cluster, verb: str, resource: str, ns: str, rel_ns: str, sa: str) -> bool:
    """`resource` may name a subresource (`deployments.apps/scale`): kubectl would read it as TYPE/NAME."""
    kind, _, sub = resource.partition("/")
    extra = [f"--subresource={sub}"] if sub else []
    proc = cluster.kubectl(
        "auth", "can-i", verb, kind, *extra, "-n", ns, f"--as=system:serviceaccount:{rel_ns}:{sa}", check=False
    )
    return proc.stdout.strip() == "yes"


def test_chart_lints_and_installs(cluster: Cluster, release: tuple[str, str, Cluster]) -> None:
    rel_ns, _, _ = release
    helm(cluster, "lint", str(REPO / "charts" / "inferscale"))
    dep = cluster.kubectl_json("get", "deployment", "inferscale", "-n", rel_ns)
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "RollingUpdate"  # under the Lease
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert cluster.kubectl_json("get", "crd", "inferenceservices.inferscale.dev")["spec"]["group"] == "inferscale.dev"


def test_two_replicas_install_spread_over_nodes_with_a_disruption_budget(
    cluster: Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    with installed(cluster, namespace, tmp_path, "replicas=2") as (rel_ns, _, _):
        pdb = cluster.kubectl_json("get", "poddisruptionbudget", "inferscale", "-n", rel_ns)
        assert pdb["spec"]["minAvailable"] == 1
        pod = cluster.kubectl_json("get", "deployment", "inferscale", "-n", rel_ns)["spec"]["template"]["spec"]
        assert "podAntiAffinity" in pod["affinity"]


def test_rbac_is_minimal(cluster: Cluster, namespace: str, release: tuple[str, str, Cluster]) -> None:
    rel_ns, sa, _ = release
    allowed = [
        ("patch", "deployments.apps/scale"),
        ("list", "pods"),
        ("watch", "pods"),  # the tick's pod and Deployment caches follow watches
        ("patch", "pods"),  # the deletion cost before a scale-down
        ("watch", "deployments.apps"),
        ("patch", "inferenceservices.inferscale.dev/status"),
        ("list", "inferenceservices.inferscale.dev"),
        ("create", "events"),
        ("list", "horizontalpodautoscalers.autoscaling"),
    ]
    denied = [
        ("get", "secrets"),
        ("list", "secrets"),
        ("patch", "configmaps"),
        ("patch", "services"),
        ("patch", "inferenceservices.inferscale.dev"),
        ("delete", "pods"),
        ("create", "pods"),
        ("patch", "nodes"),
        ("create", "roles.rbac.authorization.k8s.io"),
    ]
    for verb, res in allowed:
        assert can_i(cluster, verb, res, namespace, rel_ns, sa), f"the chart's account needs to {verb} {res}"
    for verb, res in denied:
        assert not can_i(cluster, verb, res, namespace, rel_ns, sa), f"the chart's account may {verb} {res}"
    # Watching one namespace grants nothing in others.
    assert not can_i(cluster, "patch", "deployments.apps/scale", "default", rel_ns, sa)
    # The leader Lease: created in the release's namespace, and only that one renewed.
    assert can_i(cluster, "create", "leases.coordination.k8s.io", rel_ns, rel_ns, sa)
    who = f"--as=system:serviceaccount:{rel_ns}:{sa}"
    for lease, allowed_there in (("inferscale", "yes"), ("kube-controller-manager", "no")):
        out = cluster.kubectl("auth", "can-i", "patch", f"leases.coordination.k8s.io/{lease}", "-n", rel_ns, who,
                              check=False).stdout.strip()  # fmt: skip
        assert out == allowed_there, f"patch lease {lease}: {out}"
    assert not can_i(cluster, "create", "leases.coordination.k8s.io", namespace, rel_ns, sa)


def test_the_operator_scales_with_only_the_charts_permissions(
    cluster: Cluster, namespace: str, release: tuple[str, str, Cluster]
) -> None:
    rel_ns, _, as_sa = release
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("llm", 1, 1))
    exporter = Exporter(cluster, namespace, "llm", "m").start()
    # as the chart runs it: under the Lease, in the release's namespace
    lease = ["--leader-elect", "--leader-elect-namespace", rel_ns, "--leader-elect-lease", "inferscale"]
    op = OperatorProcess(as_sa, namespace, interval="5s", extra_args=lease)
    try:
        exporter.set(kv=0.95, waiting=20, running=30)
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm"))
        op.start()
        eventually(lambda: replicas(cluster, namespace) > 1, 60, "a scale-up by the chart's account")
        st = eventually(lambda: status(cluster, namespace).get("decision"), 30, "status written")
        assert st["reason"]
        op_out = op.output()
        assert "403" not in op_out and "Forbidden" not in op_out, op_out[-3000:]
        held = cluster.kubectl_json("get", "lease", "inferscale", "-n", rel_ns)["spec"]["holderIdentity"]
        assert f"holding the lease {rel_ns}/inferscale as {held}" in op_out
    finally:
        op.stop()
        exporter.stop()
    op.assert_no_tracebacks()


def test_without_the_grant_on_pods_a_scale_down_still_happens_and_a_warning_says_why(
    cluster: Cluster, namespace: str, tmp_path: pathlib.Path
) -> None:
    # the chart installed without podDeletionCost (no patch on pods), the operator run with the costs on
    with installed(cluster, namespace, tmp_path, "podDeletionCost=false") as (_, _, as_sa):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("llm", 3, 1))
        exporter = Exporter(cluster, namespace, "llm", "m").start()
        op = OperatorProcess(as_sa, namespace, interval="5s")
        try:
            eventually(lambda: len(exporter.pods) == 3, 60, "3 Ready pods reporting")
            exporter.set(kv=0.3, waiting=0, running=4)
            eventually(lambda: waiting_seen(cluster, namespace, 0.0), 30, "Prometheus to see the pods")
            cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("llm", replicas={"min": 1, "max": 2}))
            op.start()
            eventually(lambda: replicas(cluster, namespace) == 2, 30, "the scale-down to replicas.max")
            (warning,) = eventually(lambda: events(cluster, namespace, "DeletionCostFailed"), 15, "a Warning")
            assert warning["type"] == "Warning" and "HTTP 403" in warning["message"], warning["message"]
            assert "may remove a busier pod than the idlest" in warning["message"]
        finally:
            op.stop()
            exporter.stop()
        op.assert_no_tracebacks()


def test_the_admission_policy_lets_the_account_write_only_what_it_owns(
    cluster: Cluster, namespace: str, release: tuple[str, str, Cluster]
) -> None:
    # RBAC grants patch on pods and create/patch on Deployments; the chart's ValidatingAdmissionPolicy narrows
    # both: the operator, run with the chart's account, still creates and updates its managed Deployment and
    # writes deletion costs, while the same account is refused any other change.
    _, _, as_sa = release
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    pinned = {"containers": [container], "nodeSelector": {"pool": "zone-b"}}
    template = {"metadata": {"labels": {"app": "managed"}}, "spec": pinned}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=service("managed", target=None, template=template))
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=gpu_deployment("plain", 1, 1))
    op = OperatorProcess(as_sa, namespace, interval="5s")
    try:
        op.start()
        eventually(lambda: events(cluster, namespace, "Created"), 60, "the managed Deployment's creation")
        # a new image, and the nodeSelector taken out: the Deployment's template is replaced whole (a merge
        # patch of it kept every key it left out)
        unpinned = {"containers": [{**container, "image": "vllm/vllm-openai:v0.11.1"}], "nodeSelector": None}
        cluster.kubectl(
            "patch",
            "inferenceservice",
            "managed",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"template": {"spec": unpinned}}}),
        )

        def pod_spec() -> dict[str, Any]:
            return dict(
                cluster.kubectl_json("get", "deployment", "managed", "-n", namespace)["spec"]["template"]["spec"]
            )

        eventually(
            lambda: pod_spec()["containers"][0]["image"] == "vllm/vllm-openai:v0.11.1",
            60,
            "the template update by the chart's account",
        )
        assert "nodeSelector" not in pod_spec(), pod_spec()
    finally:
        op.stop()
    op.assert_no_tracebacks()
    assert not events(cluster, namespace, "UpdateFailed"), op.output()[-3000:]
    pod = eventually(
        lambda: next((p["metadata"]["name"] for p in pods(cluster, namespace, "plain")), None), 60, "its pod"
    )
    asyncio.run(_writes_as(as_sa, namespace, pod))


async def _writes_as(as_sa: Cluster, namespace: str, pod: str) -> None:
    kube = KubeApi(Credentials.load(as_sa.kubeconfig))
    pods, deployments = f"/api/v1/namespaces/{namespace}/pods", f"/apis/apps/v1/namespaces/{namespace}/deployments"
    try:
        await kube.merge_patch(f"{pods}/{pod}", cost_patch(7))  # what a scale-down writes
        await kube.merge_patch(f"{pods}/{pod}", cost_patch(None))
        await kube.merge_patch(f"{deployments}/plain/scale", {"spec": {"replicas": 2}})  # not matched: /scale
        refused: list[tuple[str, dict[str, Any], str]] = [
            (f"{pods}/{pod}", {"metadata": {"labels": {"app": "other"}}}, "deletion-cost annotations"),
            (f"{pods}/{pod}", {"metadata": {"annotations": {"note": "x"}}}, "deletion-cost annotations"),
            (
                f"{deployments}/plain",
                {"spec": {"template": {"metadata": {"labels": {"x": "y"}}}}},
                "InferenceService owns",
            ),
            (
                f"{deployments}/managed",
                {"metadata": {"labels": {"app.kubernetes.io/managed-by": "me"}}},
                "InferenceService owns",
            ),
        ]
        for path, patch, message in refused:
            with pytest.raises(KubeError) as refusal:
                await kube.merge_patch(path, patch)
            assert refusal.value.status == 403 and message in str(refusal.value), (path, patch, str(refusal.value))
        unowned = json.loads(gpu_deployment("unowned", 0, 1))
        with pytest.raises(KubeError) as refusal:
            await kube.create(deployments, unowned)
        assert refusal.value.status == 403 and "InferenceService owns" in str(refusal.value), str(refusal.value)
    finally:
        await kube.close()
