from __future__ import annotations

from typing import Any

import pytest

from inferscale.api.convert import capacity_prior, policy_from_spec
from inferscale.api.models import InvalidSpec, parse_spec
from inferscale.api.spec import ModelRef
from inferscale.scaling.types import Release, ScaleRule, Schedule


def test_design_example_converts_to_seconds_and_rules(full_spec: dict[str, Any]) -> None:
    full_spec["model"].pop("profile")
    policy = policy_from_spec(parse_spec(full_spec), default_interval=30.0)
    assert (policy.min_replicas, policy.max_replicas) == (1, 16)
    assert policy.interval == 10.0  # written in the spec, so the operator default does not apply
    assert (policy.slo_ttft_p95, policy.slo_itl_mean) == pytest.approx((0.5, 0.05))
    assert (policy.target_kv_cache, policy.target_waiting_per_replica, policy.tolerance) == (0.8, 4.0, 0.1)
    assert policy.scale_up == ScaleRule(0.0, 100.0, None, 15.0)
    assert policy.scale_down == ScaleRule(300.0, 50.0, None, 60.0, Release.LINEAR)
    assert (policy.stale_after, policy.time_to_ready_prior, policy.predictive) == (60.0, 180.0, True)
    assert policy.schedules == (Schedule("0 9 * * 1-5", 9 * 3600.0, 4),)
    assert policy.capacity_prior_rps is None


def test_the_per_request_tpot_slo_is_opt_in(minimal_spec: dict[str, Any]) -> None:
    assert policy_from_spec(parse_spec(minimal_spec), default_interval=30.0).slo_tpot_p95 is None
    minimal_spec["slo"] = {"tpotP95": "80ms"}
    assert policy_from_spec(parse_spec(minimal_spec), default_interval=30.0).slo_tpot_p95 == pytest.approx(0.08)


def test_the_capacity_utilization_target_reaches_the_policy(minimal_spec: dict[str, Any]) -> None:
    assert policy_from_spec(parse_spec(minimal_spec), default_interval=30.0).target_capacity_utilization == 0.8
    minimal_spec["targets"] = {"capacityUtilization": 0.7}
    assert policy_from_spec(parse_spec(minimal_spec), default_interval=30.0).target_capacity_utilization == 0.7


def test_an_unset_scale_down_window_follows_the_time_to_ready(minimal_spec: dict[str, Any]) -> None:
    policy = policy_from_spec(parse_spec(minimal_spec), 10.0)
    assert policy.down_window_follows_ttr and policy.scale_down.stabilization_window == 240.0  # 3m prior + 1m
    minimal_spec["warmup"] = {"timeToReady": "10m"}
    assert policy_from_spec(parse_spec(minimal_spec), 10.0).scale_down.stabilization_window == 660.0
    minimal_spec["behavior"] = {"scaleDown": {"stabilizationWindow": "300s"}}
    policy = policy_from_spec(parse_spec(minimal_spec), 10.0)
    assert not policy.down_window_follows_ttr and policy.scale_down.stabilization_window == 300.0


def test_unset_interval_takes_the_operator_default(minimal_spec: dict[str, Any]) -> None:
    assert policy_from_spec(parse_spec(minimal_spec), default_interval=30.0).interval == 30.0


def test_unset_max_increase_is_double_or_four_pods(minimal_spec: dict[str, Any]) -> None:
    assert policy_from_spec(parse_spec(minimal_spec), 10.0).scale_up == ScaleRule(0.0, 100.0, 4, 15.0)


def test_pod_limits_and_custom_periods(minimal_spec: dict[str, Any]) -> None:
    minimal_spec["behavior"] = {
        "scaleUp": {"maxIncrease": 2, "period": "30s", "stabilizationWindow": "1m"},
        "scaleDown": {"maxDecrease": 1, "period": "2m", "stabilizationWindow": "10m", "release": "Hold"},
    }
    policy = policy_from_spec(parse_spec(minimal_spec), 10.0)
    assert policy.scale_up == ScaleRule(60.0, None, 2, 30.0)
    assert policy.scale_down == ScaleRule(600.0, None, 1, 120.0, Release.HOLD)


def test_profile_gives_a_positive_capacity_prior(minimal_spec: dict[str, Any]) -> None:
    minimal_spec["model"]["profile"] = "llama-3.1-8b"
    prior = policy_from_spec(parse_spec(minimal_spec), 10.0).capacity_prior_rps
    assert prior is not None and prior > 0


def _prior(model: ModelRef, ttft: float, itl: float) -> float:
    value = capacity_prior(model, ttft, itl)
    assert value is not None
    return value


def test_looser_slo_or_more_gpus_never_lowers_the_prior() -> None:
    base = _prior(ModelRef(name="m", profile="llama-3.1-8b"), 0.5, 0.05)
    assert _prior(ModelRef(name="m", profile="llama-3.1-8b"), 2.0, 0.1) >= base
    assert _prior(ModelRef(name="m", profile="llama-3.1-8b", gpu="a100-80gb"), 0.5, 0.05) <= base


