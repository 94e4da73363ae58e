import pytest

from inferscale.perf import DoesNotFit, InvalidParallelism, PerfError, replica_memory, replica_profile
from inferscale.perf.catalog import GiB
from inferscale.perf.profile import utilization_needed


@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [("llama-3.1-8b", "h100-80gb", 1), ("llama-3.1-70b", "h100-80gb", 4), ("qwen3-32b", "a100-80gb", 2)],
)
def test_breakdown_adds_up_and_capacity_is_whole_blocks(model: str, gpu: str, tp: int) -> None:
    mem = replica_memory(model, gpu, tp)
    assert mem.weights + mem.reserve + mem.kv == mem.usable
    assert mem.usable == int(mem.total * 0.9)
    assert mem.kv_capacity_tokens % 16 == 0
    per_gpu_token = mem.kv_bytes_per_token // tp
    assert mem.kv_capacity_tokens * per_gpu_token <= mem.kv < (mem.kv_capacity_tokens + 16) * per_gpu_token


def test_llama_8b_on_h100_matches_the_reference_worked_example() -> None:
    # Reference §2.1: ~72 GB usable - ~16 GB weights - 2-4 GB reserve, at 128 KiB/token: roughly 400k tokens.
    mem = replica_memory("llama-3.1-8b", "h100-80gb")
    assert 2 * GiB <= mem.reserve <= 4 * GiB
    assert 400_000 <= mem.kv_capacity_tokens <= 460_000


def test_tensor_parallelism_splits_weights_and_adds_kv_room() -> None:
    one, four = replica_memory("llama-3.1-70b", "h200-141gb", 2), replica_memory("llama-3.1-70b", "h200-141gb", 8)
    assert four.weights == pytest.approx(one.weights / 4, rel=1e-6)
    assert four.kv_capacity_tokens > 4 * one.kv_capacity_tokens


def test_more_utilization_means_more_kv() -> None:
    low = replica_profile("llama-3.1-8b", "h100-80gb", gpu_memory_utilization=0.8)
    high = replica_profile("llama-3.1-8b", "h100-80gb", gpu_memory_utilization=0.95)
    assert high.kv_capacity_tokens > low.kv_capacity_tokens


def test_weights_that_do_not_fit_are_an_error_naming_the_numbers() -> None:
    with pytest.raises(DoesNotFit, match=r"llama-3.1-70b bf16 weights \(131\.5 GiB per GPU at TP 1\).*h100-80gb"):
        replica_memory("llama-3.1-70b", "h100-80gb", 1)


@pytest.mark.parametrize("tp", [3, 16, 0, -2])
def test_invalid_tensor_parallelism_is_rejected(tp: int) -> None:
    with pytest.raises(InvalidParallelism, match="tensor parallelism"):
        replica_memory("llama-3.1-8b", "h100-80gb", tp)


def test_tp_error_lists_valid_values() -> None:
    with pytest.raises(InvalidParallelism, match="valid: 1, 2, 4, 8"):
        replica_memory("llama-3.1-8b", "h100-80gb", 3)


@pytest.mark.parametrize("util", [0.0, 1.2, -0.5])
def test_utilization_outside_unit_interval_is_rejected(util: float) -> None:
    with pytest.raises(PerfError, match="gpu_memory_utilization must be in"):
        replica_memory("llama-3.1-8b", "h100-80gb", 1, util)


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "tokens"),
    [
        ("llama-3.1-8b", "h100-80gb", 1, 1),
        ("llama-3.1-8b", "h100-80gb", 1, 111_223),
        ("qwen3-32b", "h100-80gb", 2, 40_960),
    ],
)
def test_utilization_needed_is_the_least_hundredth_that_holds_the_tokens(
    model: str, gpu: str, tp: int, tokens: int
) -> None:
    enough = utilization_needed(model, gpu, tp, tokens)
    assert enough <= 1 and round(enough * 100) == pytest.approx(enough * 100)
    assert replica_memory(model, gpu, tp, enough).kv_capacity_tokens >= tokens
    try:
        short = replica_memory(model, gpu, tp, round(enough - 0.01, 2)).kv_capacity_tokens
    except DoesNotFit:
        short = 0
    assert short < tokens


def test_utilization_needed_is_above_one_when_no_utilization_will_do() -> None:
    assert utilization_needed("llama-3.1-70b", "h100-80gb", 2, 100_000) > 1
