"""The step that carries a prompt's prefill chunk against the ITL SLO, and the engine's batch limits."""

from __future__ import annotations

import itertools
import math

import pytest

from inferscale.perf import PerfError, advice, operating_point, prefill_step, replica_profile
from inferscale.perf.chunking import BUDGET_STEP, MIN_CHUNK

H100 = ("llama-3.1-8b", "h100-80gb")


def test_batch_limits_default_to_vllms_and_take_overrides() -> None:
    default = replica_profile(*H100)
    assert (default.max_num_seqs, default.max_num_batched_tokens) == (1024, 8192)
    small = replica_profile(*H100, max_num_batched_tokens=2048)
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (1024, 2048)
    # a smaller budget reserves less activation memory for the profiling pass: more KV cache
    assert small.kv_capacity_tokens > default.kv_capacity_tokens
    assert replica_profile(*H100, max_num_seqs=64, max_num_batched_tokens=512).max_num_seqs == 64


@pytest.mark.parametrize(
    ("seqs", "tokens", "message"),
    [
        (None, 512, r"max_num_batched_tokens \(512\) must be >= max_num_seqs \(1024\)"),
        (0, None, "max_num_seqs must be a whole number >= 1"),
        (None, -5, "max_num_batched_tokens must be a whole number >= 1"),
    ],
)
def test_batch_limits_vllm_refuses_are_errors(seqs: int | None, tokens: int | None, message: str) -> None:
    with pytest.raises(PerfError, match=message):
        replica_profile(*H100, max_num_seqs=seqs, max_num_batched_tokens=tokens)


def test_a_long_prompt_chunk_is_over_the_slo_and_the_suggested_limits_fit() -> None:
    profile = replica_profile(*H100)
    step = prefill_step(profile, 15000, 149, 7.0, 0.05)  # Mooncake's mean lengths
    op = operating_point(profile, 15000, 149, 7.0, 0.05)
    # the mean ITL meets the SLO while one chunk's step is three times over it
    assert op.itl <= 0.05 < step.step_s / 3 and step.batch == pytest.approx(op.batch)
    assert step.chunk_tokens == profile.max_num_batched_tokens - round(op.batch)
    assert step.within_slo is False and step.fitting is not None
    assert (step.fitting.max_num_batched_tokens, step.fitting.max_num_seqs) == (1792, 1024)
    text = advice(step, 0.05)
    assert "over the ITL SLO 50 ms" in text and "vLLM --max-num-batched-tokens 1792 --max-num-seqs 1024" in text
    sglang = advice(step, 0.05, "sglang")
    assert "SGLang --chunked-prefill-size 1792 --max-running-requests 1024" in sglang


def _following(model: str, gpu: str, tp: int, i: float, o: float, ttft: float, itl: float) -> bool:
    """Whatever the planner suggests, vLLM accepts, and the step at it (at its own operating point) fits.
    False when it suggests nothing (the default budget fits, or none does)."""
    step = prefill_step(replica_profile(model, gpu, tp), i, o, ttft, itl)
    if step.fitting is None:
        return False
    f = step.fitting
    assert f.max_num_batched_tokens % BUDGET_STEP == 0 and f.max_num_seqs <= f.max_num_batched_tokens
    fixed = replica_profile(
        model, gpu, tp, max_num_seqs=f.max_num_seqs, max_num_batched_tokens=f.max_num_batched_tokens
    )
    after = prefill_step(fixed, i, o, ttft, itl)
    assert after.within_slo is True, (model, gpu, tp, i, o, ttft, itl, f, after)
    # the budget leaves the prompt room beside the decodes: a budget the decodes fill would starve it
    assert f.max_num_batched_tokens - round(after.batch) >= MIN_CHUNK
    # and it is the largest such budget: one step up is over the SLO again (or leaves no room)
    up = f.max_num_batched_tokens + BUDGET_STEP
    if up < replica_profile(model, gpu, tp).max_num_batched_tokens:
        bigger = replica_profile(model, gpu, tp, max_num_seqs=min(f.max_num_seqs, up), max_num_batched_tokens=up)
        over = prefill_step(bigger, i, o, ttft, itl)
        assert over.within_slo is False or up - round(over.batch) < MIN_CHUNK
    return True


@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [("llama-3.1-8b", "h100-80gb", 1), ("llama-3.1-70b", "h100-80gb", 4), ("llama-3.1-8b", "a100-80gb", 1)],
)
def test_following_the_suggestion_fits_and_vllm_accepts_it(model: str, gpu: str, tp: int) -> None:
    # the 70B on four H100s suggests a budget below vLLM's default max_num_seqs: it must lower that too
    grid = itertools.product((3000, 15000), (8, 500), (2.0, 7.0), (0.03, 0.05))
    checked = [_following(model, gpu, tp, i, o, ttft, itl) for i, o, ttft, itl in grid]
    # the 15,000-token prompts (half the grid) need a smaller budget on each of these: suggestions were
    # checked, not all skipped
    assert sum(checked) >= len(checked) // 2, checked


def test_the_70b_suggestion_lowers_max_num_seqs_with_the_budget() -> None:
    step = prefill_step(replica_profile("llama-3.1-70b", "h100-80gb", 4), 15000, 149, 7.0, 0.05)
    assert step.fitting is not None and step.fitting.max_num_seqs <= step.fitting.max_num_batched_tokens < 1024


def test_a_short_prompt_fits_and_no_slo_judges_nothing() -> None:
    profile = replica_profile(*H100)
    step = prefill_step(profile, 331, 52, 0.5, 0.05)
    assert step.chunk_tokens == 331 and step.within_slo is True and step.fitting is None
    unjudged = prefill_step(profile, 15000, 149, 7.0, None)
    assert unjudged.within_slo is None and unjudged.fitting is None


def test_no_budget_fits_an_slo_below_the_fixed_step_cost() -> None:
    step = prefill_step(replica_profile(*H100), 1000, 200, None, 0.004)
    assert step.within_slo is False and step.fitting is None
    assert "no token budget keeps it within" in advice(step, 0.004)


@pytest.mark.parametrize(
    ("i", "o", "itl"), [(math.nan, 10.0, 0.05), (math.inf, 10.0, 0.05), (100.0, 0.0, 0.05), (100.0, 10.0, -1.0)]
)
def test_bad_input_is_a_perf_error(i: float, o: float, itl: float) -> None:
    with pytest.raises(PerfError):
        prefill_step(replica_profile(*H100), i, o, 0.5, itl)