def test_unreachable_slo_leaves_the_prior_unknown_not_zero() -> None:
    assert capacity_prior(ModelRef(name="m", profile="llama-3.1-8b"), 0.5, 0.0001) is None


@pytest.mark.parametrize(
    ("model", "message"),
    [
        # the spec refuses these (rules.PROFILE, GPU, TENSOR_PARALLEL; a model that does not fit at the TP the spec
        # sets, policy_from_spec); the prior still names them if one gets past it
        (ModelRef.model_construct(name="m", profile="gpt-5"), "unknown model 'gpt-5'"),
        (ModelRef.model_construct(name="m", profile="llama-3.1-8b", gpu="tpu-v5"), "unknown GPU 'tpu-v5'"),
        (  # its remedies in the spec's words, not the engine's or the CLI's
            ModelRef(name="m", profile="llama-3.1-70b", gpu="l40s-48gb", tensor_parallel=1),
            "spec.model: .* exceed the 40.5 GiB usable on l40s-48gb .*; raise model.tensorParallel or set a larger "
            "model.gpu$",
        ),
        (
            ModelRef(name="m", profile="llama-3.1-8b", max_num_seqs=10**9, max_num_batched_tokens=10**9),
            "; lower model.maxNumBatchedTokens or model.maxNumSeqs, raise model.tensorParallel or set a larger",
        ),
        (ModelRef.model_construct(name="m", profile="llama-3.1-8b", tensor_parallel=3), "does not divide"),
    ],
)
def test_bad_profile_is_an_invalid_spec(model: ModelRef, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        capacity_prior(model, 0.5, 0.05)


def test_the_engines_batch_limits_change_the_prior() -> None:
    # Mooncake-like lengths: the token budget bounds how many long prompts a replica batches
    lengths = (7.0, 0.05, 15000, 149)
    default = capacity_prior(ModelRef(name="m", profile="llama-3.1-8b"), *lengths)
    small = capacity_prior(ModelRef(name="m", profile="llama-3.1-8b", max_num_batched_tokens=2048), *lengths)
    assert default is not None and small is not None and small < default


def test_max_num_seqs_caps_the_prior_where_it_binds() -> None:
    # short requests: a replica holds hundreds at once, so 64 seats is what limits it
    lengths = (0.5, 0.05, 100, 50)
    default = capacity_prior(ModelRef(name="m", profile="llama-3.1-8b"), *lengths)
    seated = capacity_prior(ModelRef(name="m", profile="llama-3.1-8b", max_num_seqs=64), *lengths)
    assert default is not None and seated is not None and seated < 0.5 * default


def test_batch_limits_vllm_refuses_are_an_invalid_spec() -> None:
    model = ModelRef(name="m", profile="llama-3.1-8b", max_num_batched_tokens=512)
    with pytest.raises(InvalidSpec, match=r"spec.model: max_num_batched_tokens \(512\) must be >= max_num_seqs"):
        capacity_prior(model, 0.5, 0.05)


def test_a_model_that_fits_at_some_tensor_parallel_size_waits_for_the_deployment_s() -> None:
    spec = {
        "model": {"name": "m", "profile": "llama-3.1-70b", "gpu": "h100-80gb"},
        "scaleTargetRef": {"name": "llm"},
        "replicas": {"min": 1, "max": 4},
    }
    policy = policy_from_spec(parse_spec(spec), default_interval=10.0)  # was InvalidSpec: 131.5 GiB on one GPU
    assert policy.capacity_prior_rps is None and policy.capacity_note is not None
    assert "tensor-parallel size (or set spec.model.tensorParallel)" in policy.capacity_note
    with pytest.raises(InvalidSpec, match=r"131\.5 GiB"):  # the spec's own choice: refused, as before
        policy_from_spec(parse_spec({**spec, "model": {**spec["model"], "tensorParallel": 1}}), default_interval=10.0)


def test_one_batch_limit_waits_for_the_deployment_s_other_at_the_tensor_parallel_size_the_spec_gives() -> None:
    model = {"name": "m", "profile": "llama-3.1-70b", "gpu": "h100-80gb", "tensorParallel": 2}
    spec = {"model": {**model, "maxNumBatchedTokens": 512}, "scaleTargetRef": {"name": "llm"}}
    policy = policy_from_spec(parse_spec({**spec, "replicas": {"min": 1, "max": 4}}), default_interval=10.0)
    # was InvalidSpec: the pair was tried at TP 1, where the 70B model fits no H100
    assert policy.capacity_prior_rps is None and policy.capacity_note is not None
    assert "max_num_seqs (or set spec.model.maxNumSeqs too)" in policy.capacity_note
    assert "tensor-parallel" not in policy.capacity_note
