"""One replica of a model on a GPU type: memory, batch limits and step-time coefficients."""

from __future__ import annotations

from dataclasses import dataclass

from inferscale.perf.catalog import gpu_spec, model_spec, vllm_batch_defaults
from inferscale.perf.memory import MemoryBreakdown, check_tp, memory_breakdown
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


def replica_memory(
    model: str, gpu: str, tp: int = 1, gpu_memory_utilization: float = 0.9, weight_dtype: str = "bf16"
) -> MemoryBreakdown:
    """Per-GPU memory breakdown of one replica (raises UnknownModel, UnknownGPU, InvalidParallelism,
    DoesNotFit, PerfError)."""
    m, g = model_spec(model), gpu_spec(gpu)
    check_tp(m, tp)
    seqs, tokens = vllm_batch_defaults(g)
    return memory_breakdown(m, g, tp, gpu_memory_utilization, seqs, tokens, BLOCK_SIZE, weight_dtype)


def replica_profile(
    model: str, gpu: str, tp: int = 1, gpu_memory_utilization: float = 0.9, weight_dtype: str = "bf16"
) -> ReplicaProfile:
    m, g = model_spec(model), gpu_spec(gpu)
    mem = replica_memory(model, gpu, tp, gpu_memory_utilization, weight_dtype)
    seqs, tokens = vllm_batch_defaults(g)
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
    )
