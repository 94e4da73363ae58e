"""Per-signal recommendations: each turns one observed quantity into a replica count with a reason.

The saturation signals (KV cache, queue) follow the HPA replica calculator: desired =
ceil(ready x observed/target), a dead-band of `tolerance` around the target that holds the current
count, and HPA's rule for partial data (pods that did not report count as 0% of target when the
reporting pods ask for more, as 100% when they ask for less; a direction flip holds). The count
they ask for is the total needed to carry today's load, so pods still starting (in `current`)
are supply on the way: no replicas are added for load they will cover, and none are removed while
the ready ones are over target. The queue signal is capped at `MAX_STEP` x the ready replicas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from inferscale.scaling.types import Reason, Recommendation

# An overload signal (latency above its SLO, a queue) at most doubles the READY replicas per tick.
# Neither is linear in replicas: a queue is a backlog, not a rate, and drains fast once capacity
# arrives; replicas already starting count against the doubling, so they absorb it instead of
# more being added on top (in a bursty Azure replay, an unbounded queue signal went 5 -> 12 -> 18
# while 7 replicas were still starting).
MAX_STEP = 2.0
CAPPED = f"at most {MAX_STEP:g}x the ready replicas per tick"
# "Loaded": the mean KV cache at least this fraction of its target, or a backlog. Only a loaded
# fleet teaches capacity, and only on a loaded fleet does a latency breach ask for replicas: on an
# idle one it is the prefill of long prompts or the network, which more replicas would not lower
# (in a long-prompt replay, an ungated TTFT signal took 14 replicas at 6% KV to the max of 48, TTFT
# unchanged at 880 ms).
LOADED_KV_FRACTION = 0.75
# For a latency breach, a backlog is a queue that adds at least this fraction of the TTFT SLO to
# every arrival (Little's law: waiting / completion rate), whatever the request size: 16 waiting
# is 0.02 s of work at 800 short requests/s (with a one-per-replica gate, the 2-minute TTFT P95 of a
# burst already drained took a short-request replay from 6 to 15 replicas) but 0.5 s at 30
# long-prompt requests/s.
LOADED_DELAY_SLO_FRACTION = 0.25
# A backlog that the fleet clears within this fraction of the TTFT SLO is a burst, not a shortage:
# replicas ordered now arrive minutes after it drained. On request-level ServeGen replays, single
# scrapes of 50-130 waiting at 330-600 req/s (0.15-0.26 s of work) each doubled the fleet for the
# time-to-ready plus the scale-down window (measured before 2026-12-05, when the simulated gauge also
# counted the arrivals of the step in flight, which vLLM's does not).
BURST_DRAIN_SLO_FRACTION = 1.0
# A per-request TPOT breach asks for replicas once the replicas batch, KV load or not: short answers
# decoded in the same steps as a neighbour's long prefill stream slowly at low KV usage, and fewer
# neighbours per replica is the cure (synthetic_trace replay: 51% of requests over a 50 ms TPOT at
# 10-25% KV, the fleet's mean ITL 38 ms). A request alone on its replica is as fast as the GPU allows.
BATCHING_PER_REPLICA = 2.0
MAX_COUNT = 1e15  # replicas: beyond any fleet; max_replicas clamps it later
EPSILON = 1e-9  # float noise must not add a replica: 2 x 0.4 / 0.8 is 1.0000000000000002


def ceil_count(x: float) -> int:
    # capped: a ratio over a tiny target (kvCacheUtilization 1e-310, a valid fraction) is infinite, which
    # math.ceil refuses with an OverflowError that stopped the service's every tick
    return max(0, math.ceil(min(x, MAX_COUNT) - EPSILON))


@dataclass(frozen=True)
class Usage:
    """A per-pod quantity summed over the pods that reported it."""

    total: float
    reporting: int  # pods with a sample, <= ready
    ready: int


@dataclass(frozen=True)
class Ratio:
    replicas: int  # after the dead-band
    raw: int  # without the dead-band
    ratio: float  # observed / target, after filling in missing pods and the cap
    held: bool  # the dead-band or a direction flip held the current count
    capped: bool = False  # the ratio was cut to `max_ratio`
    covered: bool = False  # over target, but replicas already starting cover it
    flipped: bool = False  # held because the pods not reporting, filled in, turn the direction around


def hpa_ratio(usage: Usage, target: float, tolerance: float, current: int, max_ratio: float = math.inf) -> Ratio:
    """HPA's replica calculator for one per-pod metric (see the module docstring), the ratio
    capped at `max_ratio`."""
    k, n = usage.reporting, usage.ready
    ratio = usage.total / (k * target)
    if k < n:
        up = ratio > 1.0
        filled = usage.total / (n * target) if up else (usage.total + (n - k) * target) / (n * target)
        if up != (filled > 1.0) and filled != 1.0:
            return Ratio(current, current, filled, True, flipped=True)
        ratio = filled
    capped = ratio > max_ratio
    ratio = min(ratio, max_ratio)
    raw = ceil_count(ratio * n)
    if abs(ratio - 1.0) <= tolerance:
        return Ratio(current, raw, ratio, True)
    if ratio > 1.0 and raw <= current:
        # HPA counts not-ready pods as 0% on a scale-up; when that flips the direction it holds.
        # Overloaded ready replicas never ask to remove the ones still starting.
        return Ratio(current, current, ratio, False, capped, covered=True)
    return Ratio(raw, raw, ratio, False, capped)


def _held(r: Ratio) -> Reason | None:
    return Reason.SCALE_UP_PENDING if r.covered else None


def _capped(r: Ratio) -> bool:
    """The cap set the count it asks for: not where a dead-band, a flip or the replicas starting held it."""
    return r.capped and not (r.flipped or r.held or r.covered)


def _coverage(usage: Usage) -> str:
    return "" if usage.reporting >= usage.ready else f" ({usage.reporting} of {usage.ready} reporting)"


def _outcome(r: Ratio, tolerance: float, current: int, ready: int) -> str:
    if r.flipped:
        return f"; the pods not reporting, counted as HPA counts them, turn it around → hold {current}"
    if r.held:
        return f", within {tolerance:.0%} tolerance → hold {current}"
    if r.covered:
        # whether they are starting, crash-looping or were never created (a quota) is the workload's to say
        waiting = current - ready
        who = "replica not Ready yet covers" if waiting == 1 else "replicas not Ready yet cover"
        return f" → hold {current}: the {waiting} {who} it"
    if _capped(r):
        return f" → {r.replicas} ({CAPPED})"
    return f" → {r.replicas}"


def _apart(value: float, target: float, scale: float, unit: str) -> tuple[str, str]:
    """`value` and `target` (times `scale`, in `unit`) printed with as few decimals as tell them apart, up to
    three: a comparison that decided a count must read true as printed ("80.4% > 80%", not "80% > 80%")."""
    for digits in range(4):
        shown = f"{value * scale:.{digits}f}", f"{target * scale:.{digits}f}"
        if shown[0] != shown[1] or value == target:
            break
    return shown[0] + unit, f"{round(target * scale, digits):g}{unit}"  # a target reads as set: 80%, not 80.0%


def kv_cache(mean: float, usage: Usage, target: float, tolerance: float, current: int) -> tuple[Recommendation, Ratio]:
    r = hpa_ratio(usage, target, tolerance, current)
    cmp = ">" if mean > target else "<" if mean < target else "="
    shown, goal = _apart(mean, target, 100, "%")
    message = (
        f"KV cache {shown} {cmp} {goal} target on {usage.ready} ready replicas{_coverage(usage)}"
        f"{_outcome(r, tolerance, current, usage.ready)}"
    )
    return Recommendation(Reason.KV_CACHE, r.replicas, mean, target, message, _held(r), _capped(r)), r


def queue(
    waiting: float,
    usage: Usage,
    target: float,
    tolerance: float,
    current: int,
    drain: float | None = None,
    slo_ttft: float | None = None,
) -> tuple[Recommendation, Ratio]:
    """The HPA ratio on waiting per replica, capped at `MAX_STEP`. When the backlog's drain time
    (`drain` seconds at the completion rate) is known, a backlog over target that drains within
    `BURST_DRAIN_SLO_FRACTION` of the TTFT SLO holds the current count (a burst), and a longer one
    asks for at most drain / that budget times the ready replicas: a queue half again the budget
    needs half again the replicas, not the multiple its count per replica says."""

    # the backlog's drain time in units of the burst budget; None when either is unknown
    delay = drain / (BURST_DRAIN_SLO_FRACTION * slo_ttft) if drain is not None and slo_ttft else None
    r = hpa_ratio(usage, target, tolerance, current, MAX_STEP)
    head = f"{waiting:g} waiting ({waiting / max(usage.reporting, 1):.1f} per replica vs target {target:g})"
    head += f" on {usage.ready} ready replicas{_coverage(usage)}"
    if delay is not None and delay <= 1.0 and r.replicas > current:
        message = f"{head}: a burst that drains in {drain:.2f}s (within the TTFT SLO) → hold {current}"
        return Recommendation(Reason.QUEUE, current, waiting, target, message), Ratio(current, current, r.ratio, True)
    if delay is not None and 1.0 < delay < MAX_STEP:
        r = hpa_ratio(usage, target, tolerance, current, delay)
        if r.capped:
            message = f"{head} → {r.replicas} (drains in {drain:.2f}s, {delay:.2f}x the TTFT SLO)"
            return Recommendation(Reason.QUEUE, r.replicas, waiting, target, message), r
    message = f"{head}{_outcome(r, tolerance, current, usage.ready)}"
    return Recommendation(Reason.QUEUE, r.replicas, waiting, target, message, _held(r), _capped(r)), r


def behind_pending(rec: Recommendation, current: int, pending: int, need: int | None) -> Recommendation:
    """An overload signal (queue, latency) while replicas are pending asks beyond `current` only up
    to `need` (see `backlog_need`): the pending are supply on the way, so one backlog orders its
    replicas once instead of again each time a pending replica turns Ready (a ServeGen replay went
    22 -> 75 that way, the backlog draining no sooner). Replicas beyond what drains the backlog within
    a time-to-ready arrive after it has drained; until 2026-12-06 the ask could still reach twice the
    ready replicas less those pending, and on the m-mid slice it took 41 on the way (30 drain it) to 56
    (the oracle ran 36)."""
    if pending <= 0 or need is None or rec.replicas <= max(current, need):
        return rec
    n = max(current, need)
    outcome = f"hold {current}" if n == current else f"{n}"
    message = f"{seen(rec)}; with {pending} pending, {need} drain the backlog within a time-to-ready → {outcome}"
    return replace(rec, replicas=n, message=message, held=Reason.SCALE_UP_PENDING, capped=False)


def seen(rec: Recommendation) -> str:
    """What a recommendation's signal saw, without the count it asks for."""
    return rec.message.split(" → ")[0]


