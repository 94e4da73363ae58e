from __future__ import annotations

import re
from typing import Any

import pytest

from inferscale.api import rules
from inferscale.api.models import InferenceService, InvalidSpec, parse_spec


def _set(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node = spec
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    if value is _DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return spec


_DELETE = object()


def test_design_example_parses_with_its_values(full_spec: dict[str, Any]) -> None:
    spec = parse_spec(full_spec)
    assert spec.model.profile == "llama-3.1-8b"
    assert spec.scale_target_ref is not None and spec.scale_target_ref.name == "llama-8b"
    assert spec.behavior.scale_down.max_decrease == "50%"
    assert spec.warmup.schedules[0].min_replicas == 4
    assert spec.targets.waiting_per_replica == 4.0


def test_defaults_follow_the_design(minimal_spec: dict[str, Any]) -> None:
    spec = parse_spec(minimal_spec)
    assert (spec.engine, spec.mode) == ("vllm", "Active")
    assert (spec.replicas.min, spec.replicas.max) == (1, 16)
    assert (spec.slo.ttft_p95, spec.slo.itl_mean) == ("500ms", "50ms")
    assert (spec.targets.kv_cache_utilization, spec.targets.waiting_per_replica) == (0.8, 4.0)
    assert (spec.behavior.interval, spec.behavior.tolerance) == ("10s", 0.1)
    assert spec.behavior.scale_up.stabilization_window == "0s"
    # the design's 300s is a 4-minute start-up's: unset, the window follows the time-to-ready (test_convert)
    assert spec.behavior.scale_down.stabilization_window is None
    assert spec.behavior.scale_down.max_decrease == "50%"
    assert (spec.warmup.time_to_ready, spec.warmup.predictive, spec.warmup.schedules) == ("180s", True, [])
    assert (spec.metrics.selector, spec.metrics.stale_after) == ({}, "60s")
    assert (spec.model.gpu, spec.model.tensor_parallel) == ("h100-80gb", 1)
    assert spec.scale_target_ref is not None
    assert (spec.scale_target_ref.api_version, spec.scale_target_ref.kind) == ("apps/v1", "Deployment")


def test_managed_mode_template_passes_pod_fields_through(minimal_spec: dict[str, Any]) -> None:
    del minimal_spec["scaleTargetRef"]
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.11.0", "args": ["--model", "x"], "ports": []}
    minimal_spec["template"] = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {"containers": [container], "nodeSelector": {"gpu": "h100"}},
    }
    spec = parse_spec(minimal_spec)
    assert spec.template is not None
    dumped = spec.template.model_dump(by_alias=True)
    assert dumped["spec"]["nodeSelector"] == {"gpu": "h100"}
    assert dumped["spec"]["containers"][0]["args"] == ["--model", "x"]


