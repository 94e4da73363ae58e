"""`decide`: one observation, the policy and the remembered state in; a replica count with its reason out.

Order (DESIGN §4), each step naming itself in `Decision.limits` when it changes the number:

1. metrics gate: missing or stale data holds the current count (bounds and schedule floors still
   apply); nothing is learned and nothing else moves;
2. per-signal recommendations (KV cache, queue, TTFT, ITL, per-request TPOT when its SLO is set,
   capacity forecast, whose scale-up waits until two ticks in a row ask for it unless a backlog shows the
   load is real; see `signals` and `capacity`), each with HPA's tolerance dead-band; their max is
   the desired count (`WithinTolerance` when a dead-band held it). Latency breaches count only on
   loaded replicas (a TPOT breach also on batching ones);
   replicas still starting are supply (`ScaleUpInProgress` when they already cover the need);
3. if the KV or queue metric is missing, no scale-down (HPA: a missing metric never lets the
   others scale down); nor in the first minute the service is watched (`capacity.RATE_WINDOW`: traffic
   that began with the watch is still filling the one-minute rates and the KV cache; those ticks record
   what the signals asked, so the scale-down window runs from the first tick);
4. the desired count is recorded, then stabilized: the most the scale-down window's (the spec's, else
   the time-to-ready plus a minute) recommendations still hold (whole, or released linearly:
   `stabilization`), the lowest in the scale-up window; a fresh state records the current count first,
   so a new operator does not scale down on its first sample;
5. rate limits from the recorded scale events; 6. before any scale-down, the capacity floor (the
   capacity signal's demand at the lowest per-replica capacity of the scale-down window) and the
   consolidation check; 7. min/max and the schedule floor (a raised minimum, not rate limited).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from inferscale.scaling import capacity, guards, signals
from inferscale.scaling.durations import format_duration
from inferscale.scaling.forecast import PEAK_WINDOW, Forecast, forecast
from inferscale.scaling.inputs import clean_observation, validate_policy
from inferscale.scaling.schedule import active_floor
from inferscale.scaling.stabilization import as_points, holding, prune_events, prune_recommendations, stabilize
from inferscale.scaling.types import (
    REQUESTS,
    CapacityLow,
    Decision,
    LastTick,
    MetricsState,
    Observation,
    Policy,
    RateSample,
    Reason,
    Recommendation,
    Release,
    ScaleEvent,
    ScalerState,
    Schedule,
    TimedReplicas,
)

_Note = Callable[[Reason, str, int], None]


def decide(
    obs: Observation, policy: Policy, state: ScalerState, now: float, rate_history: Sequence[RateSample] = ()
) -> Decision:
    """The replica count for one service at `now`. Pure: same inputs, same Decision."""
    if not math.isfinite(now):
        raise ValueError(f"decide needs a finite time, got now={now!r}")
    validate_policy(policy)
    policy = _down_window(policy, state)
    obs = clean_observation(obs)
    horizon = _horizon(policy, state)
    fc = forecast(rate_history, now, horizon) if rate_history else Forecast(None, "none", horizon, None)
    floor = active_floor(policy.schedules, now, _time_to_ready(policy, state))
    low = min(max(policy.min_replicas, floor[0] if floor else 0), policy.max_replicas)
    floor_rec = Recommendation(Reason.SCHEDULE, floor[0], None, None, _floor_message(*floor)) if floor else None
    gate = _gate(obs, policy, now)
    if gate is None:
        recs, remarks, capacity_ask = _signals(obs, policy, state, fc, now)
        if recs:
            return _decide(obs, policy, state, now, fc, low, floor_rec, recs, remarks, capacity_ask)
        gate = (Reason.METRICS_MISSING, "no usable metric")
    return _hold(obs, policy, state, now, fc, low, floor_rec, gate)


def _down_window(policy: Policy, state: ScalerState) -> Policy:
    """The policy with its scale-down window resolved: where the spec left it unset, a time-to-ready plus a
    rate window. A scale-down the load turns out to need back is undone no sooner than a new pod is Ready,
    and its load is seen in the rates a minute after it comes: a shorter window sheds replicas a fast start
    could not return in time, a longer one keeps GPUs a faster start would make spare (measured in
    `docs/where-inferscale-loses.md`)."""
    if not policy.down_window_follows_ttr:
        return policy
    window = _time_to_ready(policy, state) + capacity.RATE_WINDOW
    return replace(policy, scale_down=replace(policy.scale_down, stabilization_window=window))


def _window_text(policy: Policy) -> str:
    window = format_duration(policy.scale_down.stabilization_window)
    return f"{window} (time-to-ready + 1m)" if policy.down_window_follows_ttr else window


def _floor_message(replicas: int, schedule: Schedule, starts_in: float) -> str:
    if starts_in > 0:
        return (
            f"schedule '{schedule.cron}' starts in {format_duration(starts_in)}, within a time-to-ready: "
            f"at least {replicas} replicas"
        )
    return f"schedule '{schedule.cron}' keeps at least {replicas} replicas"


def _horizon(policy: Policy, state: ScalerState) -> float:
    return _time_to_ready(policy, state) if policy.predictive else 0.0


def _due(ordered: float | None, now: float, ttr: float) -> list[str]:
    """When the replicas a hold waits for are due: what an SRE watching a breach asks next. Past the
    time-to-ready, the wait is no longer a cold start (no GPU node, an image pull, a crash loop)."""
    if ordered is None or ordered > now:
        return []
    age, left = format_duration(now - ordered), ordered + ttr - now
    if left > 0:
        return [
            f"the oldest ordered {age} ago, due in about {format_duration(left)} (time-to-ready {format_duration(ttr)})"
        ]
    return [f"the oldest ordered {age} ago, {format_duration(-left)} past the time-to-ready of {format_duration(ttr)}"]


def _time_to_ready(policy: Policy, state: ScalerState) -> float:
    measured = state.time_to_ready
    if measured is not None and math.isfinite(measured) and measured >= 0:
        return measured
    return policy.time_to_ready_prior


def _gate(obs: Observation, policy: Policy, now: float) -> tuple[Reason, str] | None:
    if obs.state is MetricsState.MISSING:
        return Reason.METRICS_MISSING, "metrics missing"
    if obs.state is MetricsState.STALE:
        return Reason.METRICS_STALE, "metrics stale"
    if obs.newest_sample_at is not None and now - obs.newest_sample_at > policy.stale_after:
        age = format_duration(now - obs.newest_sample_at)
        return Reason.METRICS_STALE, f"metrics stale (newest sample {age} old > {format_duration(policy.stale_after)})"
    return None


def _reporting(obs: Observation) -> int:
    if obs.state is MetricsState.COMPLETE:
        return obs.ready_replicas
    return min(obs.pods_reporting, obs.ready_replicas)


def _signals(
    obs: Observation, policy: Policy, state: ScalerState, fc: Forecast, now: float
) -> tuple[list[tuple[Recommendation, int]], list[str], int | None]:
    """Each signal's recommendation with the count it would ask for without the dead-band, remarks on
    signals that chose not to recommend, and the capacity signal's ask above the current count (for the
    next tick to confirm; None without one)."""
    recs: list[tuple[Recommendation, int]] = []
    remarks: list[str] = []
    capacity_ask: int | None = None
    k, ready, current, tol = _reporting(obs), obs.ready_replicas, obs.current_replicas, policy.tolerance
    backlog = signals.delaying(
        obs.waiting, obs.request_rate, policy.slo_ttft_p95, policy.target_waiting_per_replica, ready
    )
    is_loaded = signals.loaded(obs.kv_cache_utilization, policy.target_kv_cache, backlog)
    arriving = _arriving(obs, policy, state, now)
    # a backlog drained within one time-to-ready: replicas ordered now arrive only after that. Its arrivals are the
    # higher of the forecast and the queue's growth on the completions, the figure the capacity signal sizes with
    # behind a backlog: with the forecast alone, "23 drain the backlog" sat beside a capacity need of 28
    need = signals.backlog_need(
        obs.waiting, obs.request_rate, ready, _max_known(fc.rps, arriving), _time_to_ready(policy, state)
    )
    if k >= 1:
        if obs.kv_cache_utilization is not None:
            usage = signals.Usage(obs.kv_cache_utilization * k, k, ready)
            rec, ratio = signals.kv_cache(obs.kv_cache_utilization, usage, policy.target_kv_cache, tol, current)
            recs.append((rec, ratio.raw))
        if obs.waiting is not None:
            usage = signals.Usage(obs.waiting, k, ready)
            drain = signals.queue_delay(obs.waiting, obs.request_rate)
            rec, ratio = signals.queue(
                obs.waiting, usage, policy.target_waiting_per_replica, tol, current, drain, policy.slo_ttft_p95
            )
            capped = signals.behind_pending(rec, current, obs.pending_replicas, need)
            recs.append((capped, ratio.raw if capped is rec else capped.replicas))
    tpot_gate = is_loaded or signals.batching(obs.running, ready)
    idle = signals.load_now(obs.kv_cache_utilization, obs.waiting, None, ready)
    unbatched = signals.load_now(obs.kv_cache_utilization, obs.waiting, obs.running, ready)
    for reason, observed, slo, gate, why in (
        (Reason.SLO_TTFT, obs.ttft_p95, policy.slo_ttft_p95, is_loaded, signals.NOT_LOADED + idle),
        (Reason.SLO_ITL, obs.itl_mean, policy.slo_itl_mean, is_loaded, signals.NOT_LOADED + idle),
        (Reason.SLO_TPOT, obs.tpot_p95, policy.slo_tpot_p95, tpot_gate, signals.NOT_BATCHING + unbatched),
    ):
        if observed is not None and slo is not None:
            latency = signals.slo(reason, observed, slo, ready, current, gate, why)
            if isinstance(latency, Recommendation):
                latency = signals.behind_pending(latency, current, obs.pending_replicas, need)
                recs.append((latency, latency.replicas))
            elif latency is not None:
                remarks.append(latency)
    per_replica, _ = capacity.estimate(state, policy.capacity_prior_rps)
    demand = _max_known(fc.rps, _inflow(obs, policy, state, arriving, backlog))
    if demand is not None and per_replica is not None and per_replica > 0 and math.isfinite(per_replica):
        rec, raw = capacity.recommend(
            demand,
            per_replica,
            capacity.origin(state, policy.capacity_prior_rps, policy.capacity_prior_at),
            fc.horizon,
            tol,
            current,
            forecast_rps=fc.rps,
            utilization=policy.target_capacity_utilization,
            peak_window=PEAK_WINDOW if fc.method == "peak" else None,
        )
        capacity_ask = raw if raw > current else None
        last = state.last_tick
        if last is not None and not backlog:  # a new service has no reading to confirm against
            held = capacity.confirm(rec, current, last.capacity_ask)
            if held is not rec:  # held for its second tick, not by a dead-band: no WithinTolerance
                rec, raw = held, held.replicas
        recs.append((rec, raw))
    elif per_replica is None and policy.capacity_note:
        remarks.append(policy.capacity_note)
    return recs, remarks, capacity_ask


# On a tie the signal named first: the SLO's own, then the queue, the capacity, the KV cache (a 99% gauge
# cannot say how far over it is)
_TOLD_FIRST = {
    Reason.SLO_TTFT: 5,
    Reason.SLO_ITL: 4,
    Reason.SLO_TPOT: 4,
    Reason.QUEUE: 3,
    Reason.CAPACITY: 2,
    Reason.KV_CACHE: 1,
}


def _capacity_low(state: ScalerState, policy: Policy, now: float) -> CapacityLow | None:
    """The capacity low of the scale-down window, this tick's capacity included (None without one)."""
    per_replica, _ = capacity.estimate(state, policy.capacity_prior_rps)
    if per_replica is None or not (per_replica > 0 and math.isfinite(per_replica)):
        return state.capacity_low
    return capacity.remember_low(state.capacity_low, now, per_replica, _low_bucket(policy))


