from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.run import RunConfig, Workload, run_policies, run_policy


class Scripted:
    """Replica counts on a fixed timetable: {from_time: replicas}."""

    interval = 10.0

    def __init__(self, plan: dict[int, int], name: str = "scripted") -> None:
        self.plan = plan
        self.name = name
        self.seen: list[Observation] = []

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        self.seen.append(obs)
        return self.plan[max(t for t in self.plan if t <= now)]


def poisson(rate: float, duration: float, seed: int = 0) -> Workload:
    rng = np.random.default_rng(seed)
    n = rng.poisson(rate * duration)
    return Workload(
        "poisson",
        np.sort(rng.uniform(0, duration, n)),
        rng.integers(50, 1000, n),
        rng.integers(1, 100, n),
        duration,
    )


def config(
    engine_cfg: EngineConfig, initial: int, seed: int = 0, ttr: str = "30s-90s", warmup: float = 10.0
) -> RunConfig:
    return RunConfig(engine_cfg, 2, 0.5, 0.05, TimeToReady.parse(ttr), initial, seed=seed, warmup=warmup)


def test_every_request_is_finished_or_counted_as_a_miss(engine_cfg: EngineConfig) -> None:
    w = poisson(30, 600)
    r = run_policy(w, Scripted({0: 0, 300: 3}), config(engine_cfg, 2))
    out = r.outcomes
    assert out is not None
    finished = sum(not math.isnan(f) for f in out.finished_at)
    assert finished + r.scores.unfinished == r.scores.requests == len(w)
    # Between t=10 and the first Ready replica after t=300 nobody serves: those requests queue and miss TTFT.
    assert 0.0 < r.scores.slo_attainment < 0.6
    # Enough replicas: the requests in flight when the trace ends finish within the grace, every one of them
    enough = run_policy(w, Scripted({0: 4}), config(engine_cfg, 4))
    assert enough.scores.unfinished == 0 and enough.scores.requests == len(w)


def test_a_replica_ready_within_the_grace_serves_the_queue_the_trace_left(engine_cfg: EngineConfig) -> None:
    # nobody serves after t=10 and the replicas asked for at t=570 are Ready 60 s after the trace's end, well
    # within the 120-s grace: the router's queue is theirs then, not at the grace's end where nothing can finish
    w = poisson(5, 600)
    r = run_policy(w, Scripted({0: 0, 570: 4}), config(engine_cfg, 1, ttr="90s"))
    queued = int(np.sum(w.arrival > 10.0))
    assert queued > 2000 and r.scores.unfinished < queued / 2


def test_gpu_hours_are_replica_lifetimes_times_gpus(engine_cfg: EngineConfig) -> None:
    empty = Workload("empty", np.array([]), np.array([], dtype=np.int64), np.array([], dtype=np.int64), 600.0)
    r = run_policy(empty, Scripted({0: 2, 100: 5, 400: 1}), config(engine_cfg, 2, ttr="50s"))
    # Two from 0; three more at t=100; at t=400 the four newest go (idle, so at once), one stays to 600.
    expected_s = 2 * (600 + 400 + 3 * 300)
    assert r.scores.gpu_hours == pytest.approx(expected_s / 3600)
    assert r.scores.scale_actions == 2
    # The timeline's provisioned count integrates to the same GPU time (one sample per minute).
    assert sum(r.timeline.provisioned) * 60 * 2 == pytest.approx(expected_s, rel=0.05)


def test_gpu_hours_and_the_provisioned_timeline_count_a_replica_draining_after_its_scale_down(
    engine_cfg: EngineConfig,
) -> None:
    # Two long requests at t=390 go to two of the five idle replicas. At t=400 the scale-down to one takes the
    # three idle ones and one busy one: that one drains its request, 30,000 decode steps of 6 ms (5 ms + 1 ms per
    # sequence), until about t=570, and holds its GPUs until then.
    w = Workload("two long", np.array([390.0, 390.0]), np.array([100, 100]), np.array([30_001, 30_001]), 600.0)
    r = run_policy(w, Scripted({0: 2, 100: 5, 400: 1}), config(engine_cfg, 2, ttr="50s"))
    assert r.scores.unfinished == 0
    # five replicas to 400 (two from 0, three from 100), one on to 600, one on to the drain's end
    drained = 390.0 + 30_000 * 0.006
    expected_s = 2 * (2 * 400 + 3 * 300 + 200 + (drained - 400))
    assert r.scores.gpu_hours * 3600 == pytest.approx(expected_s, abs=2 * 1.0)
    # The per-minute timeline integrates to it within one sample. Samples at 60 s: 2, then 5 from 120 to 360,
    # then 2 at 420, 480 and 540 (the kept replica and the draining one), 1 at 600. The Deployment's desired
    # count, which leaves the draining replica out, would read 1 at those three and fall 360 GPU-s short.
    provisioned_s = sum(r.timeline.provisioned) * 60 * 2
    assert provisioned_s == 2 * 60 * (2 + 5 * 5 + 2 * 3 + 1)
    assert provisioned_s == pytest.approx(expected_s, abs=60 * 2)


