from __future__ import annotations

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.scaling.types import Observation
from inferscale.sim.policies import POLICY_NAMES, make_policy
from inferscale.sim.policy import steers_deletion


def test_every_documented_policy_is_registered() -> None:
    expected = {
        "inferscale",
        "static-peak",
        "hpa-gpu-util",
        "keda-queue",
        "knative-kpa",
        "aibrix-apa",
        "wva-saturation",
        "dynamo-sla",
        "oracle",
        "reactive-oracle",
    }
    assert expected <= set(POLICY_NAMES)


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown policy 'hpa'; known: inferscale, oracle, reactive-oracle, static-peak, hpa-gpu-util"
    ):
        make_policy("hpa", make_ctx())


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_each_policy_decides_within_bounds_and_names_itself(name: str) -> None:
    c = make_ctx(min_replicas=2, max_replicas=5, initial_replicas=2)
    policy = make_policy(name, c)
    assert policy.name == name
    assert policy.interval > 0
    busy = make_obs(
        3,
        kv_cache_utilization=0.99,
        kv_cache_utilization_max=1.0,
        waiting=500.0,
        running=900.0,
        request_rate=400.0,
        prompt_token_rate=400_000.0,
        generation_token_rate=80_000.0,
        gpu_utilization=1.0,
        ttft_p95=5.0,
        itl_mean=0.2,
    )
    for i in range(40):
        n = policy.decide(busy, i * policy.interval, [])
        assert isinstance(n, int)
        assert 2 <= n <= 5


def _obs(at: float, load: float) -> Observation:
    """Every signal present, at `load` (1: saturated) of a busy fleet of 3."""
    return make_obs(
        3,
        at=at,
        kv_cache_utilization=0.99 * load,
        kv_cache_utilization_max=min(1.0, 1.2 * load),
        waiting=500.0 * load,
        running=900.0 * load,
        request_rate=400.0 * load,
        prompt_token_rate=400_000.0 * load,
        generation_token_rate=80_000.0 * load,
        gpu_utilization=load,
        ttft_p95=0.05 + 5.0 * load,
        itl_mean=0.01 + 0.2 * load,
    )


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_policies_made_from_one_context_do_not_share_state(name: str) -> None:
    # a policy driven through a burst must not leave its windows (HPA's, Knative's panic) to its sibling
    c = make_ctx(min_replicas=1, max_replicas=50, initial_replicas=3)
    driven, sibling, fresh = (make_policy(name, c) for _ in range(3))
    for i in range(40):
        driven.decide(_obs(i * driven.interval, 1.0), i * driven.interval, [])
    end = 40 * driven.interval
    quiet = _obs(end, 0.001)
    assert sibling.decide(quiet, end, []) == fresh.decide(quiet, end, [])


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"slo_ttft": 0.0}, "slo_ttft must be a positive"),
        ({"slo_itl": float("nan")}, "slo_itl must be a positive"),
        ({"time_to_ready": -1.0}, "time_to_ready must be >= 0"),
        ({"min_replicas": 5, "max_replicas": 2}, "min_replicas <= max_replicas"),
        ({"initial_replicas": 0}, "initial_replicas 0 is outside [1, 100]"),
        ({"curve": ()}, "curve is empty"),
        ({"time_to_ready_max": 100.0}, "time_to_ready_max must be >= time_to_ready"),
    ],
)
def test_context_rejects_bad_values(overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        make_ctx(**overrides)


def test_only_inferscale_and_the_oracles_choose_which_replicas_a_scale_down_removes() -> None:
    # inferscale sets pod-deletion-cost (adapters/deletion_cost.py); no peer steers the ReplicaSet's choice
    steering = {name for name in POLICY_NAMES if steers_deletion(make_policy(name, make_ctx()))}
    assert steering == {"inferscale", "oracle", "reactive-oracle"}
