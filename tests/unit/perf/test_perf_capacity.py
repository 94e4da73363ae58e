import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferscale.perf import PerfError, max_concurrency, operating_point, replica_capacity_rps, replica_profile
from inferscale.perf.capacity import slo_floor

H100_8B = replica_profile("llama-3.1-8b", "h100-80gb")


def test_capacity_meets_both_slos_at_its_operating_point() -> None:
    op = operating_point(H100_8B, 1000.0, 200.0, 0.5, 0.05)
    assert op.itl <= 0.05 + 1e-12 and op.ttft_p95 <= 0.5 + 1e-12
    assert op.rate_rps == pytest.approx(op.batch / (200 * op.itl))
    assert replica_capacity_rps(H100_8B, 1000.0, 200.0, 0.5, 0.05) == op.rate_rps
    assert op.limited_by in {"itl", "ttft"}


def test_tight_itl_binds_and_lowers_capacity() -> None:
    tight = operating_point(H100_8B, 500.0, 500.0, None, 0.010)
    loose = operating_point(H100_8B, 500.0, 500.0, None, 0.030)
    assert tight.limited_by == "itl" and tight.itl == pytest.approx(0.010, rel=1e-6)
    assert 0 < tight.rate_rps < loose.rate_rps


def test_unattainable_itl_gives_zero() -> None:
    # The bare step (c0 = 5.75 ms) is already slower than a 5 ms ITL target.
    op = operating_point(H100_8B, 500.0, 500.0, 2.0, 0.005)
    assert op.limited_by == "unattainable" and op.rate_rps == 0.0


def test_unattainable_ttft_gives_zero() -> None:
    # 100k-token prompts cannot prefill in 100 ms at 17 µs/token.
    assert replica_capacity_rps(H100_8B, 100_000.0, 10.0, 0.1, None) == 0.0


@pytest.mark.parametrize(("i", "o"), [(1000.0, 200.0), (15000.0, 149.0), (100.0, 2000.0)])
def test_the_slo_floor_is_where_an_slo_becomes_attainable(i: float, o: float) -> None:
    floor = slo_floor(H100_8B, i, o)
    assert floor is not None
    ttft, itl = floor
    assert operating_point(H100_8B, i, o, ttft * 0.999, None).limited_by == "unattainable"
    assert operating_point(H100_8B, i, o, ttft * 1.01, None).rate_rps > 0
    assert operating_point(H100_8B, i, o, None, itl * 0.999).limited_by == "unattainable"
    assert operating_point(H100_8B, i, o, None, itl * 1.01).rate_rps > 0
    # an idle replica: its own prefill and one step for TTFT, the bare step at batch 1 for ITL
    s = H100_8B.step
    assert itl == pytest.approx(s.c0 + s.c_prefill * i / o + s.c_decode + s.c_kv * (i + o / 2), rel=1e-6)
    chunks = max(1, math.ceil(i / (H100_8B.max_num_batched_tokens - 1)))
    assert ttft == pytest.approx(chunks * s.c0 + s.c_prefill * i, rel=1e-6)  # no step in flight: its own chunks


@pytest.mark.parametrize("o", [1.0, 2.0, 10.0, 1000.0])
def test_an_idle_replicas_ttft_does_not_depend_on_the_answers_length(o: float) -> None:
    # the arrival's prompt is prefilled once, in its own chunks: an 8,000-token prompt read 426 ms at one
    # output token and 150 ms at 1,000 when each step also carried the arrival's 1/o share of its prompt
    floor = slo_floor(H100_8B, 8000.0, o)
    assert floor is not None
    s = H100_8B.step
    assert floor[0] == pytest.approx(s.c0 + s.c_prefill * 8000, rel=1e-6)


def test_a_one_token_answer_is_not_held_to_an_itl_target() -> None:
    # a classifier's or reranker's single token has no inter-token gap (vLLM's ITL histogram records none)
    op = operating_point(H100_8B, 8000.0, 1.0, 2.0, 0.05)
    assert op.rate_rps > 0 and op.limited_by != "itl"


