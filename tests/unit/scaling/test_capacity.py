"""Online capacity learning: bounded steps, bounds from their side only, bounded distance from the prior."""

from __future__ import annotations

import pytest
from tests.unit.scaling.helpers import observe, policy

from inferscale.scaling import Decision, capacity, decide
from inferscale.scaling.capacity import ALPHA, MAX_CHANGE, PRIOR_SPAN, Evidence, learn
from inferscale.scaling.types import CapacityLow, LastTick, RateSample, Reason, ScalerState

AT, LOWER, UPPER = Evidence.AT_CAPACITY, Evidence.LOWER_BOUND, Evidence.UPPER_BOUND


@pytest.mark.parametrize("kind", list(Evidence))
def test_first_sample_without_prior_is_taken_as_is(kind: Evidence) -> None:
    assert learn(None, None, request_rate=8.0, ready=4, kind=kind) == 2.0


def test_ema_moves_by_alpha_but_at_most_max_step() -> None:
    assert learn(2.0, None, request_rate=8.8, ready=4, kind=AT) == pytest.approx(2.0 + ALPHA * 0.2)
    assert learn(2.0, None, request_rate=80.0, ready=4, kind=AT) == pytest.approx(2.0 * (1 + MAX_CHANGE))
    # Downward, the EMA alone is already within the bound (a sample is never negative).
    assert learn(2.0, None, request_rate=0.4, ready=4, kind=AT) == pytest.approx(2.0 + ALPHA * (0.1 - 2.0))


def test_a_bound_moves_the_estimate_only_from_its_side() -> None:
    # A rate carried within the SLO without a backlog: capacity is at least that much.
    assert learn(2.0, None, request_rate=4.0, ready=4, kind=LOWER) == 2.0
    assert learn(2.0, None, request_rate=8.8, ready=4, kind=LOWER) == pytest.approx(2.0 + ALPHA * 0.2)
    # All the replicas give, with the SLO missed behind a backlog: capacity at the SLO is below it.
    assert learn(2.0, None, request_rate=12.0, ready=4, kind=UPPER) == 2.0
    assert learn(2.0, None, request_rate=4.0, ready=4, kind=UPPER) == pytest.approx(2.0 - ALPHA * 1.0)


def test_estimate_stays_within_a_factor_of_the_prior() -> None:
    estimate = 1.0
    for _ in range(500):
        estimate = learn(estimate, 1.0, request_rate=400.0, ready=4, kind=AT)
    assert estimate == pytest.approx(PRIOR_SPAN)
    for _ in range(500):
        estimate = learn(estimate, 1.0, request_rate=0.04, ready=4, kind=UPPER)
    assert estimate == pytest.approx(1.0 / PRIOR_SPAN)


def test_the_learned_figure_follows_the_prior_through_a_change_of_lengths() -> None:
    # Learned at 0.8x a prior of 10 req/s; requests get twice as long and the prior halves: the
    # estimate is 0.8 x 5, not the 8 req/s learned on short requests.
    state = ScalerState(capacity_rps=8.0, capacity_factor=0.8)
    rate, learned = capacity.estimate(state, 5.0)
    assert rate == pytest.approx(4.0) and learned
    assert capacity.estimate(state, None) == (8.0, True)  # no prior: the rate itself
    assert capacity.estimate(ScalerState(capacity_rps=8.0), 5.0) == (8.0, True)  # learned before factors
    assert capacity.estimate(ScalerState(), 5.0) == (5.0, False)
    assert capacity.estimate(ScalerState(), float("nan")) == (None, False)
    rps, factor = capacity.learned_state(state, 5.0, 4.5)
    assert rps == 4.5 and factor == pytest.approx(0.9)


def test_the_capacity_message_says_where_its_figure_comes_from_and_at_which_lengths() -> None:
    at = (992.0, 52.0)
    assert capacity.origin(ScalerState(), 44.0, at) == "prior at 992-token prompts, 52-token outputs"
    assert capacity.origin(ScalerState(), 44.0, None) == "prior"
    learned = ScalerState(capacity_rps=41.0, capacity_factor=0.93)
    assert capacity.origin(learned, 44.0, (1500.0, 210.0)) == (
        "learned: 0.93 × the prior at 1,500-token prompts, 210-token outputs"
    )
    # learned without a prior to be a factor of: the rate itself, and no lengths stand behind it
    assert capacity.origin(learned, None, at) == "learned"
    assert capacity.origin(ScalerState(capacity_rps=41.0), 44.0, at) == "learned"
    # the decision says it, at the lengths of the policy's prior
    pol = policy(capacity_prior_rps=44.0, capacity_prior_at=at, target_capacity_utilization=0.8)
    d = decide(observe(20, kv=0.5, request_rate=900.0), pol, ScalerState(), 0.0)
    assert "/ 44.00 req/s per replica (prior at 992-token prompts, 52-token outputs) at 80% = 25.57 → 26" in d.message