def test_a_timeline_row_counts_the_replicas_of_the_minute_it_closes_when_a_scale_lands_on_it(
    engine_cfg: EngineConfig,
) -> None:
    # scales on sample instants (every policy whose interval divides the minute makes them there): the row at
    # t=120 closes a minute of 2 replicas, not of the 5 asked for at that instant
    empty = Workload("empty", np.array([]), np.array([], dtype=np.int64), np.array([], dtype=np.int64), 600.0)
    r = run_policy(empty, Scripted({0: 2, 120: 5, 360: 3}), config(engine_cfg, 2, ttr="50s"))
    assert r.timeline.provisioned == [2, 2, 5, 5, 5, 5, 3, 3, 3, 3]
    assert sum(r.timeline.provisioned) * 60 * 2 == pytest.approx(r.scores.gpu_hours * 3600)


def test_no_decision_is_made_or_counted_at_the_end_of_the_arrivals(engine_cfg: EngineConfig) -> None:
    empty = Workload("empty", np.array([]), np.array([], dtype=np.int64), np.array([], dtype=np.int64), 600.0)
    policy = Scripted({0: 2, 600: 5})
    r = run_policy(empty, policy, config(engine_cfg, 2, ttr="50s"))
    assert r.scores.scale_actions == 0 and r.scores.gpu_hours * 3600 == pytest.approx(2 * 2 * 600)
    assert len(policy.seen) == 59  # every 10 s from the first at 10 to 590


def test_same_seed_same_result_and_the_seed_drives_time_to_ready(engine_cfg: EngineConfig) -> None:
    w = poisson(20, 900, seed=1)
    plan = {0: 2, 200: 6, 600: 3}
    a = run_policy(w, Scripted(plan), config(engine_cfg, 2, seed=7))
    b = run_policy(w, Scripted(plan), config(engine_cfg, 2, seed=7))
    c = run_policy(w, Scripted(plan), config(engine_cfg, 2, seed=8))
    assert a.scores == b.scores and a.timeline == b.timeline
    assert c.timeline.ready != a.timeline.ready


def test_policies_see_observations_of_their_own_fleet_after_the_warmup(engine_cfg: EngineConfig) -> None:
    policy = Scripted({0: 3})
    run_policy(poisson(20, 300), policy, config(engine_cfg, 3, warmup=120.0))
    assert policy.seen[0].at == 120.0  # no decision on the empty windows of the first scrapes
    later = [o for o in policy.seen if o.at >= 150]
    assert later and all(o.ready_replicas == 3 and o.request_rate is not None for o in later)
    assert all(o.ttft_p95 is not None and o.ttft_p95 < 0.5 for o in later)


def test_policies_see_the_offered_load_even_when_the_fleet_cannot_serve_it(engine_cfg: EngineConfig) -> None:
    policy = Scripted({0: 1})
    run_policy(poisson(400, 300, seed=3), policy, config(engine_cfg, 1))
    late = [o for o in policy.seen if o.at >= 120]
    assert late and all(o.arrival_rate is not None and o.arrival_rate == pytest.approx(400, rel=0.1) for o in late)
    assert all(o.request_rate is not None and o.request_rate < 0.8 * 400 for o in late)  # one replica, saturated


def test_side_by_side_in_a_process_pool_equals_one_by_one(engine_cfg: EngineConfig) -> None:
    w = poisson(30, 300, seed=2)
    plans: dict[str, dict[int, int]] = {"small": {0: 1}, "big": {0: 4}}

    def factory(name: str) -> Scripted:
        return Scripted(plans[name], name)

    pooled = run_policies(w, list(plans), factory, config(engine_cfg, 2), workers=2)
    serial = run_policies(w, list(plans), factory, config(engine_cfg, 2), workers=1)
    assert list(pooled) == ["small", "big"]
    for name in plans:
        assert pooled[name].scores == serial[name].scores
    assert pooled["big"].scores.slo_attainment > pooled["small"].scores.slo_attainment


@pytest.mark.parametrize("steers", [True, False])
def test_the_fleet_removes_the_least_loaded_only_for_a_policy_that_steers_deletion(
    engine_cfg: EngineConfig, steers: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inferscale.sim.run as run

    made: list[run.Fleet] = []

    class Recorded(run.Fleet):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(run, "Fleet", Recorded)
    policy = Scripted({0: 2})
    if steers:
        policy.steers_deletion = True  # type: ignore[attr-defined]
    run_policy(poisson(5, 30), policy, config(engine_cfg, 2))
    assert [f.least_loaded_victims for f in made] == [steers]


def test_a_request_the_engines_refuse_is_a_miss_but_no_wait_in_the_ttft_percentiles(engine_cfg: EngineConfig) -> None:
    w = poisson(30, 600, seed=2)
    long = np.arange(len(w)) % 10 == 0  # a tenth of the prompts are past what a replica can take: vLLM's HTTP 400
    too_long = w.input_tokens.copy()
    too_long[long] = engine_cfg.longest_request + 1
    with_refused = Workload("some refused", w.arrival, too_long, w.output_tokens, w.duration)
    without = Workload("the rest", w.arrival[~long], w.input_tokens[~long], w.output_tokens[~long], w.duration)
    a = run_policy(with_refused, Scripted({0: 4}), config(engine_cfg, 4))
    b = run_policy(without, Scripted({0: 4}), config(engine_cfg, 4))
    assert a.scores.unfinished == int(long.sum()) and b.scores.unfinished == 0
    assert a.scores.slo_attainment == pytest.approx(b.scores.slo_attainment * (~long).sum() / len(w))
    # the others' TTFT alone: the refused were answered at once, they did not wait to the replay's end
    p95_p99 = (b.scores.ttft_p95_s, b.scores.ttft_p99_s)
    assert (a.scores.ttft_p95_s, a.scores.ttft_p99_s) == pytest.approx(p95_p99, rel=1e-6)  # steps summed apart
