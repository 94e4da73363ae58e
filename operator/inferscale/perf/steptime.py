"""Engine step time: t = c0 + c_prefill·prefill_tokens + c_decode·decode_seqs + c_kv·context_tokens (seconds).

Coefficients come from the BLIS blackbox fits of vLLM v0.8.4 where published (BF16, reference §2.4 item 4)
and from a roofline otherwise. The KV term is the same for both:

c_kv = K_KV · kv_bytes_per_token / (TP · HBM bandwidth): each context token's KV bytes (as stored: BF16 by
default, FP8 with `--kv-cache-dtype fp8`) are read once per step at 1/K_KV of the GPU's peak bandwidth.
K_KV = 1.3 is fitted, not guessed: it minimises the RMS error of every below-saturation calibration row
(NIM 8B and 70B, TRT-LLM 8B peaks; `calibration.py`) with the measured engines' own precision, FP8 weights
and FP8 KV (RMS 7.0%; 1.0, the bandwidth floor, gives 11.6%, BLIS trained-physics' 1.95 gives 14.9%: NIM's
ITL slope alone fits 1.0, TRT-LLM's long-decode peaks 1.2-1.5). Until 2026-12-05 it was 0.55 per BF16
byte, fitted to the same NIM sweep against a BF16 replica: that read the KV cache at 1.8x the HBM
bandwidth, and made long contexts cheaper than any engine serves them (4,000 in / 400 out on an 8B H100
replica at 500 ms / 50 ms: 6.86 req/s then, 5.05 now).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from inferscale.perf.catalog import GPUSpec, ModelSpec, gpu_spec

K_KV = 1.3

# BLIS trained-physics coefficients (reference §2.4 item 4), used by the roofline:
K_WEIGHTS = 1.3625  # β3: weight-read time multiplier over bytes / bandwidth
PER_LAYER_S = 32.1e-6  # β5: per-layer kernel overhead
PER_STEP_S = 126e-6  # β7: per-step scheduler overhead
PER_SEQ_S = 4.42e-6  # β6: per running request
# Two all-reduces per layer when TP > 1; 8 µs per small-message NVLink all-reduce is an ASSUMPTION
# (NCCL latency-bound regime), chosen so that the 8B TP2 roofline stays on the slow side of TP1.
ALLREDUCE_S = 8e-6


@dataclass(frozen=True)
class StepCoefficients:
    c0: float  # seconds per step
    c_prefill: float  # seconds per prefill (uncached prompt) token in the step
    c_decode: float  # seconds per decoding sequence in the step
    c_kv: float  # seconds per context token held by the step's sequences
    source: str  # "measured: BLIS ..." or "roofline"

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.c0 + self.c_prefill * prefill_tokens + self.c_decode * decode_seqs + self.c_kv * context_tokens


# (model, gpu, tp) -> (c0 s, c_prefill s/token, c_decode s/seq), BLIS blackbox fits on vLLM v0.8.4, BF16
# (inference-sim commit 7adbe0e, sim/simulator.go). The 70B fits are of Llama-3.3-70B (same architecture).
_MEASURED: dict[tuple[str, str, int], tuple[float, float, float]] = {
    ("llama-3.1-8b", "h100-80gb", 1): (5752.7e-6, 17.25e-6, 6.00e-6),
    ("llama-3.1-8b", "a100-80gb", 1): (16441.5e-6, 47.84e-6, 18.21e-6),
    ("llama-3.1-8b", "h100-80gb", 2): (6910.4e-6, 17.67e-6, 2.84e-6),
    ("llama-3.1-70b", "h100-80gb", 4): (12601.3e-6, 76.42e-6, 66.84e-6),
    ("llama-3.1-70b", "h100-80gb", 8): (14140.8e-6, 10.03e-6, 19.40e-6),
}


def prefill_floor(model: ModelSpec, gpu: GPUSpec, tp: int) -> float:
    """Seconds per prefill token at the GPU's BF16 dense peak: 2·params FLOPs over TP GPUs. No engine is faster."""
    return 2 * model.parameters / (tp * gpu.bf16_flops)


def _at_least_the_floor(coefficients: StepCoefficients, model: ModelSpec, gpu: GPUSpec, tp: int) -> StepCoefficients:
    """A fit whose prefill beats the GPU's peak (BLIS's 70B TP8: 178% of an H100's; 8B on an A100: 108%) is
    noise in the fit, not a fast engine; taken as is it told `plan` that TP8 serves 3x the requests per GPU of
    TP4. Such a c_prefill is raised to the peak's, and the source says so."""
    floor = prefill_floor(model, gpu, tp)
    if coefficients.c_prefill >= floor:
        return coefficients
    share = floor / coefficients.c_prefill
    return replace(
        coefficients,
        c_prefill=floor,
        source=f"{coefficients.source}; c_prefill raised to the BF16 peak's {floor * 1e6:.2f} µs/token "
        f"(the fit's {coefficients.c_prefill * 1e6:.2f} would be {share:.0%} of the peak)",
    )


