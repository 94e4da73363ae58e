"""Aggregate (fluid) replay of a rate curve, for traces far too long to replay request by request.

A 14-day ServeGen curve scaled to tens of replicas is hundreds of millions of requests; the
request-level engine would need hours. This mode keeps everything the policies see and do (the same
policy objects, decision intervals, time-to-ready draws, scale-down semantics and GPU billing) and
replaces the engines by the perf model's steady state, in steps of one scrape interval:

- each Ready replica serves up to μ_max(I, O) requests/s (the saturated birth-death chain of
  `perf.capacity`, at the window's mean lengths); arrivals beyond that join a fleet backlog;
- at a per-replica rate ρ below μ_max, the replica's batch, mean ITL and TTFT P95 are the chain's
  stationary values at ρ (tabulated once per length pair and interpolated); a backlog adds its
  drain time to TTFT;
- of a step's arrivals, the share within the TTFT target follows from that P95 with an exponential
  tail (P(TTFT > slo) = 0.05^(slo / P95)); none meet it when the mean ITL is above its target;
- the observation is built from the same quantities (running = batch × replicas, waiting = the backlog:
  vLLM's gauge counts what its scheduler left waiting, not the arrivals queued at its input during the
  step in flight, so a fleet below saturation shows none (until 2026-12-05 one step's arrivals were
  added, matching the request-level engine's gauge, which counted them too),
  KV = batch × (I + O/2) / capacity, rates over 1 m, TTFT P95 and mean ITL over the latency histograms'
  2 m (until 2026-12-03 the step's own values, fresher than any operator sees), the arrival rate is the
  curve's); removed replicas stop billing at once (no drain);
- GPU utilization is defined as in the request-level mode, the share of time an engine is stepping
  averaged over 1 m: here the chain's probability that the replica holds a request, 1 − π(0), not the
  batch (which reads 1 from one sequence on and would pin an HPA on it at its max).

`bench` validates this mode against the request-level engine on the short traces and reports the
difference next to the 14-day result.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from inferscale.perf import ReplicaProfile, operating_point
from inferscale.perf.capacity import ReplicaQueue, hard_limit
from inferscale.scaling.histogram import histogram_quantile
from inferscale.scaling.types import MetricsState, Observation, RateSample
from inferscale.sim.decisions import DecisionLog
from inferscale.sim.outage import OutageView
from inferscale.sim.policy import ScalingPolicy
from inferscale.sim.run import RunConfig, RunResult, Timeline
from inferscale.sim.scores import Scores
from inferscale.sim.traces import RatePoint
from inferscale.sim.vllm_buckets import TTFT_BUCKETS

LATENCY_WINDOW = 120.0  # seconds: the latency histograms' rate window (sim.observe, adapters.prometheus)
_GRID = 1.05  # token lengths are rounded up onto a 5 % geometric grid (as the policies' context does)
_POINTS = 64  # rate samples per table, denser near saturation


def _on_grid(tokens: float) -> float:
    return 1.0 if tokens <= 1 else float(_GRID ** math.ceil(math.log(tokens) / math.log(_GRID) - 1e-9))


@dataclass(frozen=True)
class _Table:
    """One replica's steady state against its arrival rate, at fixed mean lengths."""

    mu_max: float  # requests/s at saturation
    rates: list[float]  # plain lists: the step loop reads one point at a time
    batch: list[float]
    itl: list[float]
    ttft_p95: list[float]
    # -ln P(idle): nearly linear in the rate (exactly so for independent requests), so it interpolates on
    # this grid, which is sparse at low rates, where the share of time busy, 1 - P(idle), is curved
    idle_log: list[float]
    tokens_per_seq: float  # mean KV tokens a running sequence holds

    def at(self, rate: float) -> tuple[float, float, float, float]:
        """(batch, itl, ttft_p95, busy) at `rate` requests/s (clamped to just below saturation)."""
        rates = self.rates
        b, it, tt, lg = self.batch, self.itl, self.ttft_p95, self.idle_log
        i = bisect_left(rates, rate)
        if i >= len(rates):
            return b[-1], it[-1], tt[-1], 1.0 - math.exp(-lg[-1])
        if i == 0:
            return b[0], it[0], tt[0], 1.0 - math.exp(-lg[0])
        w = (rate - rates[i - 1]) / (rates[i] - rates[i - 1])
        return (
            b[i - 1] + w * (b[i] - b[i - 1]),
            it[i - 1] + w * (it[i] - it[i - 1]),
            tt[i - 1] + w * (tt[i] - tt[i - 1]),
            1.0 - math.exp(-(lg[i - 1] + w * (lg[i] - lg[i - 1]))),
        )