def _low_bucket(policy: Policy) -> float:
    return policy.scale_down.stabilization_window / capacity.LOW_BUCKETS


def _arriving(obs: Observation, policy: Policy, state: ScalerState, now: float) -> float | None:
    """Requests/s arriving: the completions plus the queue's growth since the last tick."""
    last = state.last_tick
    previous = (last.at, last.waiting) if last is not None and last.waiting is not None else None
    return signals.arrival_rate(obs.request_rate, obs.waiting, previous, now, policy.stale_after)


def _inflow(
    obs: Observation, policy: Policy, state: ScalerState, arriving: float | None, backlog: bool
) -> float | None:
    """The request rate the capacity signal must carry now. Behind a queue that costs TTFT it is the
    arrival rate (completions plus the queue's growth since the last tick) plus what drains the queue
    within one time-to-ready: completions alone understate an overload by what piles up, and the
    replicas ordered now must also clear what is waiting."""
    if not backlog or obs.waiting is None:
        return obs.request_rate
    if arriving is None:
        return None
    return arriving + obs.waiting / max(_time_to_ready(policy, state), policy.interval)


def _max_known(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _slo_met(obs: Observation, policy: Policy) -> bool | None:
    pairs = [
        (obs.ttft_p95, policy.slo_ttft_p95),
        (obs.itl_mean, policy.slo_itl_mean),
        (obs.tpot_p95, policy.slo_tpot_p95),
    ]
    known = [(o, s) for o, s in pairs if o is not None and s is not None]
    if not known:
        return None
    return all(o <= s for o, s in known)


def _slo_met_known(obs: Observation, policy: Policy, slo_met: bool | None) -> bool | None:
    """`slo_met` where it is known: a TTFT or ITL objective whose latency is unknown leaves a "met" unknown.
    A tick whose TTFT histogram had nothing (no first token in its window behind a queue) would otherwise
    teach a capacity at the SLO from the ITL alone. TPOT is not asked for: engines before vLLM 0.11 do not
    export it, and the status says so."""
    unknown = (policy.slo_ttft_p95 is not None and obs.ttft_p95 is None) or (
        policy.slo_itl_mean is not None and obs.itl_mean is None
    )
    return None if unknown and slo_met else slo_met


def _bounds(n: int, low: int, policy: Policy, floor_rec: Recommendation | None) -> tuple[int, Reason | None, str]:
    if n > policy.max_replicas:
        return policy.max_replicas, Reason.MAX_REPLICAS, f"max replicas {policy.max_replicas}"
    if n < low:
        if floor_rec is not None and low > policy.min_replicas:
            return low, Reason.SCHEDULE, floor_rec.message
        return low, Reason.MIN_REPLICAS, f"min replicas {low}"
    return n, None, ""


def _hold(
    obs: Observation,
    policy: Policy,
    state: ScalerState,
    now: float,
    fc: Forecast,
    low: int,
    floor_rec: Recommendation | None,
    gate: tuple[Reason, str],
) -> Decision:
    current = obs.current_replicas
    replicas, clamp, clamp_msg = _bounds(current, low, policy, floor_rec)
    reason, what = gate
    message = f"{what}: holding {current} replicas"
    limits: tuple[Reason, ...] = ()
    if clamp is not None:
        reason, limits = clamp, (clamp,)
        message += f"; {clamp_msg} → {replicas}"
    tick = _remember(state, obs, policy, now, blind=True)
    history = _blind_record(state.recommendations, policy, tick, now, replicas)
    return Decision(
        replicas=replicas,
        current=current,
        reason=reason,
        message=message,
        recommendations=(floor_rec,) if floor_rec else (),
        limits=limits,
        metrics_available=False,
        slo_met=None,
        forecast_rps=fc.rps,
        horizon=fc.horizon,
        state=_next_state(
            replace(state, last_tick=tick),
            policy,
            now,
            history,
            replicas,
            current,
            reason,
        ),
        forecast_method=fc.method if fc.rps is not None else None,
    )


def _decide(
    obs: Observation,
    policy: Policy,
    state: ScalerState,
    now: float,
    fc: Forecast,
    low: int,
    floor_rec: Recommendation | None,
    signal_recs: list[tuple[Recommendation, int]],
    remarks: list[str],
    capacity_ask: int | None,
) -> Decision:
    current = obs.current_replicas
    recs = [rec for rec, _ in signal_recs]
    winner = max(recs, key=lambda r: (r.replicas, _TOLD_FIRST.get(r.signal, 0)))
    desired = winner.replicas
    limits: list[Reason] = []
    notes: list[str] = []

    def note(reason: Reason, text: str, n: int) -> None:
        limits.append(reason)
        notes.append(f"{text} → {n}")

    if max(raw for _, raw in signal_recs) != desired and desired == current:
        limits.append(Reason.WITHIN_TOLERANCE)  # the winning signal's message already says so
    if capacity_ask is not None and desired < capacity_ask and any(r.held is Reason.UP_STABILIZING for r in recs):
        # capacity.confirm held a scale-up for its second reading: a limit, not pending replicas covering it
        limits.append(Reason.UP_STABILIZING)
        if winner.signal is not Reason.CAPACITY:
            notes.append("a scale-up on capacity waits for a second reading")
    saturation = [r for r in recs if r.signal in (Reason.KV_CACHE, Reason.QUEUE)]
    unknown = desired < current  # a scale-down held for want of data, below; recorded only if not
    recorded = desired  # what the signals asked: the scale-down window's record unless the tick is blind
    if desired < current and len(saturation) < 2:
        desired = current
        note(Reason.METRICS_MISSING, "no scale-down while the KV cache or queue metric is missing", desired)
    elif desired < current and obs.failed_queries:
        desired = current
        failed = ", ".join(sorted(obs.failed_queries))
        note(Reason.METRICS_MISSING, f"no scale-down while a query failed or answered in part ({failed})", desired)
    elif desired < current and REQUESTS in obs.partial_rates:
        desired = current
        note(Reason.METRICS_MISSING, "no scale-down while busy pods do not report their request rate", desired)
    elif desired < current and obs.state is MetricsState.PARTIAL and 2 * _reporting(obs) < obs.ready_replicas:
        # HPA's rule (a pod without a sample counts at the target on the way down) shrinks a fleet by what its
        # reporting pods leave idle; from a minority, tick after tick, it would walk the fleet down on the word
        # of one idle pod while the silent ones may be full
        desired = current
        k = _reporting(obs)
        note(Reason.METRICS_MISSING, f"no scale-down while only {k} of {obs.ready_replicas} Ready pods report", desired)
    elif desired < current and obs.state is MetricsState.PARTIAL and any(r.signal is Reason.CAPACITY for r in recs):
        # the request rate sums the pods that report: a lower bound, which would size the fleet for part of it
        desired = current
        k = _reporting(obs)
        note(
            Reason.METRICS_MISSING,
            f"no scale-down on the request rate of {k} of {obs.ready_replicas} Ready pods",
            desired,
        )
    elif desired < current and (watched := _watched_for(state, now)) < capacity.RATE_WINDOW:
        # traffic that began with the watch (a new service, a cut-over) fills the one-minute rates and the KV cache
        # over that minute: read early, they size the fleet for part of its load (a demo run shrank its warm 5
        # replicas to 4 twenty seconds in, on a KV cache at 24% and filling, and paid a cold start to come back)
        # not blind: it records what the signals asked, as any tick does (a run of the count held would carry
        # the count found on the first tick through the minute and a whole window after it)
        unknown = False
        desired = current
        note(
            Reason.NEWLY_WATCHED,
            f"no scale-down in the first {format_duration(capacity.RATE_WINDOW)} of watching this service "
            f"({format_duration(watched)} so far): its one-minute rates may not cover its traffic yet",
            desired,
        )
    else:
        unknown = False

    history = state.recommendations or (TimedReplicas(now, current),)
    up, down = policy.scale_up, policy.scale_down
    points = as_points(history, now)
    n = stabilize(desired, current, points, now, up.stabilization_window, down.stabilization_window, down.release)
    if n > desired:
        holder = _holder(desired, n, points, now, policy, unasked=not state.recommendations)
        note(Reason.STABILIZING, f"scale-down stabilizing: {holder}", n)
    elif n < desired:
        window = up.stabilization_window
        lowest = min([desired, *(p.replicas for p in points if p.at > now - window)])
        note(
            Reason.UP_STABILIZING,
            f"scale-up stabilizing: lowest recommendation in the last {format_duration(window)} is {lowest}",
            n,
        )

    if n > current:
        limit = guards.scale_up_limit(up, state.scale_events, current, now)
        if limit is not None and n > limit:
            n = limit
            note(Reason.RATE_LIMITED, f"scale-up limited to {guards.describe_rule(up)}", n)
    elif n < current:
        limit = guards.scale_down_limit(down, state.scale_events, current, now)
        if limit is not None and n < limit:
            n = limit
            note(Reason.RATE_LIMITED, f"scale-down limited to {guards.describe_rule(down)}", n)

    if n < current:
        n = _low_capacity_floor(recs, policy, state, now, n, current, note)
    if n < current:
        n = _consolidate(obs, policy, state, n, current, note)

    n, clamp, clamp_msg = _bounds(n, low, policy, floor_rec)
    if clamp is not None:
        note(clamp, clamp_msg, n)

    if limits:
        reason = limits[-1]
    elif n == current and obs.pending_replicas > 0 and winner.replicas > obs.ready_replicas:
        reason = Reason.SCALE_UP_PENDING
        pending = obs.pending_replicas
        if winner.held is not Reason.SCALE_UP_PENDING:  # the signal said it already
            notes.append(
                f"{pending} pending {'replica already covers' if pending == 1 else 'replicas already cover'} it"
            )
        notes.extend(_due(guards.ordered_at(state.scale_events, pending), now, _time_to_ready(policy, state)))
    else:
        reason = winner.signal
    # every other signal pressing for more than the Ready replicas, the SLO's first: the winner's sentence alone
    # hid a breach behind a KV cache at 99% or a capacity figure (the log, the Event and status.history keep this)
    pressing = sorted(
        (r for r in recs if r is not winner and r.replicas >= current and r.replicas > obs.ready_replicas),
        key=lambda r: -_TOLD_FIRST.get(r.signal, 0),
    )
    also = [f"also {signals.seen(r)} ({signals.asks(r)})" for r in pressing]
    message = "; ".join([winner.message, *notes, *also, *remarks])

    slo_met = _slo_met(obs, policy)
    learned_state = state
    tick = _remember(state, obs, policy, now, blind=unknown, capacity_ask=capacity_ask)
    # without a previous tick (a new service) nothing says the fleet changed: the rate is taken as is
    ready_for = now - tick.ready_since
    backlog_for = now - tick.backlog_since if tick.backlog_since is not None else 0.0
    if state.last_tick is None:
        ready_for = backlog_for = math.inf
    kind = capacity.evidence(obs, policy, _slo_met_known(obs, policy, slo_met), ready_for, backlog_for)
    if kind is not None and obs.request_rate is not None:
        old, learned = capacity.estimate(state, policy.capacity_prior_rps)
        rate = capacity.learn(
            old if learned else None, policy.capacity_prior_rps, obs.request_rate, obs.ready_replicas, kind
        )
        # a subnormal request rate over the replicas underflows to 0; a bound that leaves the prior as it was has
        # taught nothing, and stored it would read "(learned)" from then on for the perf model's own figure
        if rate > 0 and math.isfinite(rate) and (learned or rate != old):
            rps, factor = capacity.learned_state(state, policy.capacity_prior_rps, rate)
            learned_state = replace(state, capacity_rps=rps, capacity_factor=factor)

    all_recs = (*recs, floor_rec) if floor_rec else tuple(recs)
    return Decision(
        replicas=n,
        current=current,
        reason=reason,
        message=message,
        recommendations=all_recs,
        limits=tuple(limits),
        metrics_available=True,
        slo_met=slo_met,
        forecast_rps=fc.rps,
        horizon=fc.horizon,
        state=_next_state(
            replace(learned_state, last_tick=tick, capacity_low=_capacity_low(state, policy, now)),
            policy,
            now,
            _blind_record(history, policy, tick, now, desired) if unknown else (*history, TimedReplicas(now, recorded)),
            n,
            current,
            reason,
        ),
        forecast_method=fc.method if fc.rps is not None else None,
    )


def _watched_for(state: ScalerState, now: float) -> float:
    """Seconds since the scaler first decided for this service; unbounded on that first tick (the scale-down
    window's seed, the count it found, holds that tick), when the state predates the record, or when a clock
    stepped back past it."""
    last = state.last_tick
    if last is None or last.watched_since is None or last.watched_since > now:
        return math.inf
    return now - last.watched_since


def _holder(
    desired: int, n: int, points: Sequence[TimedReplicas], now: float, policy: Policy, unasked: bool = False
) -> str:
    """Which recommendation holds the scale-down at `n`, and how many it holds (more than `n` where `n` is the
    current count: the window never scales up). `unasked`: nothing is recommended yet, and the window holds the
    count the scaler found, which no signal asked for."""
    down, window = policy.scale_down, _window_text(policy)
    found = holding(desired, points, now, down.stabilization_window, down.release)
    if found is None:
        return f"highest recommendation in the last {window} is {n}"
    holds, rec = found
    if down.release is Release.HOLD:
        return f"highest recommendation in the last {window} is {holds}"
    ago = format_duration(now - rec.at) if now > rec.at else "0s"
    held = (
        f"the {rec.replicas} replicas found, nothing recommended before"
        if unasked
        else f"{rec.replicas} recommended {ago} ago"
    )
    return f"{held}, released linearly over {window}, still holds {holds}"


def _low_capacity_floor(
    recs: Sequence[Recommendation], policy: Policy, state: ScalerState, now: float, n: int, current: int, note: _Note
) -> int:
    """Scale down only as far as the lowest capacity of the scale-down window carries the demand.
    The capacity follows the request lengths the engines report, which swing from tick to tick: a
    scale-down sized on a capacity that turns out optimistic costs a cold start to undo, a replica
    kept on a pessimistic one only GPU-minutes. As stabilization takes the window's highest
    recommendation, this takes its lowest capacity; a scale-up still uses today's."""
    rec = next((r for r in recs if r.signal is Reason.CAPACITY), None)
    low = _capacity_low(state, policy, now)
    if rec is None or rec.value is None or rec.target is None or low is None:
        return n
    low_rps = capacity.window_low(low)
    if not 0 < low_rps < rec.target:
        return n
    floor = capacity.low_floor(rec.value, low_rps, policy.tolerance, current, policy.target_capacity_utilization)
    if floor <= n:
        return n
    need = capacity.needed(rec.value, low_rps, policy.target_capacity_utilization)
    # the dead-band keeps `current` where the need is within tolerance of it: say so, not that it needs them all
    band = (
        f", within {policy.tolerance:.0%} of {current}"
        if need < floor
        else f", more than the {current} there are: no scale-down"
        if need > floor
        else ""
    )
    note(
        Reason.CONSOLIDATION_REFUSED,
        f"consolidation refused: {rec.value:.2f} req/s at the lowest capacity of the last "
        f"{format_duration(capacity.low_span(low, now, _low_bucket(policy)))} ({low_rps:.2f} req/s per replica) "
        f"needs {need}{band}",
        floor,
    )
    return floor


def _consolidate(obs: Observation, policy: Policy, state: ScalerState, n: int, current: int, note: _Note) -> int:
    """Scale down only as far as the replicas left carry today's load within every target."""
    k, ready = _reporting(obs), obs.ready_replicas
    kv_total = None
    if obs.kv_cache_utilization is not None and k >= 1:
        kv_total = obs.kv_cache_utilization * k + (ready - k) * policy.target_kv_cache
    waiting = None
    if obs.waiting is not None and k >= 1:
        waiting = obs.waiting + (ready - k) * policy.target_waiting_per_replica
    per_replica, _ = capacity.estimate(state, policy.capacity_prior_rps)
    load = guards.Load(kv_total, obs.kv_cache_utilization_max, waiting, obs.request_rate, per_replica)
    needed = guards.consolidation_floor(load, policy.target_kv_cache, policy.target_waiting_per_replica, current)
    if needed is None or needed[0] <= n:
        return n
    floor = min(needed[0], current)
    note(Reason.CONSOLIDATION_REFUSED, f"consolidation refused: {needed[1]}", floor)
    return floor


def _next_state(
    state: ScalerState,
    policy: Policy,
    now: float,
    history: Sequence[TimedReplicas],
    replicas: int,
    current: int,
    reason: Reason,
) -> ScalerState:
    window = max(policy.scale_up.stabilization_window, policy.scale_down.stabilization_window)
    events = state.scale_events
    if replicas != current:
        events = (*events, ScaleEvent(now, current, replicas, reason.value))
    period = max(policy.scale_up.period, policy.scale_down.period)
    return ScalerState(
        recommendations=prune_recommendations(history, now, window),
        scale_events=prune_events(events, now, period),
        time_to_ready=state.time_to_ready,
        capacity_rps=state.capacity_rps,
        capacity_factor=state.capacity_factor,
        last_tick=state.last_tick,
        capacity_low=state.capacity_low,
    )


def _blind_record(
    runs: Sequence[TimedReplicas], policy: Policy, tick: LastTick, now: float, replicas: int
) -> Sequence[TimedReplicas]:
    """The scale-down window's record after a tick that holds for want of data. A blip (data back within
    `stale_after`: one failed query, a scrape missed) records nothing, as HPA records nothing on a tick it
    cannot compute: recorded as the current count, one missed scrape restarted a window about to end, and one
    every few minutes stopped scale-downs altogether. Longer, it is an outage, and each of its ticks records the
    count it holds: the first windows after it read a few scrapes only (no rate at the first, histograms of
    seconds), and a scale-down waits one window of them (on the synthetic trace's outage that kept 1.2 points of
    attainment)."""
    if tick.blind_since is None or now - tick.blind_since < policy.stale_after:
        return runs
    return (*runs, TimedReplicas(now, replicas))


def _remember(
    state: ScalerState,
    obs: Observation,
    policy: Policy,
    now: float,
    blind: bool = False,
    capacity_ask: int | None = None,
) -> LastTick:
    """This tick for the next one: since when the ready count and the backlog have been what they are."""
    last = state.last_tick
    same = last is not None and last.ready == obs.ready_replicas and last.ready_since <= now
    ready_since = last.ready_since if last is not None and same else now
    backlog_since = None
    if capacity.backlogged(obs, policy):
        backlog_since = now
        if last is not None and last.backlog_since is not None and last.backlog_since <= now:
            backlog_since = last.backlog_since
    blind_since = (last.blind_since if last is not None and last.blind_since is not None else now) if blind else None
    watched_since = last.watched_since if last is not None else now
    return LastTick(
        now, obs.ready_replicas, ready_since, obs.waiting, backlog_since, blind_since, capacity_ask, watched_since
    )
