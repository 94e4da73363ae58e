"""Requests/s one replica sustains at an SLO, in closed form (no simulation loop).

A replica is a birth-death queue whose service rate depends on how many requests it holds
(the state-dependent model of WVA's queue analyzer, reference §2.4 item 5):
- with b sequences in the batch, input length I and output length O, every step emits one token per
  sequence, so b/O requests finish per step and as many start; their prompts add b·I/O prefill tokens to
  every step (chunked prefill) and the batch holds b·(I + O/2) context tokens on average;
  ITL(b) = step(prefill=b·I/O, decode=b, context=b·(I + O/2)) and the departure rate is μ(b) = b / (O·ITL(b));
- b is capped at c = min(max_num_seqs, 0.9 · KV capacity / (I + O), max_num_batched_tokens / (1 + I/O));
  requests beyond c wait, served at μ(c). The KV cap counts full-length sequences with 10% headroom
  because vLLM admits on the blocks a prompt needs now and preempts (and recomputes) when the running
  sequences grow: against the simulator's vLLM scheduler, a cap at the mean size I + O/2 let preemption
  thrash at the rate this model called safe; with this cap the simulator meets the SLO at the computed
  rate and misses it at +10% (see the cross-check in the perf report);
- Poisson arrivals at λ give the stationary distribution π(n) ∝ Π_{k≤n} λ/μ(min(k, c)), geometric beyond c.
Mean ITL is token-weighted over π (what vLLM's ITL histogram mean measures). TTFT of an arrival that finds
n < c others is one step to join plus its own prefill steps, s(n) = (1 + chunks)·ITL(n+1) + c_prefill·I;
one that finds n ≥ c also waits an exponential time of rate μ(c)·(1 − λ/μ(c)) (the M/M/c tail), so
TTFT P95 follows from π in closed form. Exponential service overstates the variance of fixed lengths:
the error is on the safe side for a capacity prior. Both metrics grow with λ, so the capacity is the
largest λ < μ(c) meeting both SLOs, found by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from inferscale.perf.errors import PerfError
from inferscale.perf.profile import ReplicaProfile

TAIL = 0.05  # P95
KV_HEADROOM = 0.9
_ITERATIONS = 50
# An arrival rate this fraction of the peak stands for an idle replica: where the SLOs are judged first.
_IDLE = 1e-9

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class OperatingPoint:
    rate_rps: float
    batch: float  # mean sequences in the batch at that rate
    itl: float  # seconds, token-weighted mean
    ttft_p95: float  # seconds (inf when the queue is unstable)
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


def hard_limit(profile: ReplicaProfile, i: float, o: float) -> tuple[int, str]:
    """Concurrency one replica can hold at these lengths, and which limit binds (for the fluid simulator too)."""
    limits = [
        (float(profile.max_num_seqs), "max_num_seqs"),
        (KV_HEADROOM * profile.kv_capacity_tokens / (i + o), "kv_cache"),
        (profile.max_num_batched_tokens / (1 + i / o), "token_budget"),
    ]
    value, reason = min(limits)
    return math.floor(value), reason


class ReplicaQueue:
    """The birth-death chain of one replica at fixed lengths; `at(rate)` evaluates it for an arrival rate."""

    def __init__(self, profile: ReplicaProfile, i: float, o: float, servers: int) -> None:
        s = profile.step
        b = np.arange(1, servers + 1, dtype=np.float64)
        self.servers = servers
        per_seq = s.c_prefill * i / o + s.c_decode + s.c_kv * (i + o / 2)  # one sequence's share of a step
        self.itl: FloatArray = s.c0 + per_seq * b
        self.mu: FloatArray = b / (o * self.itl)
        self.log_mu_cum: FloatArray = np.cumsum(np.log(self.mu))
        chunks = np.maximum(1.0, np.ceil(i / np.maximum(1.0, profile.max_num_batched_tokens - b)))
        # TTFT without queueing for an arrival that finds b - 1 others: the step in flight (none on an idle
        # engine, which schedules it at once), then its chunks, each a step of the others' work plus its own
        # chunk (its own share is its prompt, not a b-th of a step)
        in_flight = (b > 1).astype(np.float64)
        self.service: FloatArray = (in_flight + chunks) * (s.c0 + per_seq * (b - 1)) + s.c_prefill * i
        self.b = b

    def at(self, rate: float) -> tuple[float, float, float]:
        """(mean batch, token-weighted mean ITL, TTFT P95) at arrival rate `rate` < μ(c)."""
        c, mu_c = self.servers, float(self.mu[-1])
        r = rate / mu_c
        if r >= 1:
            return math.inf, float(self.itl[-1]), math.inf
        n = np.arange(0, c + 1, dtype=np.float64)
        log_w = n * math.log(rate) - np.concatenate(([0.0], self.log_mu_cum))
        w = np.exp(log_w - log_w.max())
        tail = w[-1] * r / (1 - r)  # states beyond c: geometric with ratio r
        z = w.sum() + tail
        p = w / z
        p_over = tail / z
        busy = float((p[1:] * self.b).sum()) + p_over * c
        tokens_rate = float((p[1:] * self.b / self.itl).sum()) + p_over * c / float(self.itl[-1])
        itl = busy / tokens_rate if tokens_rate > 0 else float(self.itl[0])
        p_queue = float(p[-1]) + p_over  # an arrival finds all c slots taken (PASTA)
        if p_queue > TAIL:
            ttft = float(self.service[-1]) + math.log(p_queue / TAIL) / (mu_c * (1 - r))
        else:
            # Arrivals finding n < c others wait s(n), increasing in n: P95 is s at the 95th percentile of n.
            beyond = 1.0 - np.cumsum(p[:-1])  # P(N > n), n = 0..c-1
            n95 = int(np.argmax(beyond <= TAIL))
            ttft = float(self.service[n95])
        return float(busy), float(itl), ttft


@lru_cache(maxsize=4096)
def operating_point(
    profile: ReplicaProfile,
    input_tokens: float,
    output_tokens: float,
    slo_ttft: float | None,
    slo_itl: float | None,
) -> OperatingPoint:
    """The highest arrival rate one replica serves with TTFT P95 ≤ slo_ttft and mean ITL ≤ slo_itl
    (None disables a bound), and the state there. `limited_by` names the binding constraint."""
    _check_lengths(input_tokens, output_tokens)
    _check_slo("slo_ttft", slo_ttft)
    _check_slo("slo_itl", slo_itl)
    i, o = float(input_tokens), float(output_tokens)
    if o <= 1:
        slo_itl = None  # a one-token answer has no inter-token latency (vLLM's ITL histogram records none)
    servers, hard_reason = hard_limit(profile, i, o)
    if servers < 1:
        return OperatingPoint(0.0, 0.0, math.inf, math.inf, "unattainable")
    queue = ReplicaQueue(profile, i, o, servers)
    peak = float(queue.mu[-1])

    def violated(rate: float) -> str | None:
        _, itl, ttft = queue.at(rate)
        if slo_itl is not None and itl > slo_itl:
            return "itl"
        if slo_ttft is not None and ttft > slo_ttft:
            return "ttft"
        return None

    if slo_ttft is None and (slo_itl is None or float(queue.itl[-1]) <= slo_itl):
        return OperatingPoint(peak, float(servers), float(queue.itl[-1]), math.inf, hard_reason)
    lo, hi = 0.0, peak
    smallest = peak * _IDLE
    if violated(smallest) is not None:
        _, itl, ttft = queue.at(smallest)
        return OperatingPoint(0.0, 0.0, itl, ttft, "unattainable")
    lo = smallest
    for _ in range(_ITERATIONS):
        mid = (lo + hi) / 2
        if violated(mid) is None:
            lo = mid
        else:
            hi = mid
    batch, itl, ttft = queue.at(lo)
    return OperatingPoint(lo, batch, itl, ttft, violated(hi) or hard_reason)


def slo_floor(profile: ReplicaProfile, input_tokens: float, output_tokens: float) -> tuple[float, float] | None:
    """(TTFT P95, mean ITL) of an idle replica at these lengths: the best it reaches, so an SLO below either
    is met at no load (`operating_point` says "unattainable"). None when a replica holds no such request."""
    _check_lengths(input_tokens, output_tokens)
    i, o = float(input_tokens), float(output_tokens)
    servers, _ = hard_limit(profile, i, o)
    if servers < 1:
        return None
    queue = ReplicaQueue(profile, i, o, servers)
    _, itl, ttft = queue.at(float(queue.mu[-1]) * _IDLE)
    return ttft, itl


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
