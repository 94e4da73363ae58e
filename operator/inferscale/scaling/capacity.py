"""Capacity: forecast demand over per-replica capacity, and learning that capacity online.

Planning headroom: the fleet is sized so that the forecast rate uses `HEADROOM` (85%) of the
replicas' capacity at the SLO. Capacity at the SLO is the rate a replica sustains right at the
edge; bursts inside a scrape interval and an imperfect router need the rest (WVA sizes at 85% too).

Learning (`learn`): a per-replica rate observed while the SLO is met and the replicas are
actually loaded (`signals.loaded`: KV cache near its target, or a queue forming)
is a lower bound on capacity. Without a queue it is scaled up to the KV target when KV is below
it (KV grows about linearly with concurrency); with a queue the replicas already give all they
have. Idle periods are ignored: they would teach that a replica can only carry the little it was
given. The estimate moves by a bounded EMA (`ALPHA`, at most `MAX_CHANGE` per tick) and, when a
prior exists, stays within a factor `PRIOR_SPAN` of it.
"""

from __future__ import annotations

from inferscale.scaling import signals
from inferscale.scaling.signals import ceil_count
from inferscale.scaling.types import Observation, Policy, Reason, Recommendation

HEADROOM = 0.85
ALPHA = 0.1
MAX_CHANGE = 0.1  # fraction of the current estimate per update
PRIOR_SPAN = 4.0
MAX_COUNT = 1e15  # replicas: beyond any fleet; max_replicas clamps it later


def recommend(
    demand_rps: float, capacity_rps: float, learned: bool, horizon: float, tolerance: float, current: int
) -> tuple[Recommendation, int]:
    """The recommendation, and the count it would ask for without the dead-band."""
    # min: a demand near the float maximum over a small capacity overflows to inf, which has no count
    needed = min(demand_rps / (capacity_rps * HEADROOM), MAX_COUNT)
    replicas = ceil_count(needed)
    held = current > 0 and replicas < current and needed / current >= 1.0 - tolerance
    source = "learned" if learned else "prior"
    when = f"in {horizon:.0f}s" if horizon > 0 else "now"
    outcome = f", within {tolerance:.0%} tolerance → hold {current}" if held else f" → {replicas}"
    message = (
        f"forecast {demand_rps:.2f} req/s {when} / {capacity_rps:.2f} req/s per replica ({source}) "
        f"at {HEADROOM:.0%}{outcome}"
    )
    return Recommendation(Reason.CAPACITY, current if held else replicas, demand_rps, capacity_rps, message), replicas


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


def learn(
    estimate: float | None,
    prior: float | None,
    request_rate: float,
    ready: int,
    kv: float | None,
    target_kv: float,
    queued: bool,
) -> float:
    """The next capacity estimate after one loaded, SLO-compliant observation."""
    sample = request_rate / ready
    if queued:
        pass  # a queue is forming: the replicas already give all they have, whatever their KV usage
    elif kv is not None and kv > 0:
        sample *= min(max(target_kv / kv, 1.0), 1.0 / signals.LOADED_KV_FRACTION)
    old = estimate if estimate is not None else prior
    if old is None:
        return sample
    step = min(max(ALPHA * (sample - old), -MAX_CHANGE * old), MAX_CHANGE * old)
    new = old + step
    if prior is not None:
        new = min(max(new, prior / PRIOR_SPAN), prior * PRIOR_SPAN)
    return new
