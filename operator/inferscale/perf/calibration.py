"""The perf model against published measurements (reference/serving-metrics-and-perf.md §2.3, §2.4).

Precision: NIM and TRT-LLM ran FP8 engines, so every row compares them with a replica of the same
precision: FP8 weights (the roofline; the BLIS fits are BF16 only) and an FP8 KV cache (an ASSUMPTION:
TRT-LLM's FP8 recipes quantise the KV cache too; the published pages do not say). Until 2026-12-05 the
8B rows used the BF16 replica the operator plans by default and absorbed the precision gap into K_KV
(`steptime.py`), which then read BF16 KV faster than the GPU's bandwidth allows.

Closed-loop benchmarks (a fixed concurrency N, each user sending the next request when one finishes):
a request's decode steps carry N sequences, the other N−1 users' prompts spread over the O steps
((N−1)·I/O prefill tokens per step) and N·(I + O/2) context tokens; TTFT is one step carrying the own
prompt; throughput = N·O / (TTFT + ITL·(O−1)). Queueing beyond the engine's batch limit is not modelled
here, so rows past the measured saturation point are reported but not held to the tolerance. The TTFT rows at
N = 1 compare the capacity model's own idle TTFT (`slo_floor`, what `plan` reports and sizes with), not a
formula of this module, so the tolerance holds for the figure users see. That TTFT is the engine's
(what vLLM's TTFT histogram and the SLO measure); the benchmarks' clients also time HTTP, tokenising and
streaming the first chunk, which weighs most on a short prompt: the 8B's 200-token TTFT reads 22% low, the
70B's 5,000-token one 2% high.
"""

from __future__ import annotations

from dataclasses import dataclass

from inferscale.perf.capacity import slo_floor
from inferscale.perf.catalog import gpu_spec, model_spec
from inferscale.perf.errors import PerfError
from inferscale.perf.profile import ReplicaProfile, replica_profile
from inferscale.perf.steptime import roofline_coefficients, step_coefficients

# NIM 1.8.0 Llama-3.1-8B-Instruct: concurrency -> (TTFT ms, ITL ms, output tok/s). H100 FP8 TP1 [derived],
# ISL/OSL 200/200 [derived: the table's own columns solve to O ≈ 183].
NIM_8B = {
    1: (10.26, 4.63, 214.56),
    5: (16.81, 4.58, 1076.88),
    25: (36.34, 5.19, 4678.88),
    50: (67.41, 5.91, 8018.23),
    100: (119.97, 7.57, 12214.97),
    150: (346.53, 9.81, 12988.89),
    200: (465.18, 12.65, 13348.4),
    250: (605.6, 16.14, 12964.72),
}
NIM_8B_LENGTHS = (200, 200)
# NIM 1.8.0 Llama-3.3-70B-Instruct, 2×H100 FP8 TP2, ISL/OSL 5000/500, below saturation.
NIM_70B_TP2 = {1: (406.77, 18.58, 51.67), 5: (546.7, 21.83, 218.48), 25: (688.69, 38.75, 623.4)}
NIM_70B_LENGTHS = (5000, 500)
# TRT-LLM perf-overview, Llama 3.1 8B FP8 TP1, H100, peak output tok/s at infinite request rate.
TRTLLM_8B_H100 = {
    (128, 128): 28312,
    (128, 2048): 22714,
    (500, 2000): 17660,
    (1000, 1000): 15220,
    (1000, 2000): 13899,
    (2048, 128): 3450,
    (2048, 2048): 9305,
    (5000, 500): 3459,
}


@dataclass(frozen=True)
class CalibrationRow:
    case: str
    measured: float
    model: float
    unit: str

    @property
    def error_percent(self) -> float:
        return 100.0 * (self.model - self.measured) / self.measured


def closed_loop_itl(profile: ReplicaProfile, concurrency: int, input_tokens: int, output_tokens: int) -> float:
    n, i, o = concurrency, input_tokens, output_tokens
    return profile.step.step_time(round((n - 1) * i / o), n, round(n * (i + o / 2)))


def closed_loop_ttft(profile: ReplicaProfile, concurrency: int, input_tokens: int, output_tokens: int) -> float:
    itl = closed_loop_itl(profile, concurrency, input_tokens, output_tokens)
    return itl + profile.step.c_prefill * input_tokens


def closed_loop_tokens_per_s(profile: ReplicaProfile, concurrency: int, input_tokens: int, output_tokens: int) -> float:
    ttft = closed_loop_ttft(profile, concurrency, input_tokens, output_tokens)
    itl = closed_loop_itl(profile, concurrency, input_tokens, output_tokens)
    return concurrency * output_tokens / (ttft + itl * (output_tokens - 1))


