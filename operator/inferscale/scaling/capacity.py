"""Capacity: forecast demand over per-replica capacity, and learning that capacity online.

Planning headroom: the fleet is sized so that the forecast rate uses the policy's target capacity
utilization (`spec.targets.capacityUtilization`, by default `DEFAULT_UTILIZATION`, 80%) of the replicas'
capacity at the SLO. Capacity at the SLO is the rate a replica sustains right at the edge; bursts
inside a scrape interval and an imperfect router need 15% (`HEADROOM`, what the benchmark's oracle and
static peak size with, and WVA too). inferscale plans with 5 points more because its demand is a
forecast and its per-replica capacity follows lengths it reads a minute late (the benchmark's m-small
slice, where lengths change within a cold start: 98.94% at 85%, 99.94% at 80%; the GPU-hours this costs
on Azure's bursts are paid back by the scale-down window's linear release, `stabilization`). Traffic
that jumps by more than that within a time-to-ready needs a lower target still: standing headroom, at
its cost.

Learning (`learn`), from the per-replica completion rate of three kinds of tick (`Evidence`):

- SLO met with a backlog that costs TTFT (`backlogged`): the replicas give all they have at the
  SLO, the rate is the capacity; the estimate moves toward it either way.
- SLO met with the KV cache near its target and no backlog: the replicas carried this rate within
  the SLO, a lower bound; it can only raise the estimate. It is not extrapolated to the KV target:
  near compute saturation concurrency (and KV) grows much faster than the rate, so a linear
  extrapolation overestimates (on the 14-day m-mid replay it took the estimate from the prior's
  69 req/s to 87 while replicas saturated at 69, and the fleet collapsed into a backlog every time
  it scaled down to the estimate).
- SLO breached behind a backlog the fleet cannot clear within the SLO: the replicas give all they
  have and still miss it, so capacity at the SLO is below the rate; it can only lower the estimate.

The learned figure is kept both as a rate and as a factor on the prior at the lengths of the tick it
was learned on; with a prior, sizing uses prior x factor, so the prior's change with request lengths
flows through (ServeGen's mean input moves 3x within a day: an absolute rate learned on short
requests over-sized, one learned on long ones under-sized).

Idle periods are ignored: they would teach that a replica can only carry the little it was given.
So are ticks whose one-minute rate was earned by another fleet (`RATE_WINDOW`): within a minute of a
change of the ready count, or of the start of a backlog, rate / ready mixes two fleets or an idle
stretch with a saturated one.
The estimate moves by a bounded EMA (`ALPHA`, at most `MAX_CHANGE` per tick) and, when a prior
exists, stays within a factor `PRIOR_SPAN` of it.

Scale-downs are sized with the lowest capacity of the scale-down window (`remember_low`, `low_floor`):
the prior follows the request lengths of each tick's one-minute rates, which swing (Azure conv: 24 to
52 req/s per replica within minutes). Stabilization pairs each past recommendation with its own tick's
capacity, so on a rising demand a dip in capacity a few minutes ago no longer shows; a scale-down
acted on an optimistic capacity costs a cold start to undo (on the Azure replay, 24 -> 22 replicas
at the start of a ramp left the fleet 4 short of the oracle for the next time-to-ready), a replica
kept on a pessimistic one only GPU-minutes. Scale-ups keep today's capacity, but wait for a second
tick that asks for them (`confirm`): a 10-s delay, where one tick's low reading held replicas for the
scale-down window. Smoothing the prior instead (an EMA) also raises the capacity used on the way up, and
cost attainment (97.5-97.8%).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from inferscale.scaling import signals
from inferscale.scaling.durations import format_duration
from inferscale.scaling.signals import MAX_COUNT, ceil_count
from inferscale.scaling.types import (
    REQUESTS,
    CapacityLow,
    MetricsState,
    Observation,
    Policy,
    Reason,
    Recommendation,
    ScalerState,
)

HEADROOM = 0.85  # the in-minute burst allowance the references (oracle, static peak) size with
DEFAULT_UTILIZATION = 0.8  # inferscale's default target: HEADROOM and a margin for forecast error
ALPHA = 0.1
MAX_CHANGE = 0.1  # fraction of the current estimate per update
PRIOR_SPAN = 4.0
# Seconds the operator's request rate is averaged over (increase(...[1m])): a tick teaches capacity
# only when the ready count has not changed for that long, else rate / ready divides a minute's
# completions on fewer replicas by the replicas Ready now (on the 14-day m-mid replay, ticks right
# after a scale-up's pods turned Ready taught a factor of 0.41 of the true capacity, and the fleet
# ran at 1.8x the oracle's GPU-hours).
RATE_WINDOW = 60.0
# The capacity low behind a scale-down is kept in two buckets of this fraction of the scale-down
# window (`remember_low`), so it covers the last half window to the last whole one.
LOW_BUCKETS = 2


def origin(state: ScalerState, prior: float | None, at: tuple[float, float] | None) -> str:
    """Where `estimate`'s capacity comes from, as the capacity message says it. The perf model's prior follows
    the request lengths the engines report (`at`: the mean prompt and output tokens it was computed at), so a
    capacity that falls by a third within minutes reads as the longer requests it is, not as a rule that changed
    its mind (the m-mid slice: 65 -> 44 req/s per replica when the mean prompt went from 661 to 992 tokens)."""
    lengths = f" at {at[0]:,.0f}-token prompts, {at[1]:,.0f}-token outputs" if at is not None else ""
    _, basis = _sized(state, prior)
    if basis == "factor":
        return f"learned: {state.capacity_factor:.2f} × the prior{lengths}"
    return "learned" if basis == "rate" else f"prior{lengths}"


def recommend(
    demand_rps: float,
    capacity_rps: float,
    origin: str,
    horizon: float,
    tolerance: float,
    current: int,
    *,
    forecast_rps: float | None,
    utilization: float = DEFAULT_UTILIZATION,
    peak_window: float | None = None,
) -> tuple[Recommendation, int]:
    """The recommendation, and the count it would ask for without the dead-band. `demand_rps` is the
    larger of `forecast_rps` and the load now; the message says which it was, so that it agrees with the
    forecast the status reports. `utilization`: the share of `capacity_rps` the demand may use. `peak_window`: the
    seconds whose peak the forecast is, when it is that floor and not a projection."""
    needed = _needed(demand_rps, capacity_rps, utilization)
    replicas, held = _need(demand_rps, capacity_rps, tolerance, current, utilization)
    when = f"in {horizon:.0f}s" if horizon > 0 else "now"
    k = _digits(demand_rps, capacity_rps, utilization, replicas)
    # compared as printed, so that the message never reads 'above the forecast' of the same figure
    if forecast_rps is not None and round(demand_rps, k) <= round(forecast_rps, k):
        floor = f" (the last {format_duration(peak_window)}'s peak)" if peak_window is not None else ""
        demand = f"forecast {demand_rps:.{k}f} req/s {when}{floor}"
    elif forecast_rps is not None:
        demand = f"load now {demand_rps:.{k}f} req/s (above the forecast {forecast_rps:.{k}f} {when})"
    else:
        demand = f"load now {demand_rps:.{k}f} req/s (no forecast)"
    outcome = f", within {tolerance:.0%} tolerance → hold {current}" if held else f" → {replicas}"
    message = (
        f"{demand} / {capacity_rps:.{k}f} req/s per replica ({origin}) at {utilization:.0%} = "
        f"{quotient(needed, replicas)}{outcome}"
    )
    return Recommendation(Reason.CAPACITY, current if held else replicas, demand_rps, capacity_rps, message), replicas


def _digits(demand_rps: float, capacity_rps: float, utilization: float, replicas: int) -> int:
    """The decimals the rates are printed with: 2, or as many as it takes for the printed rates to give the count
    (Mooncake: 46.18 / (2.22 x 80%) is 26.002, 27 replicas, where the rates themselves give 25.96, 26)."""

    def gives(k: int) -> bool:
        printed = round(capacity_rps, k) * utilization
        return printed > 0 and ceil_count(round(demand_rps, k) / printed) == replicas

    return _fewest_digits(gives)


def quotient(needed: float, replicas: int) -> str:
    """`needed` as the message prints it: the rounded figures before it cannot tell 26.0 (26 replicas) from
    26.01 (27), so the quotient is printed, with the digits that show which side of a whole count it is on."""
    return f"{needed:,.{_fewest_digits(lambda k: ceil_count(round(needed, k)) == replicas)}f}"


def _fewest_digits(gives: Callable[[int], bool]) -> int:
    """The fewest decimals of 2, 4 and 6 at which the printed figures `gives` the count; 6 where none does."""
    return next((k for k in (2, 4) if gives(k)), 6)


def confirm(rec: Recommendation, current: int, before: int | None) -> Recommendation:
    """A capacity scale-up at the lower of this tick's count and the tick before's (`before`: None when it
    asked for no more than its count). The capacity follows the request lengths of each tick's one-minute
    rates, and a single tick that reads long requests (Azure conv: 20.9 req/s per replica between readings of
    24.4 and 22.1 ten seconds apart) ordered replicas that the scale-down window then kept for minutes: two
    ticks in a row must ask for them. Not behind a backlog (the caller's), where the load is real."""
    n = max(current, min(rec.replicas, before if before is not None else current))
    if n >= rec.replicas:  # no scale-up, or the tick before asked for as many
        return rec
    asked = f"the tick before asked {before}" if before is not None else "the tick before asked for no more"
    outcome = f"hold {current}" if n == current else f"{n}"
    message = f"{rec.message}; {asked}: a scale-up on capacity waits for a second reading → {outcome}"
    return replace(rec, replicas=n, message=message, held=Reason.UP_STABILIZING)


def _need(
    demand_rps: float, capacity_rps: float, tolerance: float, current: int, utilization: float
) -> tuple[int, bool]:
    """The count `demand_rps` needs at `capacity_rps` per replica used to `utilization`, and whether the
    dead-band holds `current` instead of a scale-down to it."""
    needed = _needed(demand_rps, capacity_rps, utilization)
    replicas = ceil_count(needed)
    return replicas, current > 0 and replicas < current and needed / current >= 1.0 - tolerance


def _needed(demand_rps: float, capacity_rps: float, utilization: float) -> float:
    # min: a demand near the float maximum over a small capacity overflows to inf, which has no count
    return min(demand_rps / (capacity_rps * utilization), MAX_COUNT)


def needed(demand_rps: float, capacity_rps: float, utilization: float = DEFAULT_UTILIZATION) -> int:
    """The count `demand_rps` needs at `capacity_rps` per replica used to `utilization`, no dead-band."""
    return ceil_count(_needed(demand_rps, capacity_rps, utilization))


def low_floor(
    demand_rps: float, low_rps: float, tolerance: float, current: int, utilization: float = DEFAULT_UTILIZATION
) -> int:
    """The fewest replicas a scale-down may leave (never more than `current`): what `demand_rps` needs
    at `low_rps` per replica used to `utilization`, with the capacity signal's dead-band."""
    replicas, held = _need(demand_rps, low_rps, tolerance, current, utilization)
    return current if held else min(replicas, current)


def remember_low(low: CapacityLow | None, now: float, capacity_rps: float, bucket: float) -> CapacityLow:
    """The capacity low after this tick's `capacity_rps`, in buckets of `bucket` seconds: the lowest
    since the current bucket began and the lowest of the bucket just before, so min(low, before)
    covers between one and two buckets of the past. Two buckets of half the scale-down window hold
    it for that window's length at most; the state changes when a bucket begins or a lower value
    arrives, not every tick."""
    # a clock stepped back by less than a bucket stays in the bucket (dropped, the low would let the scale-down
    # it guards size the fleet at today's capacity); a bucket dated further ahead is a broken clock's, not kept
    age = now - low.since if low is not None else math.inf
    if low is None or not -bucket <= age < bucket:
        before = low.low if low is not None and -bucket <= age < 2 * bucket else None
        return CapacityLow(now, capacity_rps, before)
    if capacity_rps < low.low:
        return CapacityLow(low.since, capacity_rps, low.before)
    return low


def window_low(low: CapacityLow) -> float:
    return low.low if low.before is None else min(low.low, low.before)


def low_span(low: CapacityLow, now: float, bucket: float) -> float:
    """Seconds of the past `window_low` covers at least: its bucket so far, and a whole bucket before it when it
    keeps one. Between half the scale-down window and the whole of it, so the message says which, not the
    window: a low over the exact window kept 1.1% more GPU-hours on the Azure replay for 0.01 point
    (`where-inferscale-loses.md`, 2026-12-07 10:30)."""
    return max(0.0, now - low.since) + (bucket if low.before is not None else 0.0)


def _usable(prior: float | None) -> float | None:
    return prior if prior is not None and prior > 0 and math.isfinite(prior) else None


def estimate(state: ScalerState, prior: float | None) -> tuple[float | None, bool]:
    """The per-replica capacity to size with, and whether it is learned (see the module docstring)."""
    rps, basis = _sized(state, prior)
    return rps, basis != "prior"


def _sized(state: ScalerState, prior: float | None) -> tuple[float | None, Literal["factor", "rate", "prior"]]:
    """`estimate`'s capacity and what it is: the learned factor on a usable prior, the learned rate, the prior."""
    usable = _usable(prior)
    if usable is not None and state.capacity_factor is not None:
        return usable * state.capacity_factor, "factor"
    if state.capacity_rps is not None:
        return state.capacity_rps, "rate"
    return usable, "prior"


def learned_state(state: ScalerState, prior: float | None, rate: float) -> tuple[float, float | None]:
    """The (capacity_rps, capacity_factor) pair to remember after learning `rate`."""
    prior = _usable(prior)
    return rate, (rate / prior if prior is not None else state.capacity_factor)


class Evidence(enum.Enum):
    AT_CAPACITY = "at capacity"  # the rate is the capacity: move toward it
    LOWER_BOUND = "lower bound"  # capacity is at least the rate
    UPPER_BOUND = "upper bound"  # capacity at the SLO is below the rate


def backlogged(obs: Observation, policy: Policy) -> bool:
    """A backlog at the policy's own queue set-point. A waiting request or two per replica is not one:
    at hundreds of short requests per second, requests that arrive during a step wait for the next
    one, so vLLM reports a few waiting far below capacity (a replay of short-prompt traffic learned a
    quarter of the true capacity from those)."""
    ready = obs.ready_replicas
    delay = signals.queue_delay(obs.waiting, obs.request_rate)
    at_set_point = signals.queued(obs.waiting, policy.target_waiting_per_replica, ready)
    if delay is None or policy.slo_ttft_p95 is None:
        return at_set_point
    return at_set_point and delay >= signals.LOADED_DELAY_SLO_FRACTION * policy.slo_ttft_p95


def saturated(obs: Observation, policy: Policy) -> bool:
    """Replicas near what they can give: the only periods whose request rate says something about
    capacity (KV cache near its target, or a real backlog)."""
    return signals.loaded(obs.kv_cache_utilization, policy.target_kv_cache, backlogged(obs, policy))


def evidence(
    obs: Observation, policy: Policy, slo_met: bool | None, ready_for: float = math.inf, backlog_for: float = math.inf
) -> Evidence | None:
    """What this tick says about capacity at the SLO, or None when it says nothing. `ready_for` and
    `backlog_for`: seconds the ready count and the backlog have lasted; a rate over `RATE_WINDOW`
    says what the replicas give only when both held over all of it (an idle replica hit by a surge
    completed, over the last minute, a fraction of what it completes now)."""
    if obs.state is not MetricsState.COMPLETE or not obs.request_rate or obs.ready_replicas < 1:
        return None  # partial data, or a queue with nothing finishing (stuck, not a capacity figure)
    if REQUESTS in obs.partial_rates:
        return None  # the rate of some of the replicas, not of all of them
    if obs.failed_queries:
        return None  # a family unknown or answered in part (a Thanos store down): the SLO read may miss pods
    if ready_for < RATE_WINDOW:
        return None  # the rate still counts completions of a fleet of another size
    backlog = backlogged(obs, policy)
    if backlog and backlog_for < RATE_WINDOW:
        return None
    if slo_met:
        if backlog:
            return Evidence.AT_CAPACITY
        if saturated(obs, policy):
            return Evidence.LOWER_BOUND
        return None
    delay = signals.queue_delay(obs.waiting, obs.request_rate)
    slo = policy.slo_ttft_p95
    if slo_met is False and delay is not None and slo is not None and backlog:
        return Evidence.UPPER_BOUND if delay > signals.BURST_DRAIN_SLO_FRACTION * slo else None
    return None


def learn(estimate: float | None, prior: float | None, request_rate: float, ready: int, kind: Evidence) -> float:
    """The next capacity estimate after one informative observation (see `evidence`)."""
    sample = request_rate / ready
    old = estimate if estimate is not None else prior
    if old is None:
        return sample
    if (kind is Evidence.LOWER_BOUND and sample <= old) or (kind is Evidence.UPPER_BOUND and sample >= old):
        return old  # a bound on the right side of the estimate says nothing new
    step = min(max(ALPHA * (sample - old), -MAX_CHANGE * old), MAX_CHANGE * old)
    new = old + step
    if prior is not None:
        new = min(max(new, prior / PRIOR_SPAN), prior * PRIOR_SPAN)
    return new
