"""The step that carries a prompt's prefill chunk against the ITL SLO, and the engine's batch limits."""

from __future__ import annotations

import pytest

from inferscale.perf import PerfError, operating_point, prefill_step, replica_profile
from inferscale.perf.chunking import BUDGET_STEP

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


def test_a_long_prompt_chunk_is_over_the_slo_and_the_suggested_budget_fits() -> None:
    profile = replica_profile(*H100)
    op = operating_point(profile, 15000, 149, 7.0, 0.05)
    step = prefill_step(profile, 15000, 149, op.batch, 0.05)
    # the mean ITL meets the SLO while one chunk's step is three times over it
    assert op.itl <= 0.05 < step.step_s / 3
    assert step.chunk_tokens == profile.max_num_batched_tokens - round(op.batch)
    assert step.within_slo is False
    budget = step.budget_within_slo
    assert budget is not None and budget % BUDGET_STEP == 0
    fits = prefill_step(replica_profile(*H100, max_num_batched_tokens=budget), 15000, 149, op.batch, 0.05)
    over = prefill_step(replica_profile(*H100, max_num_batched_tokens=budget + BUDGET_STEP), 15000, 149, op.batch, 0.05)
    assert fits.within_slo is True and over.within_slo is False


def test_a_short_prompt_fits_and_no_slo_judges_nothing() -> None:
    profile = replica_profile(*H100)
    step = prefill_step(profile, 331, 52, 200, 0.05)
    assert step.chunk_tokens == 331 and step.within_slo is True
    unjudged = prefill_step(profile, 15000, 149, 10, None)
    assert unjudged.within_slo is None and unjudged.budget_within_slo is None


def test_an_slo_below_the_fixed_step_cost_has_no_budget() -> None:
    step = prefill_step(replica_profile(*H100), 1000, 200, 10, 0.004)
    assert step.within_slo is False and step.budget_within_slo is None
