"""inferscale's policy in the simulator: the operator's spec conversion, decide() and status round-trip."""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import replace

import pytest
from tests.unit.sim.policies.policy_fixtures import PROFILE, make_ctx, make_obs

from inferscale.api.convert import with_observed_prior
from inferscale.api.spec import TYPICAL_INPUT_TOKENS, TYPICAL_OUTPUT_TOKENS
from inferscale.perf import replica_capacity_rps
from inferscale.scaling import Observation, RateSample, ScalerState, decide
from inferscale.scaling.forecast import HISTORY_KEPT
from inferscale.sim.policies.inferscale import Inferscale, KeptHistory


def loaded(current: int, kv: float, rate: float, isl: float = 1000.0, osl: float = 200.0) -> Observation:
    return make_obs(
        current,
        kv_cache_utilization=kv,
        kv_cache_utilization_max=min(kv + 0.05, 1.0),
        waiting=0.0,
        running=current * 50.0,
        ttft_p95=0.2,
        itl_mean=0.02,
        request_rate=rate,
        prompt_token_rate=rate * isl,
        generation_token_rate=rate * osl,
        newest_sample_at=None,
    )


def test_policy_is_the_operators_conversion_of_the_context() -> None:
    ctx = make_ctx(
        slo_ttft=0.3,
        slo_itl=0.04,
        time_to_ready=240.0,
        min_replicas=2,
        max_replicas=40,
        interval=15.0,
        initial_replicas=2,
    )
    p = Inferscale(ctx).policy
    assert (p.slo_ttft_p95, p.slo_itl_mean, p.time_to_ready_prior) == (0.3, 0.04, 240.0)
    assert (p.min_replicas, p.max_replicas, p.interval) == (2, 40, 15.0)
    assert (p.target_kv_cache, p.target_waiting_per_replica) == (0.8, 4.0)
    typical = replica_capacity_rps(PROFILE, TYPICAL_INPUT_TOKENS, TYPICAL_OUTPUT_TOKENS, 0.3, 0.04)
    assert p.capacity_prior_rps == pytest.approx(typical)


def test_the_lead_is_the_top_of_the_time_to_ready_range_as_the_operator_measures_it() -> None:
    assert Inferscale(make_ctx(time_to_ready=240.0, time_to_ready_max=270.0)).policy.time_to_ready_prior == 270.0


def test_returns_what_scaling_decide_returns() -> None:
    ctx = make_ctx()
    policy = Inferscale(ctx)
    obs = replace(loaded(2, kv=0.95, rate=20.0), at=100.0)
    n = policy.decide(obs, 100.0, [])
    assert policy.last_decision is not None
    expected_policy = replace(policy.policy, capacity_prior_rps=ctx.capacity_rps(1000.0, 200.0))
    assert n == decide(obs, expected_policy, ScalerState(), 100.0, []).replicas
    # 95 % KV on 2 replicas against an 80 % target: 2 x 0.95 / 0.8 = 2.4, so 3, and the decision's own words
    assert n == 3 and policy.last_decision.message.startswith("KV cache 95% > 80% target on 2 ready replicas → 3")


def test_capacity_prior_follows_observed_lengths_not_the_trace() -> None:
    ctx = make_ctx()  # the trace's requests are 1000 in / 200 out
    policy = Inferscale(ctx)
    idle = make_obs(2, kv_cache_utilization=0.5, waiting=0.0, request_rate=None)
    assert policy._policy_now(idle).capacity_prior_rps == policy.policy.capacity_prior_rps  # typical prior
    long = loaded(2, kv=0.5, rate=10.0, isl=4000.0, osl=500.0)
    prior = policy._policy_now(long).capacity_prior_rps
    # The operator's own function, at the lengths the engines report (not the trace's 1000/200).
    assert prior == with_observed_prior(policy.policy, policy.spec.model, long).capacity_prior_rps
    assert prior is not None and policy.policy.capacity_prior_rps is not None
    assert prior < policy.policy.capacity_prior_rps  # longer requests: fewer per second per replica
    assert prior == pytest.approx(replica_capacity_rps(PROFILE, 4000.0, 500.0, 0.3, 0.04), rel=0.01)
    # then a tick without rates (the first scrape after Prometheus came back): the lengths last reported, not
    # the typical ones
    assert policy._policy_now(idle).capacity_prior_rps == prior


def test_state_lives_in_status_and_survives_a_restart() -> None:
    ctx = make_ctx()
    timeline = [(float(t), loaded(4, kv=0.2 if t > 60 else 0.9, rate=12.0)) for t in range(0, 400, 10)]
    history: list[RateSample] = []

    def run(policy: Inferscale, ticks: list[tuple[float, Observation]], start: int) -> tuple[list[int], int]:
        current, out = start, []
        for t, obs in ticks:
            current = policy.decide(replace(obs, current_replicas=current, ready_replicas=current), t, history)
            out.append(current)
        return out, current

    straight, _ = run(Inferscale(ctx), timeline, 4)
    first = Inferscale(ctx)
    head, current = run(first, timeline[:15], 4)
    restarted = Inferscale(ctx)
    restarted.status = json.loads(json.dumps(first.status))  # what the CR status would hold
    tail, _ = run(restarted, timeline[15:], current)
    assert head + tail == straight
    assert first.status["recommendations"]  # the scale-down window is in status, not in memory
    assert max(straight) > 4 and straight[-1] < max(straight)


