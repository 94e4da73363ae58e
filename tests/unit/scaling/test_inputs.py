"""What decide accepts: a bad Policy raises a specific error; bad observed values become unknown."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from tests.unit.scaling.helpers import observe

from inferscale.scaling import Policy, ScalerState, ScaleRule, Schedule, decide, validate_policy
from inferscale.scaling.inputs import clean_observation


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"min_replicas": -1}, "min_replicas must be >= 0"),
        ({"min_replicas": 5, "max_replicas": 3}, r"max_replicas \(3\) must be >= 1 and >= min_replicas \(5\)"),
        ({"max_replicas": 0, "min_replicas": 0}, "max_replicas"),
        ({"tolerance": 1.5}, r"tolerance must be in \[0, 1\)"),
        ({"tolerance": math.nan}, "tolerance"),
        ({"target_kv_cache": 0.0}, "target_kv_cache must be a positive number"),
        ({"target_kv_cache": 80.0}, r"target_kv_cache is a fraction in \(0, 1\]"),
        ({"target_capacity_utilization": 0.0}, "target_capacity_utilization must be a positive number"),
        ({"target_capacity_utilization": 1.5}, r"target_capacity_utilization is a fraction in \(0, 1\]"),
        ({"slo_ttft_p95": -0.5}, "slo_ttft_p95 must be a positive number"),
        ({"slo_tpot_p95": 0.0}, "slo_tpot_p95 must be a positive number"),
        ({"capacity_prior_rps": 0.0}, "capacity_prior_rps"),
        ({"scale_down": ScaleRule(-1.0, 50.0, None)}, "scaleDown.stabilizationWindow must be >= 0"),
        ({"scale_up": ScaleRule(0.0, 100.0, 4, 0.0)}, r"scaleUp.period must be > 0"),
        ({"scale_up": ScaleRule(0.0, -5.0, None)}, "scaleUp percent limit must be >= 0"),
        ({"schedules": (Schedule("0 9 * * *", 3600.0, 30),)}, r"keeps 30 replicas, over max_replicas \(10\)"),
    ],
)
def test_bad_policy_names_the_field(fields: dict[str, Any], message: str) -> None:
    pol = Policy(**{"min_replicas": 1, "max_replicas": 10, **fields})
    with pytest.raises(ValueError, match=message):
        validate_policy(pol)
    with pytest.raises(ValueError, match=message):
        decide(observe(2, kv=0.5), pol, ScalerState(), 0.0)


def test_decide_rejects_a_non_finite_time() -> None:
    with pytest.raises(ValueError, match="finite time"):
        decide(observe(2, kv=0.5), Policy(1, 4), ScalerState(), math.inf)


def test_negative_counts_are_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="ready_replicas must be a non-negative integer"):
        clean_observation(observe(2, kv=0.5, ready_replicas=-1))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kv_cache_utilization", math.nan),
        ("kv_cache_utilization", 1.7),  # not a fraction: a percent or a broken query
        ("kv_cache_utilization_max", math.inf),
        ("waiting", -1.0),
        ("ttft_p95", math.inf),
        ("itl_mean", -math.inf),
        ("tpot_p95", math.nan),
        ("request_rate", math.nan),
        ("newest_sample_at", math.nan),
    ],
)
def test_unusable_observed_values_become_unknown(field: str, value: float) -> None:
    changes: dict[str, Any] = {field: value}
    obs = dataclasses.replace(observe(2, kv=0.5, ttft_p95=0.1, itl_mean=0.01, request_rate=1.0), **changes)
    assert getattr(clean_observation(obs), field) is None


def test_negative_timestamps_are_kept() -> None:
    assert clean_observation(observe(2, kv=0.5, newest_sample_at=-30.0)).newest_sample_at == -30.0
