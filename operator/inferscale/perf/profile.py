"""One replica of a model on a GPU type: memory, batch limits and step-time coefficients."""

from __future__ import annotations

from dataclasses import dataclass

from inferscale.perf.catalog import GPUSpec, ModelSpec, gpu_spec, model_spec, vllm_batch_defaults
from inferscale.perf.errors import PerfError
from inferscale.perf.memory import MemoryBreakdown, check_tp, memory_breakdown, utilization_for
from inferscale.perf.steptime import StepCoefficients, step_coefficients

BLOCK_SIZE = 16  # vLLM's default KV block size


@dataclass(frozen=True)
class ReplicaProfile:
    model: str
    gpu: str
    tp: int
    gpus: int  # GPUs per replica (= tp; no pipeline or data parallelism inside a replica)
    kv_bytes_per_token: int
    kv_capacity_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    step: StepCoefficients
    gpu_memory_utilization: float = 0.9  # what the profile was built with, so it can be rebuilt with other limits
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"  # vLLM's --kv-cache-dtype: "auto" stores the model's activation dtype (BF16)


def batch_limits(
    gpu: GPUSpec, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None
) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens): vLLM's defaults for this GPU where not given. Raises
    PerfError for what vLLM itself refuses to start with."""
    default_seqs, default_tokens = vllm_batch_defaults(gpu)
    seqs = default_seqs if max_num_seqs is None else max_num_seqs
    tokens = default_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    for name, value in (("max_num_seqs", seqs), ("max_num_batched_tokens", tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PerfError(f"{name} must be a whole number >= 1, got {value!r}")
    if tokens < seqs:
        # vLLM's SchedulerConfig refuses this too: a step could not carry one token for every running sequence
        raise PerfError(
            f"max_num_batched_tokens ({tokens}) must be >= max_num_seqs ({seqs}); "
            f"vLLM's default max_num_seqs on {gpu.name} is {default_seqs}"
        )
    return seqs, tokens


def _checked_replica(
    model: str, gpu: str, tp: int, max_num_seqs: int | None, max_num_batched_tokens: int | None
) -> tuple[ModelSpec, GPUSpec, int, int]:
    """The model, the GPU and the batch limits (vLLM's defaults where None) of one replica, checked; raises as
    `replica_memory` does."""
    m, g = model_spec(model), gpu_spec(gpu)
    check_tp(m, tp)
    seqs, tokens = batch_limits(g, max_num_seqs, max_num_batched_tokens)
    return m, g, seqs, tokens


def replica_memory(
    model: str,
    gpu: str,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    weight_dtype: str = "bf16",
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_dtype: str = "bf16",
) -> MemoryBreakdown:
    """Per-GPU memory breakdown of one replica (raises UnknownModel, UnknownGPU, InvalidParallelism,
    DoesNotFit, PerfError). Batch limits left None are vLLM's defaults for the GPU."""
    m, g, seqs, tokens = _checked_replica(model, gpu, tp, max_num_seqs, max_num_batched_tokens)
    return memory_breakdown(m, g, tp, gpu_memory_utilization, seqs, tokens, BLOCK_SIZE, weight_dtype, kv_dtype)


def utilization_needed(
    model: str,
    gpu: str,
    tp: int,
    kv_tokens: int,
    weight_dtype: str = "bf16",
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_dtype: str = "bf16",
) -> float:
    """The smallest gpu_memory_utilization (hundredths) at which one replica's KV cache holds `kv_tokens`;
    above 1 when none does. Raises as `replica_memory` does for an unknown model, GPU or bad TP."""
    m, g, seqs, tokens = _checked_replica(model, gpu, tp, max_num_seqs, max_num_batched_tokens)
    return utilization_for(m, g, tp, seqs, tokens, kv_tokens, BLOCK_SIZE, weight_dtype, kv_dtype)


def replica_profile(
    model: str,
    gpu: str,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    weight_dtype: str = "bf16",
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_dtype: str = "bf16",
) -> ReplicaProfile:
    m, g = model_spec(model), gpu_spec(gpu)
    seqs, tokens = batch_limits(g, max_num_seqs, max_num_batched_tokens)
    mem = replica_memory(model, gpu, tp, gpu_memory_utilization, weight_dtype, seqs, tokens, kv_dtype)
    return ReplicaProfile(
        model=m.name,
        gpu=g.name,
        tp=tp,
        gpus=tp,
        kv_bytes_per_token=mem.kv_bytes_per_token,
        kv_capacity_tokens=mem.kv_capacity_tokens,
        max_num_seqs=seqs,
        max_num_batched_tokens=tokens,
        block_size=BLOCK_SIZE,
        step=step_coefficients(m, g, tp, mem.kv_bytes_per_token, weight_dtype),
        gpu_memory_utilization=gpu_memory_utilization,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
    )


def with_limits(profile: ReplicaProfile, max_num_seqs: int, max_num_batched_tokens: int) -> ReplicaProfile:
    """The same replica with other vLLM batch limits: they also move the KV cache (the profiling pass's
    activation reserve). Raises PerfError for limits vLLM refuses."""
    return replica_profile(
        profile.model,
        profile.gpu,
        profile.tp,
        profile.gpu_memory_utilization,
        profile.weight_dtype,
        max_num_seqs,
        max_num_batched_tokens,
        profile.kv_dtype,
    )