def test_the_contexts_per_request_tpot_slo_becomes_the_specs_and_the_policys() -> None:
    assert Inferscale(make_ctx()).policy.slo_tpot_p95 is None
    policy = Inferscale(make_ctx(slo_tpot=0.04))
    assert policy.spec.slo.tpot_p95 == "0.040s" and policy.policy.slo_tpot_p95 == pytest.approx(0.04)


def test_the_spec_carries_the_engines_batch_limits() -> None:
    from inferscale.perf import replica_profile

    profile = replica_profile("llama-3.1-8b", "h100-80gb", max_num_batched_tokens=2048)
    policy = Inferscale(make_ctx(profile=profile))
    assert policy.spec.model.max_num_batched_tokens == 2048
    assert policy.spec.model.max_num_seqs == profile.max_num_seqs
    assert policy.policy.capacity_prior_rps == pytest.approx(
        replica_capacity_rps(profile, TYPICAL_INPUT_TOKENS, TYPICAL_OUTPUT_TOKENS, 0.5, 0.05)
    )


def test_the_frontend_arrival_rate_the_operator_cannot_see_does_not_change_a_decision() -> None:
    """Only the simulator has `arrival_rate` (vLLM exports no arrival counter): inferscale's decisions
    on a saturated fleet must be the same with it, at any value, as without it."""
    timeline = [(float(t), loaded(4, kv=0.95 if 60 < t < 200 else 0.3, rate=30.0)) for t in range(0, 400, 10)]
    runs = []
    for arrival in (None, 0.0, 30.0, 500.0):
        policy, out = Inferscale(make_ctx()), []
        for t, obs in timeline:
            out.append(policy.decide(replace(obs, at=t, arrival_rate=arrival), t, []))
        runs.append(out)
    assert max(runs[0]) > 4
    assert all(r == runs[0] for r in runs)


def test_the_policy_forecasts_from_the_history_the_operator_keeps_not_the_whole_replay() -> None:
    # seven past days: a 10x spike 4 minutes after this time of day on the five oldest, none on the last two
    day, now = 86400.0, 7 * 86400.0
    history = [
        RateSample(t, 1000.0 if t < 5 * day and 240.0 <= t % day < 600.0 else 100.0) for t in range(0, int(now), 60)
    ]
    policy = Inferscale(make_ctx(time_to_ready=270.0, max_replicas=200))
    policy.decide(
        replace(loaded(10, kv=0.5, rate=100.0), at=now), now, [RateSample(float(s.at), s.value) for s in history]
    )
    assert policy.last_decision is not None
    assert policy.last_decision.forecast_method == "seasonal"
    # the operator holds two days and an hour: the spike of five and more days ago is not in it
    assert policy.last_decision.forecast_rps == pytest.approx(100.0, rel=0.05)
    tail = kept(history, now)
    assert tail[0].at >= now - HISTORY_KEPT > tail[0].at - 60.0 and tail[-1] == history[-1]
    assert list(tail[:2]) == [s for s in history if s.at >= now - HISTORY_KEPT][:2]


def kept(history: list[RateSample], now: float) -> list[RateSample]:
    """What the operator holds of `history` at `now`, by its definition: its last `HISTORY_KEPT` seconds."""
    return history[bisect_left(history, now - HISTORY_KEPT, key=lambda s: s.at) :]


def test_the_kept_history_follows_a_growing_replay_history_tick_by_tick() -> None:
    # what the policy hands the decision each tick is `kept` of the history so far, though it is trimmed in place
    history: list[RateSample] = []
    incremental = KeptHistory()
    trimmed = 0
    for tick in range(0, 3 * 86400, 600):
        now = float(tick)
        history.append(RateSample(now, float(tick % 7)))
        held = incremental.update(history, now)
        assert held == kept(history, now)
        trimmed = max(trimmed, len(history) - len(held))
    assert trimmed > 0  # the replay outgrew what the operator keeps


def test_the_kept_history_starts_over_on_another_history_or_time_going_back() -> None:
    incremental = KeptHistory()
    first = [RateSample(float(t), 1.0) for t in range(0, 200_000, 60)]
    assert incremental.update(first, 200_000.0) == kept(first, 200_000.0)
    other = [RateSample(float(t), 2.0) for t in range(0, 1_000, 60)]
    assert incremental.update(other, 1_000.0) == other
    assert incremental.update(first, 200_000.0) == kept(first, 200_000.0)
    assert incremental.update(first, 100_000.0) == kept(first, 100_000.0)  # an earlier now holds more again


@pytest.mark.parametrize(
    ("seconds", "read"),
    [
        (0.0001, 0.0001),  # the millisecond form, 0s, is no SLO to the spec
        (9223372036.8547, 9223372036.854),  # rounded up, it would pass the spec's longest duration
        (0.25, 0.25),
    ],
)
def test_an_slo_the_spec_takes_reaches_the_policy_whatever_its_millisecond_rounding(
    seconds: float, read: float
) -> None:
    p = Inferscale(make_ctx(slo_ttft=seconds, slo_itl=seconds)).policy
    assert (p.slo_ttft_p95, p.slo_itl_mean) == pytest.approx((read, read))
