"""How long one engine step takes when it carries a prompt's prefill chunk, against the ITL SLO.

The capacity model spreads prefill evenly over steps (b·I/O tokens each), which is what the fleet's
mean ITL sees. A long prompt does not spread: with chunked prefill it lands as chunks of up to
max_num_batched_tokens less the running decodes, and every sequence decoding on that replica waits the
whole chunk's step. A request with few output tokens has few steps to average that out, so its own
mean ITL (TPOT) misses an SLO the fleet's mean meets. No replica count fixes a step that is over the
SLO on its own; a smaller token budget does (at some prefill throughput: each step pays c0 again).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferscale.perf.profile import ReplicaProfile

# A suggested token budget is rounded down to this many tokens (vLLM takes any integer; round numbers read better).
BUDGET_STEP = 256


@dataclass(frozen=True)
class PrefillStep:
    chunk_tokens: int  # prefill tokens of one prompt in one step: min(prompt, budget left after the decodes)
    step_s: float  # that step's time with `batch` sequences decoding beside it
    within_slo: bool | None  # None without an ITL SLO
    # the largest budget (a multiple of BUDGET_STEP) whose full chunk keeps the step within the SLO; None
    # without an SLO, or when not even BUDGET_STEP tokens fit. vLLM also needs max_num_seqs <= the budget.
    budget_within_slo: int | None


def prefill_step(
    profile: ReplicaProfile, input_tokens: float, output_tokens: float, batch: float, slo_itl: float | None
) -> PrefillStep:
    """The step that carries a chunk of a mean-length prompt while `batch` sequences decode."""
    s = profile.step
    b = max(0, round(batch))
    context = b * (input_tokens + output_tokens / 2)
    fixed = s.c0 + s.c_decode * b + s.c_kv * context
    chunk = max(0, min(math.ceil(input_tokens), profile.max_num_batched_tokens - b))
    step = fixed + s.c_prefill * chunk
    if slo_itl is None:
        return PrefillStep(chunk, step, None, None)
    room = (slo_itl - fixed) / s.c_prefill  # prefill tokens a step can carry within the SLO
    budget = math.floor((b + room) / BUDGET_STEP) * BUDGET_STEP if room > 0 else 0
    return PrefillStep(chunk, step, step <= slo_itl, budget if budget >= BUDGET_STEP else None)
