from __future__ import annotations

import subprocess

import yaml
from tests.unit.ship.helpers import ROOT, generator, tool

DEPLOY = ROOT / "deploy"


def test_deploy_base_matches_the_chart(helm: str) -> None:
    files = generator.render(helm)
    stale = sorted(name for name, text in files.items() if (DEPLOY / name).read_text() != text)
    assert stale == [], f"deploy/ is stale ({', '.join(stale)}): run `python deploy/generate.py`"
    committed = {p.name for p in DEPLOY.glob("*.yaml")}
    assert committed == set(files), "deploy/ holds files the generator does not write"


def test_deploy_crd_is_the_generated_one() -> None:
    assert (DEPLOY / "crd.yaml").read_text() == (ROOT / "crds" / "inferscale.dev_inferenceservices.yaml").read_text()


def test_namespace_enforces_restricted_pod_security() -> None:
    labels = yaml.safe_load((DEPLOY / "namespace.yaml").read_text())["metadata"]["labels"]
    for mode in ("enforce", "warn", "audit"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


def test_no_helm_bookkeeping_left() -> None:
    for path in DEPLOY.glob("*.yaml"):
        text = path.read_text()
        assert "helm.sh/chart" not in text and "managed-by: Helm" not in text and "{{" not in text, path.name


def test_kustomize_builds_the_whole_base() -> None:
    kubectl = tool("kubectl", "make tools")
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "Namespace",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Service",
            "Deployment",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
    )
    namespaced = [d for d in docs if d["kind"] in ("ServiceAccount", "Service", "Deployment")]
    assert all(d["metadata"]["namespace"] == "inferscale" for d in namespaced)