# (path, value, the message the API server's CEL rule or schema gives as well)
BAD: list[tuple[str, Any, str, dict[str, Any]]] = [
    ("replicas.min", 5, rules.REPLICA_BOUNDS.message, {"replicas": {"min": 5, "max": 2}}),
    ("template", None, rules.ONE_TARGET.message, {"template": {"spec": {"containers": [{"name": "a", "image": "b"}]}}}),
    ("scaleTargetRef", _DELETE, rules.ONE_TARGET.message, {}),
    ("slo.ttftP95", "500", rules.POSITIVE_DURATION.message, {}),
    ("slo.ttftP95", " 500ms", rules.POSITIVE_DURATION.message, {}),
    ("slo.ttftP95", "٥s", rules.POSITIVE_DURATION.message, {}),  # a digit, but not one RE2 reads as one
    ("slo.itlMean", "-5ms", rules.POSITIVE_DURATION.message, {}),
    ("slo.tpotP95", "0s", rules.POSITIVE_DURATION.message, {}),
    ("slo.tpotP95", "50ms", rules.TPOT_NEEDS_VLLM.message, {"engine": "sglang"}),
    ("behavior.interval", "1d", rules.POSITIVE_DURATION.message, {}),
    ("behavior.interval", "0s", rules.POSITIVE_DURATION.message, {}),
    ("behavior.scaleUp.period", "0ms", rules.POSITIVE_DURATION.message, {}),
    ("metrics.staleAfter", "1" * 40 + "s", rules.POSITIVE_DURATION.message, {}),
    ("warmup.timeToReady", "3 minutes", rules.DURATION.message, {}),
    ("warmup.timeToReady", "2562048h", rules.TOO_LONG, {}),
    ("warmup.timeToReady", "180m", rules.TIME_TO_READY.message, {}),
    ("slo.ttftP95", "9999999999999999h", rules.TOO_LONG, {}),
    ("slo.itlMean", "0.0000001ms", rules.POSITIVE_DURATION.message, {}),
    ("behavior.scaleDown.stabilizationWindow", "5", rules.DURATION.message, {}),
    ("targets.kvCacheUtilization", 0.0, rules.FRACTION.message, {}),
    ("targets.kvCacheUtilization", 1.5, rules.FRACTION.message, {}),
    ("targets.waitingPerReplica", 0, rules.POSITIVE.message, {}),
    ("targets.capacityUtilization", 0.0, rules.FRACTION.message, {}),
    ("targets.capacityUtilization", 1.2, rules.FRACTION.message, {}),
    ("behavior.tolerance", 1.0, rules.OPEN_FRACTION.message, {}),
    ("behavior.scaleUp.maxIncrease", "lots", rules.CHANGE_LIMIT.message, {}),
    ("behavior.scaleUp.maxIncrease", 0, rules.CHANGE_LIMIT.message, {}),
    ("behavior.scaleDown.maxDecrease", "0%", rules.CHANGE_LIMIT.message, {}),
    ("behavior.scaleDown.maxDecrease", True, rules.CHANGE_LIMIT.message, {}),
    ("warmup.schedules", [{"cron": "every morning", "duration": "1h", "minReplicas": 2}], rules.CRON.message, {}),
    ("warmup.schedules", [{"cron": "61 9 * * *", "duration": "1h", "minReplicas": 2}], rules.CRON.message, {}),
    ("warmup.schedules", [{"cron": "0 24 * * *", "duration": "1h", "minReplicas": 2}], rules.CRON.message, {}),
    ("warmup.schedules", [{"cron": "0 9 * 13 mon", "duration": "1h", "minReplicas": 2}], rules.CRON.message, {}),
    ("warmup.schedules", [{"cron": "*/0 9 * * *", "duration": "1h", "minReplicas": 2}], rules.CRON.message, {}),
    (
        "warmup.schedules",
        [{"cron": "0 9 * * 5L", "duration": "1h", "minReplicas": 2}],
        "croniter cannot read its day of the week field '5L': use numbers (9), ranges (1-5)",
        {},
    ),
    # a random or hashed time moves each time it is read: replicas ordered ahead of it would not be on time
    ("warmup.schedules", [{"cron": "R 9 * * *", "duration": "1h", "minReplicas": 2}], rules.CRON_FIXED.message, {}),
    ("warmup.schedules", [{"cron": "H/15 9 * * *", "duration": "1h", "minReplicas": 2}], "(R) and hashed (H)", {}),
    ("behavior.scaleUp.maxIncrease", "1" + "0" * 309 + "%", rules.CHANGE_LIMIT.message, {}),  # inf as a float
    ("behavior.scaleUp.maxIncrease", "1000000%", "a percentage up to 999999%", {}),
    ("warmup.schedules", [{"cron": "0 0 30 2 *", "duration": "1h", "minReplicas": 2}], "never matches", {}),
    ("warmup.schedules", [{"cron": "0 9 * * *", "duration": "1h", "minReplicas": 20}], "must not exceed", {}),
    ("metrics.selector", {"pod-name": "x"}, rules.SELECTOR_KEYS_MESSAGE, {}),
    ("metrics.selector", {"__name__": "x"}, rules.SELECTOR_RESERVED_MESSAGE, {}),
    ("metrics.selector", {"namespace": "other"}, rules.SELECTOR_RESERVED_MESSAGE, {}),
    ("metrics.selector", {"model_name": "other"}, rules.SELECTOR_RESERVED_MESSAGE, {}),
    ("engine", "tgi", 'supported values: "vllm", "sglang"', {}),
    ("model.profile", "llama-3-8b", rules.PROFILE.message, {}),
    ("model.gpu", "a10g", rules.GPU.message, {}),
    ("model.maxNumSeqs", 512, rules.BATCH_LIMITS.message, {"model": {"name": "m", "maxNumBatchedTokens": 256}}),
    ("model.tensorParallel", 3, rules.TENSOR_PARALLEL.message, {"model": {"name": "m", "profile": "llama-3.1-8b"}}),
    ("model.tensorParallel", 16, rules.TENSOR_PARALLEL.message, {"model": {"name": "m", "profile": " Qwen/Qwen3-32B"}}),
    ("mode", "Dry", 'supported values: "Active", "Advisory"', {}),
    ("behavior.scaleDown.release", "Gradual", 'supported values: "Linear", "Hold"', {}),
    ("behavior.scaleDown.release", "linear", 'supported values: "Linear", "Hold"', {}),
    ("scaleTargetRef.kind", "StatefulSet", 'supported values: "Deployment"', {}),
    ("replicas.max", 0, "greater than or equal to 1", {}),
    ("replicas.max", 3_000_000_000, "less than or equal to 2147483647", {}),
    ("replicas.max", "4", "valid integer", {}),
    ("targets.kvCacheUtilization", "0.5", "valid number", {}),
    ("model.name", "", "at least 1 character", {}),
    ("model.profile", "", "at least 1 character", {}),
    ("scaleTargetRef.name", "Foo_Bar/../x", "should match pattern", {}),
    ("scaleTargetRef.name", "a" * 254, "at most 253 characters", {}),
    ("slo.ttftp95", "1s", "Extra inputs are not permitted", {}),
]


