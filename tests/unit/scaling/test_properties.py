"""Invariants of `decide` under generated inputs (reliability-testing §8 rows 2, 3, 7, 12)."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.scaling.helpers import observe, run_fleet

from inferscale.scaling import (
    MetricsState,
    Observation,
    Policy,
    Release,
    ScalerState,
    ScaleRule,
    TimedReplicas,
    decide,
)

anything = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=500.0),
)
counts = st.integers(min_value=0, max_value=60)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    low = draw(st.integers(min_value=0, max_value=10))
    high = draw(st.integers(min_value=max(low, 1), max_value=40))
    rule = st.builds(
        ScaleRule,
        st.sampled_from([0.0, 60.0, 300.0]),
        st.one_of(st.none(), st.sampled_from([10.0, 50.0, 100.0])),
        st.one_of(st.none(), st.integers(min_value=1, max_value=4)),
        st.sampled_from([15.0, 60.0]),
        st.sampled_from(list(Release)),
    )
    return Policy(
        min_replicas=low,
        max_replicas=high,
        tolerance=draw(st.sampled_from([0.0, 0.1, 0.2])),
        scale_up=draw(rule),
        scale_down=draw(rule),
        capacity_prior_rps=draw(st.one_of(st.none(), st.floats(min_value=0.1, max_value=10.0))),
    )


@st.composite
def observations(draw: st.DrawFn) -> Observation:
    current = draw(counts)
    ready = draw(st.integers(min_value=0, max_value=current))
    return Observation(
        at=0.0,
        current_replicas=current,
        ready_replicas=ready,
        pending_replicas=current - ready,
        pods_reporting=draw(st.integers(min_value=0, max_value=ready)),
        state=draw(st.sampled_from(list(MetricsState))),
        kv_cache_utilization=draw(anything),
        kv_cache_utilization_max=draw(anything),
        waiting=draw(anything),
        running=draw(anything),
        ttft_p95=draw(anything),
        itl_mean=draw(anything),
        request_rate=draw(anything),
        newest_sample_at=draw(st.one_of(st.none(), st.floats(min_value=-1000.0, max_value=0.0))),
    )


@st.composite
def states(draw: st.DrawFn) -> ScalerState:
    recs = draw(st.lists(st.tuples(st.floats(-600.0, 0.0), counts), max_size=10))
    return ScalerState(
        recommendations=tuple(TimedReplicas(t, n) for t, n in sorted(recs)),
        capacity_rps=draw(st.one_of(st.none(), st.floats(min_value=0.01, max_value=50.0))),
    )


@settings(max_examples=400)
@given(observations(), policies(), states())
def test_replicas_are_an_int_within_bounds_whatever_the_input(
    obs: Observation, pol: Policy, state: ScalerState
) -> None:
    d = decide(obs, pol, state, 0.0)
    assert isinstance(d.replicas, int)
    assert pol.min_replicas <= d.replicas <= pol.max_replicas
    for r in d.recommendations:
        assert isinstance(r.replicas, int) and r.replicas >= 0
    assert d.forecast_rps is None or math.isfinite(d.forecast_rps)
    assert d.state.capacity_rps is None or (math.isfinite(d.state.capacity_rps) and d.state.capacity_rps > 0)


@settings(max_examples=300)
@given(observations(), policies(), states(), st.sampled_from([MetricsState.MISSING, MetricsState.STALE]))
def test_no_scale_down_without_fresh_metrics(
    obs: Observation, pol: Policy, state: ScalerState, gate: MetricsState
) -> None:
    held = Observation(**{**obs.__dict__, "state": gate})
    d = decide(held, pol, state, 0.0)
    assert d.replicas >= min(obs.current_replicas, pol.max_replicas)
    assert d.metrics_available is False


@settings(max_examples=300)
@given(observations(), policies(), states())
def test_no_scale_down_when_data_is_older_than_stale_after(obs: Observation, pol: Policy, state: ScalerState) -> None:
    old = Observation(**{**obs.__dict__, "newest_sample_at": -pol.stale_after - 1.0})
    d = decide(old, pol, state, 0.0)
    assert d.replicas >= min(obs.current_replicas, pol.max_replicas)


@settings(max_examples=60)
@given(
    load=st.floats(min_value=0.0, max_value=30.0),
    start=st.integers(min_value=1, max_value=40),
    pol=policies(),
)
def test_constant_load_moves_in_one_direction_only(load: float, start: int, pol: Policy) -> None:
    ticks = run_fleet(pol, lambda t: load, start=start, until=1200.0)
    seq = [start, *(t.replicas for t in ticks)]
    moves = {(b > a) - (b < a) for a, b in itertools.pairwise(seq)} - {0}
    assert len(moves) <= 1, seq


@settings(max_examples=40)
@given(
    load=st.floats(min_value=0.0, max_value=30.0),
    start=st.integers(min_value=1, max_value=40),
    time_to_ready=st.sampled_from([30.0, 180.0, 400.0]),
    pol=policies(),
)
def test_constant_load_with_slow_starting_replicas_moves_in_one_direction_only(
    load: float, start: int, time_to_ready: float, pol: Policy
) -> None:
    ticks = run_fleet(pol, lambda t: load, start=start, until=1500.0, time_to_ready=time_to_ready)
    seq = [start, *(t.replicas for t in ticks)]
    moves = {(b > a) - (b < a) for a, b in itertools.pairwise(seq)} - {0}
    assert len(moves) <= 1, seq


@settings(max_examples=60)
@given(
    high=st.floats(min_value=2.0, max_value=30.0),
    low=st.floats(min_value=0.0, max_value=2.0),
    drop_at=st.sampled_from([100.0, 250.0, 400.0]),
    start=st.integers(min_value=2, max_value=40),
    pol=policies(),
)
def test_scale_down_is_never_faster_than_window_and_rate_limit(
    high: float, low: float, drop_at: float, start: int, pol: Policy
) -> None:
    ticks = run_fleet(pol, lambda t: high if t < drop_at else low, start=start, until=1500.0)
    after = {t.at: t.replicas for t in ticks}
    desired = {t.at: t.decision.state.recommendations[-1].replicas for t in ticks if t.decision.state.recommendations}
    rule = pol.scale_down
    for t in ticks:
        prev = after.get(t.at - 10.0, start)
        if t.replicas >= prev or prev > pol.max_replicas:
            continue
        # Stabilization: nothing recommended within the window (the starting count included) held more:
        # whole (Hold), or falling linearly to this tick's recommendation by the window's end (Linear).
        window = [(s, n) for s, n in desired.items() if t.at - rule.stabilization_window < s <= t.at]
        if t.at - rule.stabilization_window < 0:
            window.append((0.0, start))
        now_desired = desired[t.at]
        for s, n in window:
            held = n
            if rule.release is Release.LINEAR and n > now_desired:
                left = 1 - (t.at - s) / rule.stabilization_window
                held = math.ceil(now_desired + (n - now_desired) * left - 1e-9)
            assert held <= t.replicas, (t.at, s, n, held, t.replicas)
        # Rate limit: counted from the replicas at the start of the period (events strictly inside it count).
        if rule.max_change_percent is not None or rule.max_change_pods is not None:
            base = after.get(t.at - 10.0 * math.ceil(rule.period / 10.0), start)
            allowed = []
            if rule.max_change_percent is not None:
                allowed.append(math.floor(base * (1 - rule.max_change_percent / 100.0) + 1e-9))
            if rule.max_change_pods is not None:
                allowed.append(base - rule.max_change_pods)
            assert t.replicas >= max(min(allowed), pol.min_replicas), (t.at, base, t.replicas)


@settings(max_examples=300)
@given(
    current=st.integers(min_value=1, max_value=40),
    excess=st.floats(min_value=0.01, max_value=3.0),
    tolerance=st.sampled_from([0.0, 0.1, 0.2]),
    high=st.integers(min_value=1, max_value=60),
)
def test_a_signal_beyond_tolerance_scales_up_on_the_first_tick(
    current: int, excess: float, tolerance: float, high: int
) -> None:
    target = 0.25
    kv = min(1.0, target * (1 + tolerance + excess))
    if kv / target - 1 <= tolerance:
        return
    pol = Policy(min_replicas=1, max_replicas=max(high, current), tolerance=tolerance, target_kv_cache=target)
    d = decide(observe(current, kv=kv), pol, ScalerState(), 0.0)
    wanted = math.ceil(current * kv / target - 1e-9)
    limit = max(current + 4, 2 * current)  # default scale-up rule: 100% or 4 pods per 15 s
    assert d.replicas == min(wanted, pol.max_replicas, limit)