@pytest.mark.parametrize(
    ("needed", "replicas", "printed"),
    [
        (25.57, 26, "25.57"),
        (26.0, 26, "26.00"),
        (26.004, 27, "26.0040"),  # '26.00 → 27' would read as a rounding error
        (26.0000004, 27, "26.000000"),  # under any printed digit: the most it prints
        (1234.5, 1235, "1,234.50"),
    ],
)
def test_the_quotient_is_printed_with_the_digits_that_decide_its_count(
    needed: float, replicas: int, printed: str
) -> None:
    assert capacity.quotient(needed, replicas) == printed


@pytest.mark.parametrize(
    ("demand", "current", "expected"),
    [
        (54.0, 5, 6),  # needs 5.29: a sixth replica at once, the dead-band does not eat the headroom
        (214.0, 20, 21),  # needs 20.98, within 10% above 20: still one more
        (51.0, 5, 5),  # needs exactly 5
        (193.0, 20, 20),  # needs 18.92, within 10% below 20: hold
        (183.0, 20, 18),  # needs 17.94: scale down
    ],
)
def test_capacity_dead_band_only_holds_a_scale_down(demand: float, current: int, expected: int) -> None:
    # 10.2 req/s per replica at 85%
    rec, _ = capacity.recommend(demand, 12.0, "learned", 180.0, 0.1, current, forecast_rps=demand, utilization=0.85)
    assert rec.replicas == expected


@pytest.mark.parametrize(
    ("forecast", "expected"),
    [
        (50.0, "forecast 50.00 req/s in 180s / 12.00 req/s per replica (learned) at 85% = 4.90 → 5"),
        (40.0, "load now 50.00 req/s (above the forecast 40.00 in 180s) / 12.00 req/s per replica (learned)"),
        (None, "load now 50.00 req/s (no forecast) / 12.00"),
        (49.999, "forecast 50.00 req/s in 180s"),  # not 'above the forecast 50.00'
    ],
)
def test_the_capacity_message_names_the_forecast_only_when_the_demand_is_the_forecast(
    forecast: float | None, expected: str
) -> None:
    rec, _ = capacity.recommend(50.0, 12.0, "learned", 180.0, 0.1, 4, forecast_rps=forecast, utilization=0.85)
    assert rec.message.startswith(expected)


def test_a_lower_capacity_utilization_keeps_standing_headroom() -> None:
    # 12 req/s per replica: 10.2 at 85%, 9.6 at the default 80%, 8.4 at 70%
    at_85, _ = capacity.recommend(61.0, 12.0, "learned", 180.0, 0.1, 4, forecast_rps=61.0, utilization=0.85)
    at_80, _ = capacity.recommend(61.0, 12.0, "learned", 180.0, 0.1, 4, forecast_rps=61.0)
    at_70, _ = capacity.recommend(61.0, 12.0, "learned", 180.0, 0.1, 4, forecast_rps=61.0, utilization=0.7)
    assert (at_85.replicas, at_80.replicas, at_70.replicas) == (6, 7, 8)  # 5.98, 6.35 and 7.26
    assert at_80.message.endswith("(learned) at 80% = 6.35 → 7")
    assert capacity.low_floor(100.0, 8.0, 0.1, 20, 0.7) == 18  # 17.9, where 85% leaves 15


def test_the_low_floor_is_the_need_at_the_lowest_capacity_with_the_dead_band() -> None:
    # 8 req/s per replica is 6.4 at the default 80%
    assert capacity.low_floor(100.0, 8.0, 0.1, 20) == 16  # 15.6
    assert capacity.low_floor(100.0, 8.0, 0.1, 20, 0.85) == 15  # 14.7
    assert capacity.low_floor(117.0, 8.0, 0.1, 20) == 20  # 18.3: within 10% of 20, hold
    assert capacity.low_floor(200.0, 8.0, 0.1, 20) == 20  # 31.3: a floor on a scale-down never adds replicas
    assert capacity.low_floor(1e308, 1e-300, 0.1, 5) == 5  # no overflow to an infinite count


