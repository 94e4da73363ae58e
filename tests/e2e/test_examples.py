"""Every manifest in examples/ is accepted by the real API server (`kubectl apply --dry-run=server`),
the GitOps ones against Argo CD's and Flux's own CRDs, taken from their Go module releases."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest
import yaml

from tests.e2e.cluster import REPO, Cluster, eventually

EXAMPLES = sorted((REPO / "examples").rglob("*.yaml"))
# The GitOps tools' CRDs ship in their source modules; these versions build with this machine's Go.
# (The proxy refuses some versions, e.g. source-controller v1.4-v1.6; these are served.)
GITOPS_CRDS = [
    ("github.com/argoproj/argo-cd/v3@v3.1.0", "manifests/crds/application-crd.yaml"),
    (
        "github.com/fluxcd/kustomize-controller@v1.6.0",
        "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml",
    ),
    ("github.com/fluxcd/source-controller@v1.7.0", "config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"),
]


def module_file(module: str, rel: str) -> pathlib.Path:
    proc = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, check=False)
    info = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or info.get("Error"):
        raise AssertionError(f"the Go module proxy refused {module}: {info.get('Error') or proc.stderr}")
    return pathlib.Path(info["Dir"]) / rel


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    for module, rel in GITOPS_CRDS:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(module_file(module, rel)))
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")


def test_there_are_examples_of_every_mode() -> None:
    text = "\n".join(p.read_text() for p in EXAMPLES)
    for needle in (
        "scaleTargetRef",
        "template:",
        "mode: Advisory",
        "schedules:",
        "kind: Application",
        "kind: Kustomization",
    ):
        assert needle in text, f"no example shows {needle}"


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(REPO / "examples")) for p in EXAMPLES])
def test_example_is_accepted_by_the_api_server(
    cluster: Cluster, namespace: str, crds: None, path: pathlib.Path
) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs, f"{path} holds no manifest"
    for doc in docs:
        ns = (doc.get("metadata") or {}).get("namespace")
        if ns:  # e.g. argocd, flux-system: the tools' own namespaces
            cluster.kubectl("create", "namespace", ns, check=False)
            eventually(
                lambda n=ns: cluster.kubectl("get", "sa", "default", "-n", n, check=False).returncode == 0,
                60,
                f"namespace {ns}",
            )
        proc = cluster.kubectl(
            "apply",
            "--dry-run=server",
            "--validate=strict",
            "-n",
            ns or namespace,
            "-f",
            "-",
            input=yaml.safe_dump(doc),
            check=False,
        )
        assert proc.returncode == 0, f"{path.name} {doc.get('kind')}/{doc['metadata'].get('name')}: {proc.stderr}"