def kv_coefficient(kv_bytes_per_token: int, gpu: GPUSpec, tp: int) -> float:
    return K_KV * kv_bytes_per_token / (tp * gpu.hbm_bandwidth)


def roofline_coefficients(
    model: ModelSpec, gpu: GPUSpec, tp: int, kv_bytes_per_token: int, weight_dtype: str = "bf16"
) -> StepCoefficients:
    """Decode reads every weight once per step (bandwidth-bound); prefill costs 2·params FLOPs per token at
    the GPU's prefill MFU (compute-bound). FP8 weights use the FP8 peak where the GPU has one."""
    weights_per_gpu = model.weight_bytes(weight_dtype) / tp
    allreduce = 2 * model.layers * ALLREDUCE_S if tp > 1 else 0.0
    c0 = K_WEIGHTS * weights_per_gpu / gpu.hbm_bandwidth + PER_LAYER_S * model.layers + PER_STEP_S + allreduce
    peak = gpu.fp8_flops if weight_dtype == "fp8" and gpu.fp8_flops is not None else gpu.bf16_flops
    c_prefill = 2 * model.parameters / (tp * peak * gpu.mfu_prefill)
    return StepCoefficients(
        c0, c_prefill, PER_SEQ_S, kv_coefficient(kv_bytes_per_token, gpu, tp), f"roofline ({weight_dtype})"
    )


def step_coefficients(
    model: ModelSpec, gpu: GPUSpec, tp: int, kv_bytes_per_token: int, weight_dtype: str = "bf16"
) -> StepCoefficients:
    """The measured fit for (model, GPU, TP) at BF16 when one exists; else a fit of the same model and TP on
    another GPU, scaled term by term by the roofline ratio of the two GPUs; else the roofline.

    Scaling keeps GPU comparisons honest: the raw roofline is 34% slower than the H100 fit, so an unscaled
    H200 would plan fewer requests per replica than the H100 it outperforms. Fits are not carried across
    models, TP sizes or precisions: there the data disagree (the 70B TP4 BF16 fit is 32% faster than NIM's
    70B TP2 FP8, which reads the same weight bytes per GPU; the roofline matches NIM within 1%)."""
    c_kv = kv_coefficient(kv_bytes_per_token, gpu, tp)
    if weight_dtype != "bf16":
        return roofline_coefficients(model, gpu, tp, kv_bytes_per_token, weight_dtype)
    fit = _MEASURED.get((model.name, gpu.name, tp))
    if fit is not None:
        c0, c_prefill, c_decode = fit
        measured = StepCoefficients(
            c0,
            c_prefill,
            c_decode,
            c_kv,
            f"measured: BLIS blackbox fit, vLLM v0.8.4 BF16, {model.name} {gpu.name} TP{tp}; c_kv fitted (K_KV)",
        )
        return _at_least_the_floor(measured, model, gpu, tp)
    anchors = [gpu_spec(g) for (m, g, t) in _MEASURED if m == model.name and t == tp]
    if not anchors:
        return roofline_coefficients(model, gpu, tp, kv_bytes_per_token)
    anchor = min(anchors, key=lambda a: abs(math.log(a.hbm_bandwidth / gpu.hbm_bandwidth)))
    c0, c_prefill, c_decode = _MEASURED[(model.name, anchor.name, tp)]
    c_prefill = max(c_prefill, prefill_floor(model, anchor, tp))  # scaled from a fit that beats its own peak
    target = roofline_coefficients(model, gpu, tp, kv_bytes_per_token)
    base = roofline_coefficients(model, anchor, tp, kv_bytes_per_token)
    step_ratio = target.c0 / base.c0
    scaled = StepCoefficients(
        c0 * step_ratio,
        c_prefill * target.c_prefill / base.c_prefill,
        c_decode * step_ratio,
        c_kv,
        f"scaled: BLIS fit {model.name} {anchor.name} TP{tp} x roofline ratio {gpu.name}/{anchor.name}",
    )
    return _at_least_the_floor(scaled, model, gpu, tp)


def measured_fits() -> list[tuple[str, str, int]]:
    return sorted(_MEASURED)
