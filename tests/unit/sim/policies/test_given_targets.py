"""A peer's target as the user's own config sets it (`simulate --baseline-target`) replaces the calibrated one;
the report says which it ran with."""

from __future__ import annotations

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.sim.bounds import replay_bounds
from inferscale.sim.policies.aibrix import AIBrixAPA
from inferscale.sim.policies.hpa import HPAGpuUtil
from inferscale.sim.policies.keda import KedaQueue
from inferscale.sim.policies.knative import KnativeKPA


def test_each_peer_runs_with_the_target_given_and_the_others_keep_their_defaults() -> None:
    given = make_ctx(baseline_targets=(("keda-queue", 10.0), ("knative-kpa", 100.0)))
    default = make_ctx()
    # 30 waiting on 2 replicas: 3 replicas at 10 each, 6 at KEDA's default 5
    assert KedaQueue(given).decide(make_obs(2, waiting=30.0), 0.0, []) == 3
    assert KedaQueue(default).decide(make_obs(2, waiting=30.0), 0.0, []) == 6
    assert KnativeKPA(given).target_value == pytest.approx(70.0)  # Knative's 70% utilization on top
    assert KnativeKPA(default).target != 100.0  # calibrated on the trace
    assert HPAGpuUtil(given).target == 0.6 and AIBrixAPA(given).target == AIBrixAPA(default).target
    hpa = make_ctx(baseline_targets=(("hpa-gpu-util", 0.9), ("aibrix-apa", 0.5)))
    assert (HPAGpuUtil(hpa).target, AIBrixAPA(hpa).target) == (0.9, 0.5)
    # a target passed to the constructor (the tests' own) still wins
    assert KedaQueue(given, threshold=2.0).threshold == 2.0


def test_the_report_names_a_given_target_as_given() -> None:
    given = replay_bounds(make_ctx(baseline_targets=(("knative-kpa", 100.0), ("aibrix-apa", 0.5))))
    assert given.targets["knative-kpa"] == "70 in flight per pod (100 given × 70%)"
    assert given.targets["aibrix-apa"] == "KV 0.50 (given)"
    calibrated = replay_bounds(make_ctx())
    assert "at the SLO" in calibrated.targets["knative-kpa"] and "at the SLO" in calibrated.targets["aibrix-apa"]


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ((("dynamo-sla", 1.0),), "'dynamo-sla' takes no target here; those that do: hpa-gpu-util"),
        ((("aibrix-apa", 1.5),), "aibrix-apa=1.5: its target is the KV-cache usage"),
        ((("keda-queue", float("inf")),), "keda-queue=inf: its target is waiting requests per replica"),
    ],
)
def test_a_target_no_peer_can_take_is_refused(targets: tuple[tuple[str, float], ...], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make_ctx(baseline_targets=targets)
