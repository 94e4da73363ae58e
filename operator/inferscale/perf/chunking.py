"""How long one engine step takes when it carries a prompt's prefill chunk, against the ITL SLO.

The capacity model spreads prefill evenly over steps (b·I/O tokens each), which is what the fleet's
mean ITL sees. A long prompt does not spread: with chunked prefill it lands as chunks of up to
max_num_batched_tokens less the running decodes, and every sequence decoding on that replica waits the
whole chunk's step. A request with few output tokens has few steps to average that out, so its own
mean ITL (TPOT) misses an SLO the fleet's mean meets. No replica count fixes a step that is over the
SLO on its own; a smaller token budget does (at some prefill throughput: each step pays c0 again).

The step is judged at the mean batch a replica holds at the SLO: within the SLO on average, not on
every step of a Poisson batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferscale.perf.capacity import operating_point
from inferscale.perf.errors import PerfError
from inferscale.perf.profile import ReplicaProfile, with_limits

# A suggested token budget is rounded down to this many tokens (vLLM takes any integer; round numbers read better).
BUDGET_STEP = 256
# Prefill tokens a suggested budget leaves one prompt per step beside the decodes: a budget the decodes
# nearly fill makes every prompt's TTFT a step per few tokens.
MIN_CHUNK = 64


@dataclass(frozen=True)
class EngineLimits:
    """vLLM --max-num-batched-tokens and the --max-num-seqs to run with it (vLLM needs seqs <= tokens)."""

    max_num_batched_tokens: int
    max_num_seqs: int


@dataclass(frozen=True)
class PrefillStep:
    batch: float  # mean sequences decoding beside the chunk, at the SLO
    chunk_tokens: int  # prefill tokens of one prompt in one step: min(prompt, budget left after the decodes)
    step_s: float  # that step's time
    within_slo: bool | None  # None without an ITL SLO
    # the largest limits (budget a multiple of BUDGET_STEP) whose step, at the batch the replica then holds
    # at the SLO, stays within it; None without an SLO, when within it already, or when no budget does
    fitting: EngineLimits | None


def _step(
    profile: ReplicaProfile, i: float, o: float, slo_ttft: float | None, slo_itl: float | None
) -> tuple[float, int, float]:
    point = operating_point(profile, i, o, slo_ttft, slo_itl)
    batch = point.batch if point.rate_rps > 0 else 0.0
    b = round(batch)
    s = profile.step
    chunk = max(0, min(math.ceil(i), profile.max_num_batched_tokens - b))
    return batch, chunk, s.c0 + s.c_prefill * chunk + s.c_decode * b + s.c_kv * b * (i + o / 2)


def prefill_step(
    profile: ReplicaProfile, input_tokens: float, output_tokens: float, slo_ttft: float | None, slo_itl: float | None
) -> PrefillStep:
    """The step that carries a chunk of a mean-length prompt beside the batch a replica holds at the SLO,
    and, when it is over the ITL SLO, the limits that bring it within. Raises PerfError on bad input (the
    operating point, solved first, checks it)."""
    i, o = float(input_tokens), float(output_tokens)
    batch, chunk, step = _step(profile, i, o, slo_ttft, slo_itl)
    if slo_itl is None:
        return PrefillStep(batch, chunk, step, None, None)
    if step <= slo_itl:
        return PrefillStep(batch, chunk, step, True, None)
    return PrefillStep(batch, chunk, step, False, _fitting(profile, i, o, slo_ttft, slo_itl, batch))


def _fitting(
    profile: ReplicaProfile, i: float, o: float, slo_ttft: float | None, slo_itl: float, batch: float
) -> EngineLimits | None:
    # A smaller budget changes the operating point, hence the batch beside the chunk: each candidate is
    # checked at its own operating point, from the closed-form bound at today's batch downwards.
    s = profile.step
    b = round(batch)
    fixed = s.c0 + s.c_decode * b + s.c_kv * b * (i + o / 2)
    room = (slo_itl - fixed) / s.c_prefill
    budget = math.floor((b + room) / BUDGET_STEP) * BUDGET_STEP if room > 0 else 0
    top = profile.max_num_batched_tokens - BUDGET_STEP
    budget = min(budget, top)

    def fits(budget: int) -> EngineLimits | None:
        limits = EngineLimits(budget, min(profile.max_num_seqs, budget))
        trial = with_limits(profile, limits.max_num_seqs, limits.max_num_batched_tokens)
        trial_batch, _, step = _step(trial, i, o, slo_ttft, slo_itl)
        return limits if step <= slo_itl and budget - round(trial_batch) >= MIN_CHUNK else None

    while budget >= BUDGET_STEP:
        try:
            found = fits(budget)
        except PerfError:
            return None  # smaller budgets only move the KV cache the same way
        if found is not None:
            # the bound is at today's batch; a smaller budget holds a smaller batch, which may leave room for a
            # larger budget than the bound: climb while the next one fits too
            while found.max_num_batched_tokens + BUDGET_STEP <= top:
                try:
                    up = fits(found.max_num_batched_tokens + BUDGET_STEP)
                except PerfError:
                    break
                if up is None:
                    break
                found = up
            return found
        budget -= BUDGET_STEP
    return None


# The server's name and its flags for (the token budget, the seats): SGLang's chunked-prefill size is the
# per-step prefill budget that vLLM's --max-num-batched-tokens sets (SGLang counts it without the decodes).
ENGINE_FLAGS = {
    "vllm": ("vLLM", "--max-num-batched-tokens", "--max-num-seqs"),
    "sglang": ("SGLang", "--chunked-prefill-size", "--max-running-requests"),
}
# SGLang's --chunked-prefill-size -1: no chunking, a prompt prefills whole in one step (its budget is then the
# longest request the model takes); read as this token budget until the model's context length replaces it
UNCHUNKED = -1


def advice(step: PrefillStep, slo_itl: float, engine: str = "vllm") -> str:
    """What the over-SLO step means and the engine flags that fix it, in one sentence; for `plan` and the
    operator's condition alike."""
    head = (
        f"a step carrying one mean prompt's prefill chunk ({step.chunk_tokens:,} tokens, beside {step.batch:.0f} "
        f"decoding) takes {step.step_s * 1e3:.1f} ms, over the ITL SLO {slo_itl * 1e3:g} ms: requests with few "
        "output tokens that share such steps miss a per-request ITL (TPOT) target at any replica count"
    )
    if step.fitting is None:
        return f"{head}; no token budget keeps it within at this load"
    f = step.fitting
    server, budget, seats = ENGINE_FLAGS[engine]
    return f"{head}; {server} {budget} {f.max_num_batched_tokens} {seats} {f.max_num_seqs} keeps it within"
