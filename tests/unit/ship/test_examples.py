from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.unit.ship.helpers import ROOT

from inferscale.api.convert import policy_from_spec
from inferscale.api.models import InferenceService, parse_spec
from inferscale.scaling.durations import parse_duration

EXAMPLES = ROOT / "examples"
FILES = sorted(EXAMPLES.rglob("*.yaml"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _services() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{p.name}:{d['metadata']['name']}", d) for p in FILES for d in _docs(p) if d["kind"] == "InferenceService"
    ]


SERVICES = _services()


@pytest.mark.parametrize(("name", "body"), SERVICES, ids=[n for n, _ in SERVICES])
def test_every_inference_service_example_is_valid(name: str, body: dict[str, Any]) -> None:
    resource = InferenceService.model_validate(body)
    policy = policy_from_spec(parse_spec(body["spec"]), default_interval=10.0)
    assert policy.max_replicas >= policy.min_replicas
    if resource.spec.model.profile is not None:
        assert policy.capacity_prior_rps is not None and policy.capacity_prior_rps > 0


def test_examples_cover_every_mode() -> None:
    specs = [parse_spec(body["spec"]) for _, body in SERVICES]
    assert any(s.scale_target_ref is not None and s.mode == "Active" for s in specs)
    assert any(s.template is not None for s in specs)
    assert any(s.mode == "Advisory" for s in specs)
    assert any(s.warmup.schedules for s in specs)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(EXAMPLES)) for p in FILES])
def test_every_manifest_is_a_kubernetes_object(path: Path) -> None:
    for doc in _docs(path):
        assert {"apiVersion", "kind", "metadata"} <= set(doc), path.name
        assert doc["metadata"].get("name"), path.name
        if "gitops" not in path.parts:
            assert "namespace" not in doc["metadata"], "examples apply into the namespace given by -n"


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in FILES:
        for doc in _docs(path):
            if doc["kind"] == "Deployment" or (doc["kind"] == "InferenceService" and "template" in doc["spec"]):
                found.append((path.name, doc["spec"]["template"]["spec"]))
    return found


PODS = _pod_specs()


@pytest.mark.parametrize(("name", "pod"), PODS, ids=[n for n, _ in PODS])
def test_vllm_pods_are_realistic(name: str, pod: dict[str, Any]) -> None:
    (container,) = pod["containers"]
    image = container["image"]
    assert image.startswith("vllm/vllm-openai:v") and not image.endswith(":latest")
    args = " ".join(container["args"])
    assert "--model=" in args and "--max-num-seqs=" in args
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert container["ports"][0]["containerPort"] == 8000
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600  # model load takes minutes


def test_target_mode_deployment_matches_its_reference() -> None:
    docs = _docs(EXAMPLES / "target-mode.yaml")
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (service,) = [d for d in docs if d["kind"] == "InferenceService"]
    assert service["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_schedules_start_before_the_peak_by_time_to_ready() -> None:
    (body,) = [b for _, b in SERVICES if b["metadata"]["name"] == "support-chat"]
    spec = parse_spec(body["spec"])
    business = spec.warmup.schedules[0]
    lead_minutes = 60 - int(business.cron.split()[0])
    assert lead_minutes * 60 >= parse_duration(spec.warmup.time_to_ready)


def test_gitops_examples_keep_git_off_the_replica_count() -> None:
    (app,) = _docs(EXAMPLES / "gitops" / "argocd-application.yaml")
    assert {"group": "apps", "kind": "Deployment", "name": "llama-8b", "jsonPointers": ["/spec/replicas"]} in app[
        "spec"
    ]["ignoreDifferences"]
    assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]
    flux = {d["kind"]: d for d in _docs(EXAMPLES / "gitops" / "flux-kustomization.yaml")}
    (patch,) = flux["Kustomization"]["spec"]["patches"]
    assert yaml.safe_load(patch["patch"]) == [{"op": "remove", "path": "/spec/replicas"}]
    assert flux["Kustomization"]["spec"]["sourceRef"]["name"] == flux["GitRepository"]["metadata"]["name"]
