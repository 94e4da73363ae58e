"""Pod Security Standards checked with the admission plugin's own code (deploy/podsecurity, Go).

Slow on a cold Go build cache; skipped with the reason printed when Go or the k8s.io modules are unavailable.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.gobuild import build_go_tool
from tests.unit.ship.helpers import CHART, KUBE_VERSION, ROOT, run_helm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def podsecurity(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_go_tool(ROOT / "deploy" / "podsecurity", tmp_path_factory.mktemp("podsecurity"))


def _check(binary: Path, manifests: str, level: str = "restricted") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), "-level", level], input=manifests, capture_output=True, text=True)


@pytest.mark.parametrize(
    "values",
    [[], ["--set", "watch.allNamespaces=false", "--set", "watch.namespaces={llm}"]],
    ids=["cluster-wide", "namespaced"],
)
def test_chart_operator_pod_is_restricted(helm: str, podsecurity: Path, values: list[str]) -> None:
    rendered = run_helm(helm, "template", "inferscale", str(CHART), "--kube-version", KUBE_VERSION, *values)
    assert rendered.returncode == 0, rendered.stderr
    result = _check(podsecurity, rendered.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 pod templates, 0 violations of restricted" in result.stdout


def test_deploy_base_operator_pod_is_restricted(podsecurity: Path) -> None:
    result = _check(podsecurity, (ROOT / "deploy" / "deployment.yaml").read_text())
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_privileged_pod_is_reported(podsecurity: Path) -> None:
    container = {"name": "c", "image": "x:1", "securityContext": {"privileged": True}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bad"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [container]}},
        },
    }
    result = _check(podsecurity, yaml.safe_dump(deployment), level="baseline")
    assert result.returncode == 1
    assert "bad: privileged" in result.stdout


def _example_pods() -> list[dict[str, Any]]:
    """Example Deployments, and managed-mode templates wrapped as the Deployment the operator would create."""
    out = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "Deployment":
                out.append(doc)
            elif doc and doc["kind"] == "InferenceService" and "template" in doc["spec"]:
                template = doc["spec"]["template"]
                out.append(
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "metadata": {"name": doc["metadata"]["name"]},
                        "spec": {"selector": {"matchLabels": template["metadata"]["labels"]}, "template": template},
                    }
                )
    return out


def test_example_model_servers_meet_the_baseline_standard(podsecurity: Path) -> None:
    pods = _example_pods()
    assert len(pods) >= 2
    result = _check(podsecurity, yaml.safe_dump_all(pods), level="baseline")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(pods)} pod templates, 0 violations of baseline" in result.stdout