@pytest.mark.parametrize(("path", "value", "message", "extra"), BAD, ids=[f"{b[0]}={b[1]!r}"[:60] for b in BAD])
def test_bad_spec_is_rejected_with_a_readable_message(
    minimal_spec: dict[str, Any], path: str, value: Any, message: str, extra: dict[str, Any]
) -> None:
    spec = {**minimal_spec, **extra}
    if value is not None:
        _set(spec, path, value)
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(spec)
    text = str(caught.value)
    assert message in text
    assert "Value error" not in text and "https://" not in text
    assert all(p.startswith("spec") for p in caught.value.problems)


def test_every_problem_is_reported_with_its_path(minimal_spec: dict[str, Any]) -> None:
    minimal_spec["slo"] = {"ttftP95": "fast", "itlMean": "slow"}
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(minimal_spec)
    paths = sorted(p.split(":")[0] for p in caught.value.problems)
    assert paths == ["spec.slo.itlMean", "spec.slo.ttftP95"]


@pytest.mark.parametrize("value", ["4", "100%", "1%"])
def test_change_limit_accepts_pods_and_percent(minimal_spec: dict[str, Any], value: str) -> None:
    limit: int | str = int(value) if value.isdigit() else value
    _set(minimal_spec, "behavior.scaleUp.maxIncrease", limit)
    assert parse_spec(minimal_spec).behavior.scale_up.max_increase == limit


@pytest.mark.parametrize("cron", ["0 9 * * 1-5", "*/15 * * * *", "@daily"])
def test_cron_forms_accepted(minimal_spec: dict[str, Any], cron: str) -> None:
    _set(minimal_spec, "warmup.schedules", [{"cron": cron, "duration": "1h", "minReplicas": 2}])
    assert parse_spec(minimal_spec).warmup.schedules[0].cron == cron


def test_kopf_style_mapping_views_are_accepted(minimal_spec: dict[str, Any]) -> None:
    from types import MappingProxyType

    view = MappingProxyType({**minimal_spec, "replicas": MappingProxyType({"max": 3})})
    assert parse_spec(view).replicas.max == 3


def test_whole_resource_round_trips(minimal_spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": "inferscale.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "x", "namespace": "llm"},
        "spec": minimal_spec,
        "status": {"desiredReplicas": 3, "history": [{"at": "2026-01-01T00:00:00Z", "from": 2, "to": 3}]},
    }
    resource = InferenceService.model_validate(body)
    assert resource.status is not None and resource.status.history is not None
    assert resource.status.history[0].from_ == 2
    again = resource.model_dump(by_alias=True, exclude_none=True)
    assert again["status"]["history"][0]["from"] == 2
    assert again["spec"]["scaleTargetRef"]["name"] == "llama-8b"


def test_rule_messages_are_distinct() -> None:
    messages = [v.message for v in vars(rules).values() if isinstance(v, rules.Rule)]
    assert len(messages) == len(set(messages)) >= 9
    assert all(re.search(r"[a-z]", m) for m in messages)