def test_the_capacity_low_keeps_two_buckets_and_changes_only_on_news() -> None:
    low = capacity.remember_low(None, 0.0, 30.0, 150.0)
    assert low == CapacityLow(0.0, 30.0) and capacity.window_low(low) == 30.0
    low = capacity.remember_low(low, 10.0, 25.0, 150.0)
    assert low == CapacityLow(0.0, 25.0)
    assert capacity.remember_low(low, 20.0, 28.0, 150.0) is low  # not lower: no change to write
    low = capacity.remember_low(low, 150.0, 33.0, 150.0)  # a new bucket remembers the last one's low
    assert low == CapacityLow(150.0, 33.0, 25.0) and capacity.window_low(low) == 25.0
    low = capacity.remember_low(low, 300.0, 34.0, 150.0)  # 25 is now older than two buckets
    assert low == CapacityLow(300.0, 34.0, 33.0) and capacity.window_low(low) == 33.0
    # after a gap longer than a bucket the old low is forgotten; a clock going back starts afresh
    assert capacity.remember_low(low, 800.0, 40.0, 150.0) == CapacityLow(800.0, 40.0)
    assert capacity.remember_low(low, 100.0, 40.0, 150.0) == CapacityLow(100.0, 40.0)
    # a zero window keeps no memory
    assert capacity.remember_low(CapacityLow(0.0, 1.0), 10.0, 40.0, 0.0) == CapacityLow(10.0, 40.0)


def test_a_request_rate_that_underflows_per_replica_teaches_nothing() -> None:
    # Found by the property test: 5e-324 req/s over 2 replicas is 0.0 per replica, never a capacity.
    from tests.unit.scaling.helpers import observe, policy

    from inferscale.scaling import ScalerState, decide

    obs = observe(2, kv=0.9, waiting=8.0, request_rate=5e-324, ttft_p95=0.1, itl_mean=0.01)
    assert decide(obs, policy(), ScalerState(), 0.0).state.capacity_rps is None


def test_a_capacity_scale_up_waits_until_two_ticks_in_a_row_ask_for_it() -> None:
    # 4 replicas at 10 req/s each, used to 80%: 32 req/s fit, 40 need 5, 48 need 6. A single tick whose
    # lengths read long (Azure conv) asked for replicas the scale-down window then kept for minutes.
    pol = policy(capacity_prior_rps=10.0, predictive=False, max_replicas=100)

    def tick(st: ScalerState, t: float, rate: float) -> Decision:
        obs = observe(4, kv=0.3, request_rate=rate, ttft_p95=0.1, itl_mean=0.01, at=t, newest_sample_at=t)
        return decide(obs, pol, st, t)

    start = ScalerState(last_tick=LastTick(0.0, 4, -600.0, 0.0))
    first = tick(start, 10.0, 40.0)
    assert first.replicas == 4 and "waits for a second reading → hold 4" in first.message
    # held for its second reading: a scale-up stabilizing (ScalingLimited), not a dead-band (WithinTolerance)
    assert first.reason is Reason.UP_STABILIZING and first.limits == (Reason.UP_STABILIZING,)
    assert first.state.last_tick is not None and first.state.last_tick.capacity_ask == 5
    assert tick(first.state, 20.0, 40.0).replicas == 5  # asked again: the scale-up goes ahead
    assert tick(first.state, 20.0, 48.0).replicas == 5  # the lower of the two asks
    spike_over = tick(first.state, 20.0, 30.0)
    assert spike_over.replicas == 4 and spike_over.state.last_tick is not None
    assert spike_over.state.last_tick.capacity_ask is None  # asked for no more than 4: nothing to confirm
    assert tick(spike_over.state, 30.0, 40.0).replicas == 4
    assert tick(ScalerState(), 10.0, 40.0).replicas == 5  # a new service has no reading to wait for


def test_a_forecast_that_is_the_recent_peak_says_so() -> None:
    rec, _ = capacity.recommend(50.0, 12.0, "learned", 180.0, 0.1, 4, forecast_rps=50.0, peak_window=120.0)
    assert rec.message.startswith("forecast 50.00 req/s in 180s (the last 2m's peak) / 12.00 req/s per replica")
    # the load above it is the load, not the peak
    rec, _ = capacity.recommend(60.0, 12.0, "learned", 180.0, 0.1, 4, forecast_rps=50.0, peak_window=120.0)
    assert "peak" not in rec.message
    # and the decision tells a falling history's floor from a projection
    pol = policy(capacity_prior_rps=10.0, predictive=True)
    fall = [RateSample(60.0 * i, 100.0 - 2.0 * i) for i in range(30)]
    d = decide(observe(8, kv=0.5, request_rate=40.0), pol, ScalerState(), fall[-1].at, fall)
    assert d.forecast_method == "peak" and "(the last 2m's peak)" in d.message


def test_the_printed_rates_give_the_count_they_are_printed_for() -> None:
    # 46.18 / (2.2249 x 80%) is 25.94, 26; printed as 2.22 req/s per replica it would read 26.002, 27
    rec, raw = capacity.recommend(46.18, 2.2249, "prior", 180.0, 0.1, 20, forecast_rps=46.18)
    assert raw == 26 and "46.1800 req/s in 180s / 2.2249 req/s per replica (prior) at 80% = 25.94 → 26" in rec.message
    rec, _ = capacity.recommend(50.0, 12.0, "prior", 180.0, 0.1, 4, forecast_rps=50.0)
    assert "50.00 req/s in 180s / 12.00 req/s" in rec.message  # two decimals where they do
