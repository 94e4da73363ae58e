from __future__ import annotations

from collections.abc import Sequence

import pytest

from inferscale.perf import replica_capacity_rps, replica_profile
from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import run_fluid
from inferscale.sim.run import RunConfig
from inferscale.sim.traces import RatePoint

PROFILE = replica_profile("llama-3.1-8b", "h100-80gb")
CAPACITY = replica_capacity_rps(PROFILE, 500, 100, 0.5, 0.05)


class Fixed:
    interval = 10.0

    def __init__(self, replicas: int) -> None:
        self.name = f"fixed-{replicas}"
        self.replicas = replicas
        self.seen: list[Observation] = []

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        self.seen.append(obs)
        return self.replicas


def cfg(initial: int, ttr: str = "120s") -> RunConfig:
    return RunConfig(
        EngineConfig.from_profile(PROFILE), PROFILE.gpus, 0.5, 0.05, TimeToReady.parse(ttr), initial, warmup=10.0
    )


def flat(rate: float, hours: float = 2.0) -> list[RatePoint]:
    return [RatePoint(600.0 * i, rate, 500.0, 100.0) for i in range(int(hours * 6))]


def test_enough_replicas_meet_the_slo_and_bill_their_lifetime() -> None:
    replicas = 4
    r = run_fluid(flat(0.8 * replicas * CAPACITY), 7200.0, Fixed(replicas), PROFILE, cfg(replicas))
    assert r.scores.slo_attainment > 0.999 and r.scores.unfinished == 0
    assert r.scores.gpu_hours == pytest.approx(replicas * 2.0)
    assert r.scores.requests == pytest.approx(0.8 * replicas * CAPACITY * 7200, rel=1e-6)


def test_too_few_replicas_build_a_backlog_and_miss() -> None:
    policy = Fixed(2)
    r = run_fluid(flat(4 * CAPACITY), 7200.0, policy, PROFILE, cfg(2))
    assert r.scores.slo_attainment < 0.05 and r.scores.unfinished > 0
    late = policy.seen[-1]
    assert late.waiting is not None and late.waiting > 1000
    assert late.kv_cache_utilization is not None and late.kv_cache_utilization > 0.5


def test_new_replicas_serve_only_after_their_time_to_ready() -> None:
    r = run_fluid(flat(CAPACITY), 3600.0, Fixed(6), PROFILE, cfg(2, ttr="300s"))
    ready = dict(zip(r.timeline.at, r.timeline.ready, strict=True))
    provisioned = dict(zip(r.timeline.at, r.timeline.provisioned, strict=True))
    assert ready[60.0] == 2 and provisioned[60.0] == 6
    assert ready[300.0] == 2 and ready[360.0] == 6
    # Billing starts at creation (t = 10 s), not at Ready.
    assert r.scores.gpu_hours == pytest.approx((2 * 3600 + 4 * 3590) / 3600)