def asks(rec: Recommendation) -> str:
    """The count a recommendation asks for, with the cap that set it where one did: a queue's "asks 40" alone
    reads as the queue's own figure where it is twice the Ready replicas."""
    return f"asks {rec.replicas}, {CAPPED}" if rec.capped else f"asks {rec.replicas}"


def backlog_need(
    waiting: float | None, completion_rate: float | None, ready: int, arrival: float | None, horizon: float
) -> int | None:
    """Replicas that keep up with arrivals and drain `waiting` within `horizon` seconds, each doing
    what a ready replica completes now (behind a backlog, replicas run at capacity); None when
    unknown. Arrivals are at least the completion rate: a backlog means more arrive than finish."""
    if waiting is None or completion_rate is None or completion_rate <= 0 or ready < 1 or horizon <= 0:
        return None
    per_replica = completion_rate / ready
    if per_replica <= 0:  # a rate too small to divide by (the float underflows) completes nothing
        return None
    inflow = max(completion_rate, arrival) if arrival is not None else completion_rate
    return ceil_count(min((inflow + waiting / horizon) / per_replica, MAX_COUNT))


def arrival_rate(
    completion_rate: float | None,
    waiting: float | None,
    previous: tuple[float, float] | None,
    now: float,
    max_gap: float,
) -> float | None:
    """Requests/s arriving: the completion rate plus the growth of the queue since `previous`
    (its time and waiting count), when that is at most `max_gap` seconds old. Under overload the
    completion rate alone understates demand by exactly what piles up: an idle fleet of one replica
    hit by 2,000 req/s completes a few, while tens of thousands wait. A shrinking queue counts as no
    growth (the completions already include the drain, and arrivals are never read below them)."""
    if completion_rate is None:
        return None
    if waiting is None or previous is None:
        return completion_rate
    at, before = previous
    dt = now - at
    if not (0 < dt <= max_gap):
        return completion_rate
    return completion_rate + max(0.0, waiting - before) / dt