def _idle_log(queue: ReplicaQueue, rate: float) -> float:
    """-ln π(0) of the replica's chain at `rate` = ln Σ_n π(n)/π(0), with π(n)/π(0) = Π_{k≤n} λ/μ(k),
    geometric beyond c; infinite at saturation (never idle)."""
    r = rate / float(queue.mu[-1])
    if r >= 1:
        return math.inf
    log_w = np.arange(1, queue.servers + 1) * math.log(rate) - queue.log_mu_cum
    top = max(0.0, float(log_w.max()))  # scaled by e^-top: the products overflow near saturation
    rest = float(np.exp(log_w - top).sum()) + math.exp(float(log_w[-1]) - top) * r / (1 - r)
    return top + math.log(math.exp(-top) + rest)


@lru_cache(maxsize=2048)
def _table(profile: ReplicaProfile, input_tokens: float, output_tokens: float) -> _Table:
    peak = operating_point(profile, input_tokens, output_tokens, None, None)
    servers, _ = hard_limit(profile, input_tokens, output_tokens)
    if servers < 1 or not peak.rate_rps > 0:
        # the window's mean request does not fit one replica's KV cache: no replica serves it, as the engine
        # refuses such a request at request level
        return _Table(0.0, [0.0], [0.0], [math.nan], [math.inf], [0.0], input_tokens + output_tokens / 2)
    queue = ReplicaQueue(profile, input_tokens, output_tokens, max(servers, 1))
    fractions = 1.0 - np.geomspace(1.0, 1e-3, _POINTS)  # 0 .. 0.999 of saturation
    rates = fractions * peak.rate_rps
    rates[0] = peak.rate_rps * 1e-6
    states = [queue.at(float(r)) for r in rates]
    return _Table(
        mu_max=peak.rate_rps,
        rates=rates.tolist(),
        batch=[s[0] for s in states],
        itl=[s[1] for s in states],
        ttft_p95=[s[2] for s in states],
        idle_log=[_idle_log(queue, float(r)) for r in rates],
        tokens_per_seq=input_tokens + output_tokens / 2,
    )


def curve_tables(curve: list[RatePoint], profile: ReplicaProfile) -> list[_Table]:
    """The steady-state table of each window. Call it before forking workers: the tables are cached
    per (profile, lengths), so every policy's process inherits them instead of solving again."""
    known = [p for p in curve if p.mean_input is not None and p.mean_output is not None and p.rate > 0]
    weight = sum(p.rate for p in known) or 1.0
    default_in = sum(p.rate * (p.mean_input or 0.0) for p in known) / weight
    default_out = sum(p.rate * (p.mean_output or 0.0) for p in known) / weight
    return [
        _table(profile, _on_grid(p.mean_input or default_in), _on_grid(max(1.0, p.mean_output or default_out)))
        for p in curve
    ]


