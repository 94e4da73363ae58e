"""Where a replica's GPU memory goes, and how many KV-cache tokens remain.

Assumptions (vLLM V1 semantics):
- vLLM may use `gpu_memory_utilization` x total memory on each GPU.
- Weights are split evenly over the TP ranks (column/row-parallel layers and vocab-parallel embeddings).
- Per-GPU reserve = 1 GiB fixed (CUDA graphs, NCCL buffers, non-torch allocations: vLLM logs show
  0.5-1.5 GiB) + the activation peak of the profiling forward pass: max_num_batched_tokens x
  (hidden + 2 x intermediate / TP) BF16 values, twice (input and output of the widest layer live at once),
  + the sampler's FP32 logits for max_num_seqs rows. For Llama-3.1-8B on an H100 this gives 2.6 GiB,
  inside the 2-4 GB the reference quotes.
- KV is stored in BF16 (vLLM's `kv_cache_dtype=auto` for BF16 models) unless `kv_dtype` says otherwise;
  each GPU holds kv_heads / TP heads per layer, so per-GPU bytes per token = total / TP.
- Capacity is a whole number of blocks of `block_size` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferscale.perf.catalog import GiB, GPUSpec, ModelSpec, dtype_bytes
from inferscale.perf.errors import DoesNotFit, InvalidParallelism, PerfError

FIXED_RESERVE_BYTES = 1 * GiB


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU bytes; `kv_capacity_tokens` is for the whole replica (all TP ranks together)."""

    total: int
    usable: int
    weights: int
    reserve: int
    kv: int
    kv_bytes_per_token: int  # whole replica, all layers and heads
    kv_capacity_tokens: int


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> int:
    return 2 * model.layers * model.kv_heads * model.head_dim * dtype_bytes(kv_dtype)


def valid_tp(model: ModelSpec) -> list[int]:
    """Tensor-parallel sizes the model splits over evenly: each GPU holds whole KV and attention heads."""
    return [d for d in range(1, model.kv_heads + 1) if model.kv_heads % d == 0 and model.attention_heads % d == 0]


def check_tp(model: ModelSpec, tp: int) -> None:
    if tp < 1:
        raise InvalidParallelism(f"tensor parallelism must be at least 1, got {tp}")
    if tp not in valid_tp(model):
        raise InvalidParallelism(
            f"tensor parallelism {tp} does not divide {model.name}'s {model.kv_heads} KV heads and "
            f"{model.attention_heads} attention heads; valid: {', '.join(map(str, valid_tp(model)))}"
        )


def activation_reserve(model: ModelSpec, tp: int, max_num_seqs: int, max_num_batched_tokens: int) -> int:
    widest = model.hidden_size + 2 * model.intermediate_size // tp
    return FIXED_RESERVE_BYTES + max_num_batched_tokens * widest * 2 * 2 + max_num_seqs * model.vocab_size * 4


def memory_breakdown(
    model: ModelSpec,
    gpu: GPUSpec,
    tp: int,
    gpu_memory_utilization: float,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    block_size: int = 16,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> MemoryBreakdown:
    check_tp(model, tp)
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise PerfError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    usable = int(gpu.memory_bytes * gpu_memory_utilization)
    weights = _weights_per_gpu(model, tp, weight_dtype)
    reserve = activation_reserve(model, tp, max_num_seqs, max_num_batched_tokens)
    kv = usable - weights - reserve
    if kv <= 0:
        fixed = activation_reserve(model, tp, 1, 1)
        # the reserve grows with the batch limits: where they, not the weights, fill the GPU, say so
        remedy = "raise TP or use a larger GPU"
        if weights + fixed < usable:
            remedy = f"lower max_num_batched_tokens or max_num_seqs, {remedy}"
        raise DoesNotFit(
            f"{model.name} {weight_dtype} weights ({weights / GiB:.1f} GiB per GPU at TP {tp}) plus "
            f"{reserve / GiB:.1f} GiB reserve (activations at max_num_seqs {max_num_seqs} and "
            f"max_num_batched_tokens {max_num_batched_tokens}) exceed the {usable / GiB:.1f} GiB usable on "
            f"{gpu.name} at gpu_memory_utilization {gpu_memory_utilization}; {remedy}"
        )
    per_token = kv_bytes_per_token(model, kv_dtype)
    per_gpu_token = per_token // tp
    blocks = kv // (per_gpu_token * block_size)
    return MemoryBreakdown(gpu.memory_bytes, usable, weights, reserve, kv, per_token, blocks * block_size)


def _weights_per_gpu(model: ModelSpec, tp: int, weight_dtype: str) -> int:
    return -(-model.weight_bytes(weight_dtype) // tp)


def utilization_for(
    model: ModelSpec,
    gpu: GPUSpec,
    tp: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    kv_tokens: int,
    block_size: int = 16,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> float:
    """The smallest gpu_memory_utilization, in hundredths, whose KV cache holds `kv_tokens` (at least one
    block); above 1 when no utilization does on this GPU."""
    blocks = max(1, math.ceil(kv_tokens / block_size))
    need = (
        _weights_per_gpu(model, tp, weight_dtype)
        + activation_reserve(model, tp, max_num_seqs, max_num_batched_tokens)
        + blocks * block_size * (kv_bytes_per_token(model, kv_dtype) // tp)
    )
    # Rounded up, so that the value suggested is enough rather than nearly; hundredths, as people write the flag.
    return math.ceil(need * 100 / gpu.memory_bytes) / 100