def queued(waiting: float | None, target_waiting: float, ready: int) -> bool:
    """A backlog at the policy's queue set-point (waiting per ready replica)."""
    return waiting is not None and waiting >= target_waiting * ready


def queue_delay(waiting: float | None, request_rate: float | None) -> float | None:
    """The wait a backlog adds at the rate the fleet completes requests (Little's law); None when
    either is unknown or nothing completes (a stuck queue has no drain time)."""
    if waiting is None or request_rate is None or request_rate <= 0:
        return None
    return waiting / request_rate


def delaying(
    waiting: float | None,
    request_rate: float | None,
    slo_ttft: float | None,
    target_waiting: float,
    ready: int,
) -> bool:
    """A queue that costs TTFT (`LOADED_DELAY_SLO_FRACTION`); the set-point decides when the delay
    or the SLO is unknown."""
    delay = queue_delay(waiting, request_rate)
    if delay is None or slo_ttft is None:
        return queued(waiting, target_waiting, ready)
    return delay >= LOADED_DELAY_SLO_FRACTION * slo_ttft


def loaded(kv: float | None, target_kv: float, backlog: bool) -> bool:
    return backlog or (kv is not None and kv >= LOADED_KV_FRACTION * target_kv)


def batching(running: float | None, ready: int) -> bool:
    """Replicas decode at least `BATCHING_PER_REPLICA` requests each on average (unknown: no)."""
    return running is not None and ready >= 1 and running >= BATCHING_PER_REPLICA * ready


