"""The CRD and the CEL rules checked by the API server's own validation code (crds/validate, Go).

Slow on a cold Go build cache (minutes); skipped with the reason printed when Go or the k8s.io modules are
unavailable. Python and the API server must give the same message for every CEL rule.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.gobuild import build_go_tool
from tests.unit.api.test_spec_validation import BAD, _set

from inferscale.api import rules

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "inferscale.dev_inferenceservices.yaml"
CEL_MESSAGES = {v.message for v in vars(rules).values() if isinstance(v, rules.Rule)}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def validator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_go_tool(ROOT / "crds" / "validate", tmp_path_factory.mktemp("validator"))


def _wrap(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "inferscale.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "x"},
        "spec": spec,
    }


def _validate(validator: Path, objects: list[dict[str, Any]], tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "objects.json"
    path.write_text(json.dumps(objects))
    out = subprocess.run([str(validator), str(CRD), str(path)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "CRD valid"
    return [json.loads(line)["errors"] for line in lines[1:]]


def test_examples_are_accepted_by_the_api_server(validator: Path, tmp_path: Path) -> None:
    examples = [
        d
        for p in sorted((ROOT / "examples").rglob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if d and d["kind"] == "InferenceService"
    ]
    assert examples
    assert _validate(validator, examples, tmp_path) == [[] for _ in examples]


def test_cel_rules_reject_with_the_python_messages(validator: Path, tmp_path: Path) -> None:
    minimal = {"model": {"name": "m"}, "scaleTargetRef": {"name": "llama-8b"}, "replicas": {"max": 16}}
    cases = []
    for path, value, message, extra in BAD:
        if message not in CEL_MESSAGES and "supported values" not in message:
            continue  # schema-type errors and Python-only checks (croniter's own)
        spec = {**copy.deepcopy(minimal), **copy.deepcopy(extra)}
        if value is not None:
            _set(spec, path, value)
        cases.append((f"{path}={value!r}", spec, message))
    assert len(cases) >= 20
    results = _validate(validator, [_wrap(spec) for _, spec, _ in cases], tmp_path)
    missed = [
        (name, errors)
        for (name, _, message), errors in zip(cases, results, strict=True)
        if not any(message in e for e in errors)
    ]
    assert missed == []


def test_valid_variants_pass(validator: Path, tmp_path: Path) -> None:
    minimal = {"model": {"name": "m"}, "scaleTargetRef": {"name": "t"}, "replicas": {"max": 4}}
    variants = [
        {**minimal, "behavior": {"scaleUp": {"maxIncrease": 3}, "scaleDown": {"maxDecrease": "25%"}}},
        {**minimal, "warmup": {"schedules": [{"cron": "@daily", "duration": "1h", "minReplicas": 2}]}},
        {**minimal, "slo": {"ttftP95": "1.5s", "itlMean": "1h30m"}, "replicas": {"min": 4, "max": 4}},
        {**minimal, "slo": {"tpotP95": "60ms"}},
        {**minimal, "engine": "sglang", "slo": {"itlMean": "40ms"}},
        {**minimal, "model": {"name": "m", "profile": "Meta-Llama/Llama-3.3-70B-Instruct", "tensorParallel": 8}},
        {**minimal, "model": {"name": "m", "profile": "qwen3-8b"}},
        {**minimal, "model": {"name": "m", "tensorParallel": 3}},  # no profile: nothing to split by
        {
            **minimal,
            "metrics": {"selector": {"job": "vllm", "_app": "x"}},
            "warmup": {"schedules": [{"cron": "0 9 * MAR THU", "duration": "1h", "minReplicas": 2}]},
        },
    ]
    assert _validate(validator, [_wrap(v) for v in variants], tmp_path) == [[]] * len(variants)


def test_durations_beyond_int64_nanoseconds_or_below_one_are_refused_there_too(validator: Path, tmp_path: Path) -> None:
    # Python words these itself (rules.TOO_LONG); the API server refuses them in CEL's own words
    minimal = {"model": {"name": "m"}, "scaleTargetRef": {"name": "t"}, "replicas": {"max": 4}}
    refused = [
        {**minimal, "warmup": {"timeToReady": "2562048h"}},
        {**minimal, "behavior": {"scaleDown": {"stabilizationWindow": "9999999999999999h"}}},
        {**minimal, "slo": {"ttftP95": "2562048h"}},
        {**minimal, "slo": {"itlMean": "0.0000001ms"}},
    ]
    accepted = [
        {**minimal, "behavior": {"scaleDown": {"stabilizationWindow": "2562047h"}}, "slo": {"itlMean": "0.000001ms"}}
    ]
    results = _validate(validator, [_wrap(v) for v in refused + accepted], tmp_path)
    assert all(errors for errors in results[: len(refused)]), results
    assert results[len(refused) :] == [[]]


def test_a_managed_service_with_a_name_no_label_can_hold_is_refused(validator: Path, tmp_path: Path) -> None:
    long = "a" * 64
    template = {"spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}]}}
    managed = {"model": {"name": "m"}, "template": template, "replicas": {"max": 4}}
    target = {"model": {"name": "m"}, "scaleTargetRef": {"name": "t"}, "replicas": {"max": 4}}
    objects = [
        {**_wrap(managed), "metadata": {"name": long}},
        {**_wrap(managed), "metadata": {"name": long[:63]}},
        {**_wrap(target), "metadata": {"name": long}},  # no pods of its own to label
    ]
    refused, *accepted = _validate(validator, objects, tmp_path)
    assert any(rules.MANAGED_NAME.message in e for e in refused), refused
    assert accepted == [[], []]
