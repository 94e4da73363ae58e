"""Knative KPA: stable 60 s / panic 6 s windows, panic at 200 %, no scale-down while panicking."""

from __future__ import annotations

import itertools

import pytest
from tests.unit.sim.policies.policy_fixtures import make_ctx, make_obs

from inferscale.sim.policies.knative import KnativeKPA, slo_concurrency


def run(kpa: KnativeKPA, start: int, load: list[tuple[float, float]], until: float) -> dict[float, tuple[int, bool]]:
    """Drive a fleet that gets what the KPA asks for, Ready at once; load = [(from_t, concurrency)].
    Returns t -> (replicas, panicking)."""
    current = start
    out = {}
    t = 0.0
    while t <= until:
        conc = [c for since, c in load if since <= t][-1]
        current = kpa.decide(make_obs(current, running=conc, waiting=0.0), t, [])
        out[t] = (current, kpa.panicking)
        t += kpa.interval
    return out


def test_target_is_the_slo_concurrency_at_70_percent() -> None:
    ctx = make_ctx()
    kpa = KnativeKPA(ctx)
    assert kpa.target == pytest.approx(slo_concurrency(ctx))
    assert kpa.target > 1
    assert kpa.target_value == pytest.approx(0.7 * kpa.target)


def test_panic_scales_up_within_a_tick_and_never_down_while_panicking() -> None:
    kpa = KnativeKPA(make_ctx(), target=10.0)  # 7 per pod after 70 %
    timeline = run(kpa, 2, [(0.0, 14.0), (100.0, 70.0), (110.0, 7.0)], until=240.0)
    assert timeline[98.0] == (2, False)
    # 6-s panic window at 100 s: (14 + 14 + 70) / 3 = 32.7 -> 5 pods, 2.5 x the 2 ready: panic.
    assert timeline[100.0] == (5, True)
    assert timeline[104.0] == (10, True)  # 70 / 7
    # Load falls back at 110 s; the count holds at the panic maximum until a stable window (60 s)
    # has passed since the panic condition last held (100 s) ...
    assert all(timeline[t] == (10, True) for t in timeline if 104.0 <= t <= 160.0)
    # ... then panic ends and the stable count applies, at most halving per tick.
    assert timeline[162.0] == (5, False)
    after = [timeline[t][0] for t in sorted(timeline) if t >= 162.0]
    assert all(b >= a // 2 for a, b in itertools.pairwise(after))
    assert after[-1] == 1  # 7 concurrent requests need 1 pod


def test_stable_mode_follows_the_60_s_average() -> None:
    kpa = KnativeKPA(make_ctx(), target=10.0)
    # 1.5x load is below the panic threshold: the stable window averages it in over a minute.
    timeline = run(kpa, 2, [(0.0, 12.0), (100.0, 21.0)], until=200.0)
    # (the start-up panic of the first stable window aside)
    assert not any(panicking for t, (_, panicking) in timeline.items() if t > 60.0)
    assert timeline[100.0][0] == 2
    assert timeline[200.0][0] == 3


def test_starts_in_panic_mode_holding_the_ready_count() -> None:
    """newAutoscaler: "We always start in the panic mode, if the deployment is scaled up over 1 pod",
    with maxPanicPods = the ready count. 19 ready pods carrying what 10 need at the first sample hold
    19 (a KPA that starts calm halves to 10 on that one sample)."""
    kpa = KnativeKPA(make_ctx(max_replicas=69), target=223.0)
    assert kpa.decide(make_obs(19, running=1474.0, waiting=4.0), 120.0, []) == 19
    assert kpa.panicking


def test_the_start_up_panic_ends_after_a_stable_window_of_its_own_samples() -> None:
    kpa = KnativeKPA(make_ctx(max_replicas=69), target=223.0)
    t, seen = 120.0, {}
    while t <= 190.0:
        seen[t] = kpa.decide(make_obs(19, running=1474.0, waiting=4.0), t, [])
        t += kpa.interval
    assert all(n == 19 for at, n in seen.items() if at <= 180.0)
    assert seen[182.0] == 10 and not kpa.panicking  # ceil(1478 / 156.1): within floor(19 / 2)


def test_a_single_ready_pod_starts_calm() -> None:
    kpa = KnativeKPA(make_ctx(), target=10.0)
    assert kpa.decide(make_obs(1, running=1.0, waiting=0.0), 0.0, []) == 1
    assert not kpa.panicking


def test_panic_holds_then_the_stable_window_lets_it_fall_by_half_per_tick() -> None:
    """autoscaler.go Scale: no scale-down while panicking; maxScaleDown = floor(ready / 2) per 2-s tick."""
    kpa = KnativeKPA(make_ctx(max_replicas=100), target=100.0)
    t = 0.0
    for _ in range(31):  # 60 s at 700 concurrent = 10 pods at target 70
        kpa.decide(make_obs(10, running=700.0), t, [])
        t += 2.0
    for _ in range(3):  # the 6-s panic window fills with 4000 concurrent: ceil(4000 / 70) = 58 >= 2 x 10
        got = kpa.decide(make_obs(10, running=4000.0), t, [])
        t += 2.0
    assert got == 58 and kpa.panicking
    assert kpa.decide(make_obs(58, ready=10, pending=48, running=100.0), t, []) == 58
    counts = [58]
    while t < 200.0:  # the 58 are Ready, the load is gone
        t += 2.0
        counts.append(kpa.decide(make_obs(counts[-1], running=100.0), t, []))
    assert not kpa.panicking and counts[-1] == 2  # ceil(100 / 70)
    assert all(b >= a // 2 for a, b in itertools.pairwise(counts))
    assert 58 // 2 in counts  # it did fall by half in one tick


def test_no_sample_holds() -> None:
    kpa = KnativeKPA(make_ctx(), target=10.0)
    assert kpa.decide(make_obs(5, running=None, waiting=None), 0.0, []) == 5