def test_no_slo_floor_when_a_replica_holds_no_such_request() -> None:
    low = replica_profile("llama-3.1-8b", "h100-80gb", gpu_memory_utilization=0.25)
    assert slo_floor(low, 19_000.0, 100.0) is None  # fits the 20,192-token cache, not with 10% headroom


def test_without_slos_the_hard_limit_binds() -> None:
    assert operating_point(H100_8B, 128.0, 128.0, None, None).limited_by == "max_num_seqs"
    long_ctx = operating_point(replica_profile("llama-3.1-8b", "l40s-48gb"), 8000.0, 2000.0, None, None)
    assert long_ctx.limited_by == "kv_cache"
    prefill_heavy = operating_point(H100_8B, 8000.0, 16.0, None, None)
    assert prefill_heavy.limited_by == "token_budget"


def test_longer_requests_lower_capacity() -> None:
    short = replica_capacity_rps(H100_8B, 500.0, 100.0, 0.5, 0.05)
    assert replica_capacity_rps(H100_8B, 500.0, 400.0, 0.5, 0.05) < short
    assert replica_capacity_rps(H100_8B, 4000.0, 100.0, 0.5, 0.05) < short


def test_faster_hardware_serves_more() -> None:
    a100 = replica_capacity_rps(replica_profile("llama-3.1-8b", "a100-80gb"), 1000.0, 200.0, 0.5, 0.05)
    assert 0 < a100 < replica_capacity_rps(H100_8B, 1000.0, 200.0, 0.5, 0.05)


@pytest.mark.parametrize(
    ("i", "o", "ttft", "itl"),
    [(-1.0, 10.0, 1.0, 0.05), (10.0, 0.0, 1.0, 0.05), (math.nan, 10.0, 1.0, 0.05), (10.0, 10.0, 0.0, 0.05),
     (10.0, 10.0, 1.0, -0.05), (10.0, 10.0, math.inf, None)],
)  # fmt: skip
def test_bad_input_is_rejected(i: float, o: float, ttft: float | None, itl: float | None) -> None:
    with pytest.raises(PerfError, match="must be"):
        replica_capacity_rps(H100_8B, i, o, ttft, itl)


def test_max_concurrency_counts_full_length_sequences_in_blocks() -> None:
    assert max_concurrency(H100_8B, 1000, 1000) == H100_8B.kv_capacity_tokens // 2000
    assert max_concurrency(H100_8B, 1, 1) == H100_8B.max_num_seqs
    assert max_concurrency(H100_8B, 10, 10) == min(1024, H100_8B.kv_capacity_tokens // 32)


@settings(max_examples=60)
@given(
    i=st.integers(1, 20_000),
    o=st.integers(1, 4_000),
    ttft=st.floats(0.05, 10.0),
    itl=st.floats(0.005, 0.2),
    gpu=st.sampled_from(["h100-80gb", "a100-80gb", "l40s-48gb"]),
)
def test_operating_point_respects_slos_limits_and_monotonicity(
    i: int, o: int, ttft: float, itl: float, gpu: str
) -> None:
    p = replica_profile("llama-3.1-8b", gpu)
    op = operating_point(p, float(i), float(o), ttft, itl)
    assert op.batch <= p.max_num_seqs
    # Full-length sequences keep 10% of the KV cache free (vLLM preempts on growth).
    assert op.batch * (i + o) <= 0.9 * p.kv_capacity_tokens * (1 + 1e-9)
    if op.rate_rps > 0:
        assert (o <= 1 or op.itl <= itl * (1 + 1e-9)) and op.ttft_p95 <= ttft * (1 + 1e-9)
    looser = replica_capacity_rps(p, float(i), float(o), ttft * 2, itl * 2)
    assert looser >= op.rate_rps * (1 - 1e-9)


def test_capacity_orders_gpus_by_capability() -> None:
    def rps(gpu: str) -> float:
        return replica_capacity_rps(replica_profile("llama-3.1-8b", gpu), 1000.0, 200.0, 0.5, 0.05)

    assert rps("l40s-48gb") < rps("a100-80gb") < rps("h100-80gb") < rps("h200-141gb")
