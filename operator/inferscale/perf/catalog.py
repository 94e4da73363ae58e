"""Model and GPU constants the perf model needs, each with its source.

Model architecture numbers are the `config.json` fields of the Hugging Face checkpoints
(num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim or hidden_size/heads,
hidden_size, intermediate_size, vocab_size); cross-checked against the KV table in
`reference/serving-metrics-and-perf.md` §2.1. Parameter counts are the safetensors totals shown on
the model cards. Context windows are config.json's max_position_embeddings: the longest request
(prompt + output) vLLM serves by default (it refuses a larger max_model_len without an override).
"""

from __future__ import annotations

from dataclasses import dataclass

from inferscale.perf.errors import PerfError, UnknownGPU, UnknownModel

GiB = 1024**3
MiB = 1024**2

# Bytes per stored element. FP8 weights keep embeddings and norms in BF16 in practice; counting every
# parameter at one byte understates FP8 weights by ~1-3% (assumption, accepted).
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    parameters: float  # total parameter count
    context_tokens: int  # longest request, prompt + output (max_position_embeddings)

    def weight_bytes(self, dtype: str = "bf16") -> int:
        return int(self.parameters * dtype_bytes(dtype))


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_bytes: int  # total device memory as the driver reports it (what gpu_memory_utilization scales)
    hbm_bandwidth: float  # bytes/s, datasheet peak
    bf16_flops: float  # dense FLOP/s, datasheet peak
    fp8_flops: float | None  # dense FLOP/s; None when the GPU has no FP8 tensor cores
    mfu_prefill: float  # achieved fraction of peak FLOPs in prefill (BLIS hardware_config.json)
    mfu_decode: float  # achieved fraction in decode (BLIS); kept for reference, decode uses bandwidth
    price_per_hour: float  # USD per GPU-hour: ASSUMPTION, a round on-demand figure; override with --gpu-price


_MODELS: dict[str, ModelSpec] = {
    # meta-llama/Llama-3.1-8B-Instruct config.json; 8.03 B parameters (model card); context 131072
    # (max_position_embeddings).
    "llama-3.1-8b": ModelSpec("llama-3.1-8b", 32, 32, 8, 128, 4096, 14336, 128256, 8.03e9, 131072),
    # meta-llama/Llama-3.1-70B-Instruct config.json (3.3-70B shares the architecture); 70.6 B parameters;
    # context 131072 (max_position_embeddings).
    "llama-3.1-70b": ModelSpec("llama-3.1-70b", 80, 64, 8, 128, 8192, 28672, 128256, 70.6e9, 131072),
    # Qwen/Qwen3-32B config.json (64 layers, 64 q heads, 8 kv heads, head_dim 128); 32.8 B parameters;
    # context 40960, config.json's max_position_embeddings (the model card says 32,768 native and 131,072
    # with YaRN rope scaling, which a deployment must switch on: the config.json figure is what vLLM uses).
    "qwen3-32b": ModelSpec("qwen3-32b", 64, 64, 8, 128, 5120, 25600, 151936, 32.8e9, 40960),
    # Qwen/Qwen3-8B config.json (36 layers, 32 q heads, 8 kv heads, head_dim 128); 8.2 B parameters;
    # context 40960 (max_position_embeddings; same card figures as Qwen3-32B).
    "qwen3-8b": ModelSpec("qwen3-8b", 36, 32, 8, 128, 4096, 12288, 151936, 8.2e9, 40960),
}
_MODEL_ALIASES = {
    "llama-3.3-70b": "llama-3.1-70b",
    "meta-llama/llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama/llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama/llama-3.3-70b-instruct": "llama-3.1-70b",
    "qwen/qwen3-32b": "qwen3-32b",
    "qwen/qwen3-8b": "qwen3-8b",
}

_GPUS: dict[str, GPUSpec] = {
    # A100-SXM4-80GB: nvidia-smi total 81920 MiB; 2.039 TB/s; 312 TFLOPS BF16 dense; no FP8
    # (NVIDIA A100 datasheet). MFU 0.38 / 0.18 from BLIS hardware_config.json.
    "a100-80gb": GPUSpec("a100-80gb", 81920 * MiB, 2.039e12, 312e12, None, 0.38, 0.18, 2.50),
    # H100-SXM5-80GB: nvidia-smi total 81559 MiB; 3.35 TB/s; 989.5 TFLOPS BF16, 1979 FP8 dense
    # (NVIDIA H100 datasheet, BLIS hardware_config.json). MFU 0.45 / 0.30 (BLIS).
    "h100-80gb": GPUSpec("h100-80gb", 81559 * MiB, 3.35e12, 989.5e12, 1979e12, 0.45, 0.30, 4.00),
    # H200-SXM-141GB: nvidia-smi total 143771 MiB; 4.8 TB/s; same compute as H100 (NVIDIA H200
    # datasheet). MFU: BLIS has no H200 entry; H100's values are assumed.
    "h200-141gb": GPUSpec("h200-141gb", 143771 * MiB, 4.8e12, 989.5e12, 1979e12, 0.45, 0.30, 5.00),
    # L40S-48GB: nvidia-smi total 46068 MiB; 0.864 TB/s GDDR6; 362.05 TFLOPS BF16, 733 FP8 dense
    # (NVIDIA L40S datasheet; BLIS lists 1466 FP8, the sparse figure). MFU 0.32 / 0.08 (BLIS).
    "l40s-48gb": GPUSpec("l40s-48gb", 46068 * MiB, 0.864e12, 362.05e12, 733e12, 0.32, 0.08, 1.50),
}
_GPU_ALIASES = {"a100": "a100-80gb", "h100": "h100-80gb", "h200": "h200-141gb", "l40s": "l40s-48gb"}


def known_models() -> list[str]:
    return sorted(_MODELS)


def known_gpus() -> list[str]:
    return sorted(_GPUS)


def model_names() -> list[str]:
    """Every name `model_spec` takes (lowercase, trimmed): the catalog's and their aliases."""
    return sorted({*_MODELS, *_MODEL_ALIASES})


def gpu_names() -> list[str]:
    """Every name `gpu_spec` takes (lowercase, trimmed)."""
    return sorted({*_GPUS, *_GPU_ALIASES})


def model_spec(name: str) -> ModelSpec:
    key = name.strip().lower()
    key = _MODEL_ALIASES.get(key, key)
    if key not in _MODELS:
        raise UnknownModel(f"unknown model {name!r}; known models: {', '.join(known_models())}")
    return _MODELS[key]


def gpu_spec(name: str) -> GPUSpec:
    key = name.strip().lower()
    key = _GPU_ALIASES.get(key, key)
    if key not in _GPUS:
        raise UnknownGPU(f"unknown GPU {name!r}; known GPUs: {', '.join(known_gpus())}")
    return _GPUS[key]


def dtype_bytes(dtype: str) -> int:
    key = dtype.strip().lower()
    if key not in DTYPE_BYTES:
        raise PerfError(f"unknown dtype {dtype!r}; known dtypes: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def vllm_batch_defaults(gpu: GPUSpec) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) of the vLLM OpenAI server for this GPU.

    vllm/engine/arg_utils.py get_batch_defaults: GPUs with >= 70 GiB that are not an A100 get 1024 / 8192,
    the rest 256 / 2048 (PR #17885: a large token budget lowers A100 throughput).
    """
    if gpu.memory_bytes >= 70 * GiB and not gpu.name.startswith("a100"):
        return 1024, 8192
    return 256, 2048