NOT_LOADED, NOT_BATCHING = "that are not loaded", "that neither batch nor are loaded"


def load_now(kv: float | None, waiting: float | None, running: float | None, ready: int) -> str:
    """What says the replicas are not loaded, this tick: " now (KV cache 40%, 0 waiting)". The latency is a
    window's (TTFT P95 over minutes), the load a gauge's: right after a queue drains the window still counts the
    requests that waited in it, and a breach on replicas that read idle is that, or long prompts' prefill."""
    facts = [f"{running / ready:.1f} running per replica"] if running is not None and ready >= 1 else []
    facts += [f"KV cache {kv:.0%}"] if kv is not None else []
    facts += [f"{waiting:g} waiting"] if waiting is not None else []
    return f" now ({', '.join(facts)})" if facts else " now"


SIGNAL_NAMES = {Reason.SLO_TTFT: "TTFT P95", Reason.SLO_ITL: "ITL mean", Reason.SLO_TPOT: "TPOT P95"}


def slo(
    signal: Reason,
    observed: float,
    target: float,
    ready: int,
    current: int,
    is_loaded: bool,
    idle: str = NOT_LOADED,
) -> Recommendation | str | None:
    """Latency above its SLO on loaded replicas asks for ready x observed/target replicas, at most
    doubling, and never fewer than `current` (no scale-down during a breach). When the SLO is met
    it recommends nothing (latency below target says nothing about how many to remove). A breach on
    replicas that are not loaded recommends nothing either and returns the sentence saying why."""
    if observed <= target or ready < 1:
        return None
    shown, goal = _apart(observed, target, 1000, "ms")
    breach = f"{SIGNAL_NAMES[signal]} {shown} > SLO {goal}"
    if not is_loaded:
        return f"{breach} on replicas {idle}: more replicas would not lower it"
    step = min(observed / target, MAX_STEP)
    replicas = max(ceil_count(ready * step), ready + 1, current)
    return Recommendation(signal, replicas, observed, target, f"{breach} on {ready} ready replicas → {replicas}")
