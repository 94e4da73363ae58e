"""Requests/s one replica sustains at an SLO, in closed form (no simulation).

Steady state with B sequences decoding at once, input length I, output length O:
- every step each sequence emits one token, so B/O requests finish per step and as many start; their
  prompts add B·I/O prefill tokens to every step (chunked prefill), and the sequences hold B·(I + O/2)
  context tokens on average;
- ITL(B) = step(prefill=B·I/O, decode=B, context=B·(I + O/2)); rate(B) = B / (O · ITL(B));
- hard limits: B ≤ max_num_seqs, B·(I + O/2) ≤ KV capacity, B·(1 + I/O) ≤ max_num_batched_tokens.
TTFT P95 = one step to join the batch + the request's own prefill steps + two P95 queueing delays:
- slots: M/M/c with c = the hard limit on B and offered load B (Erlang C; exponential service is
  pessimistic for fixed lengths, which is the side to err on for a capacity prior);
- prefill budget: M/D/1 with utilisation B·I/O / (max_num_batched_tokens − B) and the prefill as service,
  tail P(W > t) ≈ ρ·exp(−2(1−ρ)t/D).
Every term grows with B and rate(B) grows with B, so the capacity is rate(B*) at the largest B* that
meets both SLOs, found by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from inferscale.perf.errors import PerfError
from inferscale.perf.profile import ReplicaProfile

TAIL = 0.05  # P95
_ITERATIONS = 60


@dataclass(frozen=True)
class OperatingPoint:
    batch: float  # mean sequences decoding at once
    rate_rps: float
    itl: float  # seconds, mean
    ttft_p95: float  # seconds
    limited_by: str  # "itl", "ttft", "max_num_seqs", "kv_cache", "token_budget", or "unattainable"


def _check_lengths(input_tokens: float, output_tokens: float) -> None:
    for name, value, low in (("input_tokens", input_tokens, 0.0), ("output_tokens", output_tokens, 1.0)):
        if not math.isfinite(value) or value < low:
            raise PerfError(f"{name} must be a finite number >= {low:g}, got {value!r}")


def _check_slo(name: str, value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise PerfError(f"{name} must be a positive number of seconds or None, got {value!r}")


def max_concurrency(profile: ReplicaProfile, input_tokens: float, output_tokens: float) -> int:
    """Sequences that fit at full length (I + O tokens, whole blocks), capped by max_num_seqs."""
    _check_lengths(input_tokens, output_tokens)
    blocks = math.ceil((input_tokens + output_tokens) / profile.block_size)
    return min(profile.max_num_seqs, profile.kv_capacity_tokens // (blocks * profile.block_size))


def _hard_limit(profile: ReplicaProfile, i: float, o: float) -> tuple[float, str]:
    limits = [
        (float(profile.max_num_seqs), "max_num_seqs"),
        (profile.kv_capacity_tokens / (i + o / 2), "kv_cache"),
        (profile.max_num_batched_tokens / (1 + i / o), "token_budget"),
    ]
    return min(limits)


def _itl(profile: ReplicaProfile, b: float, i: float, o: float) -> float:
    s = profile.step
    return s.c0 + s.c_prefill * b * i / o + s.c_decode * b + s.c_kv * b * (i + o / 2)


def _erlang_c(servers: int, load: float) -> float:
    """Probability of waiting in M/M/c (Erlang C), by the stable Erlang B recurrence."""
    if load >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = load * b / (k + load * b)
    return servers * b / (servers - load * (1 - b))


def _ttft_p95(profile: ReplicaProfile, b: float, i: float, o: float, hard: float) -> float:
    itl = _itl(profile, b, i, o)
    chunk = max(1.0, profile.max_num_batched_tokens - b)
    chunks = max(1, math.ceil(i / chunk))
    prefill = chunks * itl + profile.step.c_prefill * i
    servers = math.floor(hard)
    if b >= servers:
        return math.inf
    wait = 0.0
    c = _erlang_c(servers, b)
    if c > TAIL:
        wait += o * itl / (servers - b) * math.log(c / TAIL)
    rho = b * i / o / chunk
    if rho >= 1:
        return math.inf
    if rho > TAIL:
        wait += prefill * rho / (2 * (1 - rho)) * math.log(rho / TAIL)
    return itl + prefill + wait


@lru_cache(maxsize=4096)
def operating_point(
    profile: ReplicaProfile,
    input_tokens: float,
    output_tokens: float,
    slo_ttft: float | None,
    slo_itl: float | None,
) -> OperatingPoint:
    """The highest-throughput steady state of one replica that meets TTFT P95 ≤ slo_ttft and mean
    ITL ≤ slo_itl (None disables a bound). `limited_by` names the binding constraint."""
    _check_lengths(input_tokens, output_tokens)
    _check_slo("slo_ttft", slo_ttft)
    _check_slo("slo_itl", slo_itl)
    i, o = float(input_tokens), float(output_tokens)
    hard, hard_reason = _hard_limit(profile, i, o)

    def violated(b: float) -> str | None:
        if slo_itl is not None and _itl(profile, b, i, o) > slo_itl:
            return "itl"
        if slo_ttft is not None and _ttft_p95(profile, b, i, o, hard) > slo_ttft:
            return "ttft"
        return None

    def point(b: float, reason: str) -> OperatingPoint:
        itl = _itl(profile, b, i, o)
        rate = b / (o * itl) if b > 0 else 0.0
        return OperatingPoint(b, rate, itl, _ttft_p95(profile, b, i, o, hard), reason)

    if hard < 1:
        return point(0.0, "unattainable")
    if violated(hard) is None:
        return point(hard, hard_reason)
    lo, hi = 0.0, hard
    if violated(lo) is not None:
        return point(0.0, "unattainable")
    for _ in range(_ITERATIONS):
        mid = (lo + hi) / 2
        if violated(mid) is None:
            lo = mid
        else:
            hi = mid
    return point(lo, violated(hi) or hard_reason)


def replica_capacity_rps(
    profile: ReplicaProfile,
    input_tokens: float,
    output_tokens: float,
    slo_ttft: float | None,
    slo_itl: float | None,
) -> float:
    """Highest sustained request rate one replica serves with TTFT P95 ≤ slo_ttft and mean ITL ≤ slo_itl.
    0.0 means the replica cannot meet the SLO at any load (e.g. slo_itl below the bare step time)."""
    return operating_point(profile, input_tokens, output_tokens, slo_ttft, slo_itl).rate_rps
