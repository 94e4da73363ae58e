from __future__ import annotations

import random

import pytest

from inferscale.sim.engine import EngineConfig, Outcomes
from inferscale.sim.fleet import Fleet, TimeToReady


def test_time_to_ready_parses_fixed_and_uniform_forms() -> None:
    fixed = TimeToReady.parse("180s")
    assert (fixed.low, fixed.high) == (180.0, 180.0)
    assert fixed.sample(random.Random(0)) == 180.0
    span = TimeToReady.parse("2m-4m")
    draws = [span.sample(random.Random(s)) for s in range(50)]
    assert all(120.0 <= d <= 240.0 for d in draws) and len(set(draws)) > 1
    for bad in ("", "fast", "240s-120s", "1m-2m-3m"):
        with pytest.raises(ValueError, match="time-to-ready"):
            TimeToReady.parse(bad)


def test_router_sends_each_request_to_the_least_outstanding_ready_replica(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(3)
    for i in range(9):  # round robin while loads tie; replica 1 gets the short requests
        fleet.route(0.0, 100, 5 if i % 3 == 1 else 20_000, i, 0.0)
    assert [r.engine.outstanding for r in fleet.ready] == [3, 3, 3]
    fleet.route(10.0, 100, 5, 9, 10.0)  # by now replica 1 has finished its three
    assert [r.engine.outstanding for r in fleet.ready] == [3, 1, 3]


def test_requests_wait_at_the_router_until_a_replica_is_ready_and_the_wait_counts_in_ttft(
    engine_cfg: EngineConfig,
) -> None:
    out = Outcomes(1)
    fleet = Fleet(engine_cfg, 1, TimeToReady(30, 30), outcomes=out)
    fleet.scale_to(1, 0.0)
    fleet.route(5.0, 100, 2, 0, 5.0)
    assert len(fleet.queue) == 1 and fleet.next_ready_at == 30.0
    fleet.promote(30.0)
    fleet.advance_all(100.0)
    assert out.ttft[0] == pytest.approx(25.0 + 0.005 + 100 * 10e-6)


def test_scale_down_removes_pending_then_least_loaded_and_bills_draining_until_done(
    engine_cfg: EngineConfig,
) -> None:
    fleet = Fleet(engine_cfg, 2, TimeToReady(50, 50))
    fleet.start(2)
    fleet.route(0.0, 100, 10_001, 0, 0.0)  # busy replica: 10,000 decode steps of 6 ms = 60 s
    fleet.scale_to(3, 10.0)  # one pending
    fleet.scale_to(1, 20.0)
    busy, idle = fleet.replicas[0], fleet.replicas[1]
    assert fleet.ready == [busy] and not fleet.pending
    assert fleet.replicas[2].deleted_at == 20.0 and idle.deleted_at == 20.0
    fleet.scale_to(0, 21.0)
    assert fleet.draining == [busy]
    fleet.reap(100.0)
    drained = busy.deleted_at
    assert drained is not None and drained == busy.engine.last_finish_at
    assert 60.0 < drained < 61.0
    assert fleet.gpu_seconds(1000.0) == pytest.approx(2 * (drained + 20.0 + 10.0))
    assert fleet.scale_actions == 3


def test_scale_down_removes_a_pending_replica_before_an_idle_ready_one_created_after_it(
    engine_cfg: EngineConfig,
) -> None:
    # as a ReplicaSet ranks pods: not Ready first, whatever their age
    fleet = Fleet(engine_cfg, 1, TimeToReady(100, 100))
    fleet.scale_to(1, 0.0)  # Ready at 100
    fleet.ttr = TimeToReady(10, 10)
    fleet.scale_to(2, 50.0)  # created later, Ready at 60
    fleet.promote(70.0)
    older_pending, newer_ready = fleet.replicas
    assert fleet.pending == [older_pending] and fleet.ready == [newer_ready]
    fleet.scale_to(1, 70.0)
    assert older_pending.deleted_at == 70.0 and fleet.ready == [newer_ready]


@pytest.mark.parametrize("least_loaded", [True, False])
def test_a_scale_down_removes_the_least_loaded_only_for_a_policy_that_sets_deletion_cost(
    engine_cfg: EngineConfig, least_loaded: bool
) -> None:
    # the peers set spec.replicas only: the ReplicaSet then removes the most recently Ready pod, however busy
    fleet = Fleet(engine_cfg, 1, TimeToReady(10, 10), least_loaded_victims=least_loaded)
    fleet.start(1)
    fleet.scale_to(2, 0.0)
    fleet.promote(10.0)
    older, newer = fleet.replicas
    fleet.route(20.0, 100, 5, 0, 20.0)  # the loads tie: the oldest gets it, and is done within a second
    fleet.route(20.0, 100, 10_001, 1, 20.0)  # a minute of decoding on the newer one
    fleet.advance_all(30.0)
    assert (older.engine.outstanding, newer.engine.outstanding) == (0, 1)
    fleet.scale_to(1, 30.0)
    if least_loaded:
        assert fleet.ready == [newer] and older.deleted_at == 30.0 and not fleet.draining
    else:
        assert fleet.ready == [older] and fleet.draining == [newer]


def test_the_router_sees_the_requests_in_flight_now_however_far_an_engine_has_run(engine_cfg: EngineConfig) -> None:
    # An engine advanced for another reason (a scrape, an earlier request) has run its step in flight to its end
    # past the arrival; the requests that step finishes are still in flight when the router places the arrival.
    # Routing, and so every finish time, must be the same as a router that advances every engine first.
    rng = random.Random(3)
    arrivals = sorted(rng.uniform(0, 30) for _ in range(1500))
    lengths = [(rng.randint(50, 2000), rng.randint(1, 60)) for _ in arrivals]

    def replay(eager: bool) -> list[float]:
        out = Outcomes(len(arrivals))
        fleet = Fleet(engine_cfg, 1, TimeToReady.parse("1s"), outcomes=out)
        fleet.start(3)
        for rid, (t, (inp, outp)) in enumerate(zip(arrivals, lengths, strict=True)):
            if eager or rid % 7 == 0:  # the lazy router still advances some engines early, as scrapes do
                fleet.advance_all(t)
            fleet.route(t, inp, outp, rid, t)
        fleet.advance_all(1e9)
        return list(out.finished_at)

    lazy, eager = replay(False), replay(True)
    assert all(f == f for f in lazy)  # every request finished
    assert lazy == pytest.approx(eager, abs=1e-9)  # the same steps, summed in other pieces
