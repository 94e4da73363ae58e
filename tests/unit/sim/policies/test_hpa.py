"""HPA on GPU utilization (target 60 %, 15 s sync, tolerance 0.1, default behavior, 15 s lag)."""

from __future__ import annotations

from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.sim.policies.hpa import HPAGpuUtil
from inferscale.sim.policies.hpa_behavior import HPABehavior, pods_metric_replicas


def test_acts_on_the_sample_one_sync_old() -> None:
    hpa = HPAGpuUtil(make_ctx())
    assert hpa.decide(make_obs(2, gpu_utilization=0.95), 0.0, []) == 2  # nothing 15 s old yet
    # At 15 s it sees the 95 % of t=0: ceil(2 x 0.95 / 0.6) = 4, although util now reads 60 %.
    assert hpa.decide(make_obs(2, gpu_utilization=0.6), 15.0, []) == 4


def test_scale_down_stabilization_keeps_the_max_over_300_s() -> None:
    hpa = HPAGpuUtil(make_ctx())
    current = 4
    hpa.decide(make_obs(current, gpu_utilization=0.9), 0.0, [])
    current = hpa.decide(make_obs(current, gpu_utilization=0.1), 15.0, [])
    assert current == 6  # the 90 % sample of t=0
    seen = {}
    for t in range(30, 360, 15):
        current = hpa.decide(make_obs(current, gpu_utilization=0.1), float(t), [])
        seen[t] = current
    assert all(n == 6 for t, n in seen.items() if t < 315)
    assert seen[315] < 6


def test_busy_gpus_read_as_full_and_keep_growing() -> None:
    # The documented failure: util ~100 % whenever anything runs, so the HPA grows every sync.
    hpa = HPAGpuUtil(make_ctx())
    current = 2
    counts = []
    for t in range(0, 120, 15):
        current = hpa.decide(make_obs(current, gpu_utilization=1.0), float(t), [])
        counts.append(current)
    assert counts == sorted(counts) and counts[-1] >= 20
    assert counts == [2, 4, 4, 7, 7, 12, 12, 20]  # the lag makes every other sync see too few pods


def test_unready_pods_count_as_zero_on_scale_up() -> None:
    # 2 ready pods at 100 %, 2 pending: (2 x 1.0 + 2 x 0) / (4 x 0.6) < 1 flips direction -> hold.
    assert pods_metric_replicas(1.0, 0.6, current=4, reporting=2, missing=0, pending=2) == 4
    # 3 ready at 100 %, 1 pending: 3 / 2.4 = 1.25 -> ceil(1.25 x 4) = 5.
    assert pods_metric_replicas(1.0, 0.6, current=4, reporting=3, missing=0, pending=1) == 5
    # A Ready pod without a sample counts as 0 % on a scale-up too.
    assert pods_metric_replicas(1.0, 0.6, current=4, reporting=3, missing=1) == 5
    # Scale-down with a pod missing: it counts as at target, which softens the cut.
    assert pods_metric_replicas(0.3, 0.6, current=4, reporting=3, missing=1) == 3


def test_a_pending_pod_is_left_out_of_a_scale_down() -> None:
    """groupPods puts a Pending-phase pod with the unready ones, which count only on a scale-up: on a
    scale-down the ratio is the ready pods' own, ceil(0.5 x 3) = 2 (filled at target it would be 3)."""
    assert pods_metric_replicas(0.3, 0.6, current=4, reporting=3, missing=0, pending=1) == 2
    hpa = HPAGpuUtil(make_ctx())
    seen = [hpa.decide(make_obs(4, ready=3, pending=1, gpu_utilization=0.3), float(t), []) for t in range(0, 330, 15)]
    assert seen[-1] == 2  # once the 300-s window has let go of the initial 4


def test_default_scale_up_limit_is_the_larger_of_100_percent_and_4_pods() -> None:
    assert HPABehavior(1, 100).apply(50, 3, 0.0) == 7  # 3 + 4 > 2 x 3
    assert HPABehavior(1, 100).apply(50, 10, 0.0) == 20  # 2 x 10 > 10 + 4
    b = HPABehavior(1, 100)
    assert b.apply(50, 10, 0.0) == 20
    assert b.apply(50, 20, 10.0) == 20  # same 15-s period: counted from its start (10), 100 % is used up
    assert b.apply(50, 20, 30.0) == 40  # a new period


def test_no_metric_holds() -> None:
    hpa = HPAGpuUtil(make_ctx())
    for t in (0.0, 15.0, 30.0):
        assert hpa.decide(make_obs(3, gpu_utilization=None), t, []) == 3
