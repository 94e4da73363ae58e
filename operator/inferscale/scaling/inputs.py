"""Checking what `decide` is given: a bad Policy is a caller's bug and raises ValueError naming the
field; a bad observed value (NaN, ±Inf, negative, a KV fraction above 1) is a fact about the
metrics pipeline and becomes None (unknown), never zero and never an exception."""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

from inferscale.scaling.schedule import validate_schedule
from inferscale.scaling.types import Observation, Policy, Release, ScaleRule

_OBSERVED = (
    "kv_cache_utilization",
    "kv_cache_utilization_max",
    "waiting",
    "running",
    "ttft_p95",
    "itl_mean",
    "tpot_p95",
    "request_rate",
    "prompt_token_rate",
    "generation_token_rate",
    "gpu_utilization",
)
_FRACTIONS = ("kv_cache_utilization", "kv_cache_utilization_max", "gpu_utilization")


def _usable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0


def clean_observation(obs: Observation) -> Observation:
    """`obs` with unusable observed values replaced by None. Counts must be non-negative integers."""
    for name in (
        "current_replicas",
        "ready_replicas",
        "pending_replicas",
        "pods_reporting",
        "capacity_blocked_replicas",
    ):
        value = getattr(obs, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"observation {name} must be a non-negative integer, got {value!r}")
    changes: dict[str, float | None] = {}
    for name in _OBSERVED:
        value = getattr(obs, name)
        if value is None:
            continue
        if not _usable(value) or (name in _FRACTIONS and value > 1.0):
            changes[name] = None
    # A timestamp may be any finite number (the simulator's clock starts at 0, tests go negative).
    if obs.newest_sample_at is not None and not math.isfinite(obs.newest_sample_at):
        changes["newest_sample_at"] = None
    return dataclasses.replace(obs, **changes) if changes else obs  # type: ignore[arg-type]


def _check_rule(name: str, rule: ScaleRule) -> None:
    if not (math.isfinite(rule.stabilization_window) and rule.stabilization_window >= 0):
        raise ValueError(f"{name}.stabilizationWindow must be >= 0 seconds, got {rule.stabilization_window!r}")
    if rule.max_change_percent is not None and not (
        math.isfinite(rule.max_change_percent) and rule.max_change_percent >= 0
    ):
        raise ValueError(f"{name} percent limit must be >= 0, got {rule.max_change_percent!r}")
    if rule.max_change_pods is not None and rule.max_change_pods < 0:
        raise ValueError(f"{name} pods limit must be >= 0, got {rule.max_change_pods!r}")
    if not (math.isfinite(rule.period) and rule.period > 0):
        raise ValueError(f"{name}.period must be > 0 seconds, got {rule.period!r}")
    if not isinstance(rule.release, Release):
        raise ValueError(f"{name}.release must be one of {', '.join(r.value for r in Release)}, got {rule.release!r}")


def _positive(name: str, value: float | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or not (math.isfinite(value) and value > 0):
        raise ValueError(f"policy {name} must be a positive number, got {value!r}")


@lru_cache(maxsize=1024)
def validate_policy(policy: Policy) -> None:
    """Raise ValueError on the first inconsistent field. Cached: a Policy is immutable."""
    if policy.min_replicas < 0:
        raise ValueError(f"policy min_replicas must be >= 0, got {policy.min_replicas}")
    if policy.max_replicas < max(policy.min_replicas, 1):
        raise ValueError(
            f"policy max_replicas ({policy.max_replicas}) must be >= 1 and >= min_replicas ({policy.min_replicas})"
        )
    _positive("interval", policy.interval)
    if not (math.isfinite(policy.tolerance) and 0 <= policy.tolerance < 1):
        raise ValueError(f"policy tolerance must be in [0, 1), got {policy.tolerance!r}")
    _positive("slo_ttft_p95", policy.slo_ttft_p95, optional=True)
    _positive("slo_itl_mean", policy.slo_itl_mean, optional=True)
    _positive("slo_tpot_p95", policy.slo_tpot_p95, optional=True)
    _positive("target_kv_cache", policy.target_kv_cache)
    if policy.target_kv_cache > 1:
        raise ValueError(f"policy target_kv_cache is a fraction in (0, 1], got {policy.target_kv_cache!r}")
    _positive("target_waiting_per_replica", policy.target_waiting_per_replica)
    _positive("target_capacity_utilization", policy.target_capacity_utilization)
    if policy.target_capacity_utilization > 1:
        raise ValueError(
            f"policy target_capacity_utilization is a fraction in (0, 1], got {policy.target_capacity_utilization!r}"
        )
    _positive("stale_after", policy.stale_after)
    if not (math.isfinite(policy.time_to_ready_prior) and policy.time_to_ready_prior >= 0):
        raise ValueError(f"policy time_to_ready_prior must be >= 0 seconds, got {policy.time_to_ready_prior!r}")
    _positive("capacity_prior_rps", policy.capacity_prior_rps, optional=True)
    _check_rule("scaleUp", policy.scale_up)
    _check_rule("scaleDown", policy.scale_down)
    for schedule in policy.schedules:
        validate_schedule(schedule)
        if schedule.min_replicas > policy.max_replicas:
            raise ValueError(
                f"policy schedule {schedule.cron!r} keeps {schedule.min_replicas} replicas, over max_replicas "
                f"({policy.max_replicas})"
            )