def run_fluid(
    curve: list[RatePoint], duration: float, policy: ScalingPolicy, profile: ReplicaProfile, cfg: RunConfig
) -> RunResult:
    """Replay `curve` (windows of constant rate and mean lengths) against `policy`."""
    started = time.perf_counter()
    if not curve:
        raise ValueError("empty rate curve")
    window = curve[1].t - curve[0].t if len(curve) > 1 else duration
    known = [p for p in curve if p.mean_input is not None and p.mean_output is not None and p.rate > 0]
    weight = sum(p.rate for p in known) or 1.0
    default_in = sum(p.rate * (p.mean_input or 0.0) for p in known) / weight
    default_out = sum(p.rate * (p.mean_output or 0.0) for p in known) / weight
    tables = curve_tables(curve, profile)
    dt = cfg.scrape_interval
    kv_capacity = profile.kv_capacity_tokens
    rng = random.Random(cfg.seed)
    ready = cfg.initial_replicas
    pending: list[tuple[float, int]] = []  # (ready_at, serial)
    serial = 0
    backlog = 0.0
    gpu_seconds = 0.0
    scale_actions = 0
    minute = _LastMinute(dt)
    latency = _Latency(dt)
    history: list[RateSample] = []
    timeline = Timeline()
    log = DecisionLog(policy)
    view = OutageView(cfg.outage, policy.name, getattr(policy, "reads_pods", False))
    next_decide = cfg.first_decision(policy.interval)
    next_sample = cfg.timeline_step
    next_history = 60.0
    arrived_sample = 0.0
    total = met = 0.0
    p95_weighted: list[tuple[float, float]] = []  # a served step's TTFT P95, its arrivals
    waited: list[tuple[float, float]] = []  # a step nobody served: the wait its arrivals all sat out
    itl_sum = itl_n = refused = 0.0
    steps = math.ceil(duration / dt)
    table = tables[0]  # the window of the last step, once the loop has run: it drains the backlog left
    for k in range(steps):
        t = k * dt
        while pending and pending[0][0] <= t:
            heapq.heappop(pending)
            ready += 1
        idx = min(int((t - curve[0].t) // window), len(curve) - 1)
        point, table = curve[idx], tables[idx]
        step = min(dt, duration - t)
        arrivals = point.rate * step
        serving = ready if table.mu_max > 0 else 0  # a window whose requests fit no replica is served by none
        capacity = serving * table.mu_max * step
        if table.mu_max > 0:
            backlog += arrivals
        else:  # the engine refuses them (`sim.engine`): missed and gone, not a queue the next window inherits
            refused += arrivals
        served = min(backlog, capacity)
        backlog -= served
        per_replica = served / (serving * step) if serving else 0.0
        if serving:
            batch, itl, ttft, busy = table.at(per_replica)
            if backlog > 1e-9:
                ttft += backlog / (serving * table.mu_max)
        else:  # nobody serves: the wait lasts at least until the first pending replica is Ready
            batch, itl, busy = 0.0, math.nan, math.nan
            ttft = (pending[0][0] if pending and table.mu_max > 0 else duration + cfg.grace) - t
        total += arrivals
        if serving and itl <= cfg.slo_itl:
            met += arrivals * (1.0 - _ttft_miss(ttft, cfg.slo_ttft))
        if arrivals > 0:
            (p95_weighted if serving else waited).append((ttft, arrivals))
            if serving:
                itl_sum += itl * arrivals
                itl_n += arrivals
        arrived_sample += arrivals
        gpu_seconds += (ready + len(pending)) * step * profile.gpus
        kv = min(1.0, batch * table.tokens_per_seq / kv_capacity) if serving else math.nan
        now = t + step
        if view.keeps(now):
            if serving:
                latency.add(ttft, itl, arrivals)
            minute.add(served, arrivals, kv, busy)
        else:  # Prometheus stores nothing of this step: the windows after the outage start empty
            latency.clear()
            minute.clear()
        if now >= next_history:
            if (served_rate := minute.rate(minute.served)) is not None:  # None inside an outage: cleared
                history.append(RateSample(now, served_rate))
            next_history += 60.0
        # sampled before this instant's decision: a row's counts are those of the step it closes, as its load is
        if now >= next_sample:
            timeline.at.append(now)
            timeline.load_rps.append(arrived_sample / cfg.timeline_step)
            timeline.provisioned.append(ready + len(pending))
            timeline.ready.append(ready)
            # the 2-m window's, as the request-level timeline records what the operator observes
            timeline.ttft_p95.append(latency.ttft_p95() if view.keeps(now) else None)
            arrived_sample = 0.0
            next_sample += cfg.timeline_step
        # none at the end of the replay: a scale no one pays for is no action (as `run.run_policy`)
        if now >= next_decide and now < duration - 1e-9:
            lengths = (point.mean_input or default_in, point.mean_output or default_out)
            obs = _observation(
                now,
                ready,
                len(pending),
                backlog,
                (batch, latency.itl_mean(), latency.ttft_p95()),
                minute,
                lengths,
            )
            current = ready + len(pending)
            asked = view.replicas(policy.decide, obs, now, history)
            if asked is not None:
                log.after_decide(obs, now)
            want = current if asked is None else max(0, asked)
            if want != current:
                scale_actions += 1
                if want > current:
                    for _ in range(want - current):
                        serial += 1
                        heapq.heappush(pending, (now + cfg.time_to_ready.sample(rng), serial))
                else:
                    ready -= current - want - cancel_newest(pending, current - want)
        if now >= next_decide:
            next_decide += policy.interval
    scores = Scores(
        slo_attainment=met / total if total > 0 else math.nan,
        gpu_hours=gpu_seconds / 3600,
        ttft_p95_s=ttft_quantile(p95_weighted, 0.95, waited),
        ttft_p99_s=ttft_quantile(p95_weighted, 0.99, waited),
        itl_mean_s=itl_sum / itl_n if itl_n > 0 else None,
        scale_actions=scale_actions,
        requests=round(total),
        unfinished=round(_left_after_grace(backlog, ready * table.mu_max, cfg.grace) + refused),
    )
    return RunResult(policy.name, scores, timeline, time.perf_counter() - started, decisions=log.records)


def cancel_newest(pending: list[tuple[float, int]], n: int) -> int:
    """Remove up to `n` of the `pending` replicas (a heap of (ready_at, creation serial)), the most recently created
    first, as a ReplicaSet scales down (pods not Ready go first, then the youngest; `sim.fleet`); returns how many.
    Not the one due last: with a random time-to-ready that keeps the replicas that start fastest, which no
    ReplicaSet knows, and the fluid replay read better than the request-level one on every scale-down."""
    removed = sorted(pending, key=lambda p: p[1])[max(0, len(pending) - n) :]
    for p in removed:
        pending.remove(p)
    heapq.heapify(pending)
    return len(removed)


def _left_after_grace(backlog: float, capacity_rps: float, grace: float) -> float:
    """What the last backlog still holds once the Ready replicas have served it for the grace the request-level
    replay gives requests in flight at the end (`run.py`): only that is unfinished there."""
    return max(0.0, backlog - capacity_rps * grace)


class _Latency:
    """The steps of the latency histograms' window (2 m, as `sim.observe` and the operator's queries read them):
    the TTFT P95 and mean ITL a policy sees lag a load change as they do there, not at the step's own value."""

    def __init__(self, dt: float, window: float = LATENCY_WINDOW) -> None:
        self.steps: deque[tuple[float, float, float]] = deque(maxlen=max(1, round(window / dt)))  # ttft, itl, n

    def add(self, ttft: float, itl: float, arrivals: float) -> None:
        self.steps.append((ttft, itl, arrivals))

    def clear(self) -> None:
        self.steps.clear()

    def _served(self) -> list[tuple[float, float, float]]:
        return [s for s in self.steps if s[2] > 0 and math.isfinite(s[0]) and math.isfinite(s[1])]

    def itl_mean(self) -> float | None:
        steps = self._served()
        total = sum(n for _, _, n in steps)
        return sum(itl * n for _, itl, n in steps) / total if total > 0 else None

    def ttft_p95(self) -> float | None:
        """What `histogram_quantile(0.95, ...)` reads of the window's steps over vLLM's TTFT buckets, each step's
        requests with the exponential tail `_ttft_miss` assumes: between two bounds a P95 reads as Prometheus
        interpolates it (3.0 s as 3.57 s, over a 3.5 s target), as the request-level observer's does."""
        weights = _by_p95((p95, n) for p95, _, n in self._served())
        if not weights:
            return None
        buckets = {le: sum(n * _share_within(le, p95) for p95, n in weights.items()) for le in TTFT_BUCKETS}
        buckets[math.inf] = sum(weights.values())
        return histogram_quantile(0.95, buckets)


class _LastMinute:
    """The steps of the last minute, which the 1-minute queries (rates, max_over_time, GPU utilization) span."""

    def __init__(self, dt: float) -> None:
        n = max(1, round(60.0 / dt))
        self.dt = dt
        self.served: deque[float] = deque(maxlen=n)
        self.arrived: deque[float] = deque(maxlen=n)
        self.kv: deque[float] = deque(maxlen=n)  # NaN while no replica is Ready
        self.busy: deque[float] = deque(maxlen=n)

    def add(self, served: float, arrived: float, kv: float, busy: float) -> None:
        self.served.append(served)
        self.arrived.append(arrived)
        self.kv.append(kv)
        self.busy.append(busy)

    def clear(self) -> None:
        for window in (self.served, self.arrived, self.kv, self.busy):
            window.clear()

    def rate(self, counts: deque[float]) -> float | None:
        """Per second over the steps kept (None after an outage emptied the window)."""
        return sum(counts) / (len(counts) * self.dt) if counts else None

    @staticmethod
    def known(values: deque[float]) -> list[float]:
        return [v for v in values if not math.isnan(v)]


def _observation(
    now: float,
    ready: int,
    pending: int,
    waiting: float,
    state: tuple[float, float | None, float | None],
    minute: _LastMinute,
    lengths: tuple[float, float],
) -> Observation:
    """What the operator's queries would return; rates, peaks and utilization span the last minute of steps, the
    latencies (`state`: batch, mean ITL, TTFT P95) the last two minutes."""
    # The frontend counts arrivals whether or not a replica is Ready to report anything else.
    base = Observation(
        at=now,
        current_replicas=ready + pending,
        ready_replicas=ready,
        pending_replicas=pending,
        arrival_rate=minute.rate(minute.arrived),
    )
    if not ready:
        return base
    batch, itl, ttft = state
    known_kv, busy = minute.known(minute.kv), minute.known(minute.busy)
    rate = minute.rate(minute.served)
    return replace(
        base,
        pods_reporting=ready,
        state=MetricsState.COMPLETE,
        kv_cache_utilization=known_kv[-1] if known_kv else None,
        kv_cache_utilization_max=max(known_kv) if known_kv else None,
        waiting=waiting,
        running=batch * ready,
        ttft_p95=ttft,
        itl_mean=itl,
        request_rate=rate,
        prompt_token_rate=rate * lengths[0] if rate is not None else None,
        generation_token_rate=rate * lengths[1] if rate is not None else None,
        newest_sample_at=now,
        gpu_utilization=sum(busy) / len(busy) if busy else None,
    )


def _share_within(bound: float, p95: float) -> float:
    """Share of a step's requests with a TTFT at or under `bound`, by the tail `_ttft_miss` assumes."""
    return 1.0 - _ttft_miss(p95, bound)


def _ttft_miss(p95: float, slo: float) -> float:
    """Share of requests above `slo` when TTFT has an exponential tail with this P95:
    P(T > x) = exp(-x / θ) with θ = P95 / ln 20, so P(T > slo) = 0.05 ** (slo / P95)."""
    if p95 <= 0:
        return 0.0
    return 1.0 if not math.isfinite(p95) else 0.05 ** (slo / p95)


def _by_p95(steps: Iterable[tuple[float, float]]) -> dict[float, float]:
    """Arrivals per TTFT P95: the steps of one steady load share theirs, and are one term."""
    weights: dict[float, float] = {}
    for p95, arrivals in steps:
        weights[p95] = weights.get(p95, 0.0) + arrivals
    return weights


_VECTORISED = 64  # terms from which numpy's call overhead pays: a 14-day score holds 240,000


def ttft_quantile(
    served: list[tuple[float, float]], q: float, waited: list[tuple[float, float]] | None = None
) -> float:
    """The `q` quantile of the TTFT of every request of some steps: a served step's `(P95, arrivals)` with the
    exponential tail `_ttft_miss` assumes, a step nobody served `(wait, arrivals)` with all its requests at the
    wait. Not the quantile of the steps' P95s: under a steady load that reads P99 = P95, where the tail puts P99
    at ln 100 / ln 20 = 1.54 times it. NaN without a request."""
    weights = _by_p95(served)
    waits = waited or []
    total = sum(weights.values()) + sum(n for _, n in waits)
    if total <= 0:
        return math.nan
    stretch = math.log(1 - q) / math.log(0.05)  # one exponential tail's q quantile, over its P95
    if not waits and len(weights) == 1:
        p95 = next(iter(weights))
        return p95 if q == 0.95 else p95 * stretch
    # a served step's share above x is exp(c * x), c = ln 0.05 / P95: all of it for an infinite P95 (c = 0), none
    # for a zero one
    terms = [(0.0 if math.isinf(p95) else math.log(0.05) / p95, n) for p95, n in weights.items() if p95 > 0]
    if len(terms) >= _VECTORISED:
        c, w = np.array([c for c, _ in terms]), np.array([n for _, n in terms])

        def tails(x: float) -> float:
            return float(np.dot(w, np.exp(c * x)))
    else:

        def tails(x: float) -> float:
            return sum(n * math.exp(c * x) for c, n in terms)

    def above(x: float) -> float:
        return (tails(x) + sum(n for wait, n in waits if wait > x)) / total

    high = max((v for v in (*weights, *(w for w, _ in waits)) if math.isfinite(v)), default=0.0) * max(1.0, stretch)
    if high <= 0:
        return 0.0
    if above(high) > 1 - q:  # only infinite TTFTs reach past it
        return math.inf
    low = 0.0
    for _ in range(32):  # the share above x falls with x: bisect to where it is 1 - q
        mid = (low + high) / 2
        low, high = (mid, high) if above(mid) > 1 - q else (low, mid)
    return high