def _planned_idle_ttft(profile: ReplicaProfile, input_tokens: int, output_tokens: int) -> float:
    """The TTFT `plan` and the capacity model give an idle replica (`slo_floor`), the figure a user's SLO meets."""
    floor = slo_floor(profile, input_tokens, output_tokens)
    if floor is None:
        raise PerfError(f"{profile.model}: {input_tokens} in / {output_tokens} out fits no replica")
    return floor[0]


def fp8_profile(model: str, tp: int) -> ReplicaProfile:
    """A replica at the measured engines' precision, on their H100s: FP8 weights and KV cache."""
    return replica_profile(model, "h100-80gb", tp=tp, weight_dtype="fp8", kv_dtype="fp8")


def nim_8b_rows() -> list[CalibrationRow]:
    p = fp8_profile("llama-3.1-8b", 1)
    i, o = NIM_8B_LENGTHS
    rows = [CalibrationRow("NIM 8B H100 FP8 TTFT c=1", NIM_8B[1][0], 1e3 * _planned_idle_ttft(p, i, o), "ms")]
    for n, (_, itl, tps) in NIM_8B.items():
        rows.append(CalibrationRow(f"NIM 8B H100 FP8 ITL c={n}", itl, 1e3 * closed_loop_itl(p, n, i, o), "ms"))
        rows.append(CalibrationRow(f"NIM 8B H100 FP8 tok/s c={n}", tps, closed_loop_tokens_per_s(p, n, i, o), "tok/s"))
    return rows


def nim_70b_rows() -> list[CalibrationRow]:
    p = fp8_profile("llama-3.1-70b", 2)
    i, o = NIM_70B_LENGTHS
    rows = [CalibrationRow("NIM 70B 2xH100 FP8 TTFT c=1", NIM_70B_TP2[1][0], 1e3 * _planned_idle_ttft(p, i, o), "ms")]
    for n, (_, itl, tps) in NIM_70B_TP2.items():
        rows.append(CalibrationRow(f"NIM 70B 2xH100 FP8 ITL c={n}", itl, 1e3 * closed_loop_itl(p, n, i, o), "ms"))
        tps_model = closed_loop_tokens_per_s(p, n, i, o)
        rows.append(CalibrationRow(f"NIM 70B 2xH100 FP8 tok/s c={n}", tps, tps_model, "tok/s"))
    return rows


def saturated_tokens_per_s(profile: ReplicaProfile, input_tokens: int, output_tokens: int) -> float:
    """Output tok/s of an engine kept full by an infinite request rate: the batch at its limit, with KV
    filled at the mean sequence size I + O/2 (preemption allowed, as in an offline benchmark). This is the
    engine's peak, not the SLO-safe capacity of `operating_point`, which keeps KV headroom."""
    i, o = input_tokens, output_tokens
    b = min(
        profile.max_num_seqs, profile.kv_capacity_tokens / (i + o / 2), profile.max_num_batched_tokens / (1 + i / o)
    )
    return b / profile.step.step_time(round(b * i / o), round(b), round(b * (i + o / 2)))


def trtllm_8b_rows() -> list[CalibrationRow]:
    p = fp8_profile("llama-3.1-8b", 1)
    return [
        CalibrationRow(f"TRT-LLM 8B H100 FP8 peak {i}/{o}", tps, saturated_tokens_per_s(p, i, o), "tok/s")
        for (i, o), tps in TRTLLM_8B_H100.items()
    ]


def roofline_rows() -> list[CalibrationRow]:
    """Roofline c0 against the BLIS fits it replaces where no fit exists (same step, batch 1)."""
    cases = [
        ("llama-3.1-8b", "h100-80gb", 1),
        ("llama-3.1-8b", "a100-80gb", 1),
        ("llama-3.1-8b", "h100-80gb", 2),
        ("llama-3.1-70b", "h100-80gb", 4),
        ("llama-3.1-70b", "h100-80gb", 8),
    ]
    rows = []
    for model, gpu, tp in cases:
        m, g = model_spec(model), gpu_spec(gpu)
        kvb = replica_profile(model, gpu, tp).kv_bytes_per_token
        fit, roof = step_coefficients(m, g, tp, kvb), roofline_coefficients(m, g, tp, kvb)
        rows.append(CalibrationRow(f"roofline c0 vs BLIS {model} {gpu} TP{tp}", 1e3 * fit.c0, 1e3 * roof.c0, "ms"))
    return rows


def calibration_rows() -> list[CalibrationRow]:
    return nim_8b_rows() + nim_70b_rows() + trtllm_8b_rows() + roofline_rows()
