import pytest

from inferscale.perf import PerfError, StepCoefficients, gpu_spec, model_spec, replica_profile
from inferscale.perf.steptime import prefill_floor, roofline_coefficients


def test_step_time_is_the_linear_model() -> None:
    s = StepCoefficients(c0=0.005, c_prefill=2e-5, c_decode=6e-6, c_kv=2e-8, source="test")
    assert s.step_time(0, 0, 0) == pytest.approx(0.005)
    assert s.step_time(100, 10, 1000) == pytest.approx(0.005 + 100 * 2e-5 + 10 * 6e-6 + 1000 * 2e-8)


def test_measured_fit_is_used_where_published() -> None:
    step = replica_profile("llama-3.1-8b", "h100-80gb").step
    assert step.source.startswith("measured: BLIS")
    assert (step.c0, step.c_prefill, step.c_decode) == pytest.approx((5.7527e-3, 17.25e-6, 6.0e-6))
    assert replica_profile("llama-3.1-70b", "h100-80gb", 8).step.source.startswith("measured: BLIS")


def test_roofline_is_used_without_a_fit_of_the_same_model_and_tp() -> None:
    assert replica_profile("qwen3-32b", "h100-80gb").step.source == "roofline (bf16)"
    assert replica_profile("llama-3.1-70b", "h200-141gb", 2).step.source == "roofline (bf16)"
    assert replica_profile("llama-3.1-8b", "h100-80gb", weight_dtype="fp8").step.source == "roofline (fp8)"


def test_other_gpus_scale_the_fit_of_the_nearest_bandwidth_gpu() -> None:
    h100, a100 = replica_profile("llama-3.1-8b", "h100-80gb").step, replica_profile("llama-3.1-8b", "a100-80gb").step
    h200, l40s = replica_profile("llama-3.1-8b", "h200-141gb").step, replica_profile("llama-3.1-8b", "l40s-48gb").step
    assert h200.source.startswith("scaled: BLIS fit llama-3.1-8b h100-80gb TP1")
    assert l40s.source.startswith("scaled: BLIS fit llama-3.1-8b a100-80gb TP1")
    # Same compute as the H100, 43% more bandwidth: same prefill cost, faster decode step.
    assert h200.c_prefill == pytest.approx(h100.c_prefill) and h200.c0 < h100.c0
    assert l40s.c0 > a100.c0


@pytest.mark.parametrize(
    ("model", "gpu", "tp", "weights", "kv"),
    [
        (m, g, t, w, k)
        for m in ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b")
        for g in ("h100-80gb", "a100-80gb", "l40s-48gb")
        for t in (1, 2, 4)
        for w in ("bf16", "fp8")
        for k in ("bf16", "fp8")
    ],
)
def test_no_step_reads_the_kv_cache_faster_than_the_gpus_bandwidth(
    model: str, gpu: str, tp: int, weights: str, kv: str
) -> None:
    # K_KV was 0.55 per BF16 byte until 2026-12-05: each context token's KV read at 1.8x the HBM bandwidth
    try:
        profile = replica_profile(model, gpu, tp, weight_dtype=weights, kv_dtype=kv)
    except PerfError:
        return  # the model does not fit these GPUs at this TP
    bytes_per_gpu = profile.kv_bytes_per_token / tp
    assert profile.step.c_kv >= bytes_per_gpu / gpu_spec(gpu).hbm_bandwidth


def test_an_fp8_kv_cache_halves_the_read_and_doubles_the_tokens() -> None:
    bf16 = replica_profile("llama-3.1-8b", "h100-80gb")
    fp8 = replica_profile("llama-3.1-8b", "h100-80gb", kv_dtype="fp8")
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert fp8.step.c_kv == pytest.approx(bf16.step.c_kv / 2)
    assert fp8.kv_capacity_tokens == pytest.approx(2 * bf16.kv_capacity_tokens, abs=16)
    assert (fp8.step.c0, fp8.step.c_prefill) == (bf16.step.c0, bf16.step.c_prefill)


def test_roofline_scales_with_bandwidth_precision_and_tp() -> None:
    m, kvb = model_spec("llama-3.1-8b"), 131072
    h100 = roofline_coefficients(m, gpu_spec("h100-80gb"), 1, kvb)
    h200 = roofline_coefficients(m, gpu_spec("h200-141gb"), 1, kvb)
    fp8 = roofline_coefficients(m, gpu_spec("h100-80gb"), 1, kvb, "fp8")
    tp2 = roofline_coefficients(m, gpu_spec("h100-80gb"), 2, kvb)
    assert h200.c0 < h100.c0 and h200.c_kv < h100.c_kv
    assert fp8.c0 < h100.c0 and fp8.c_prefill < h100.c_prefill
    assert tp2.c0 < h100.c0 and tp2.c_prefill == pytest.approx(h100.c_prefill / 2)


@pytest.mark.parametrize(
    ("model", "gpu", "tp"),
    [
        (m, g, t)
        for m in ("llama-3.1-8b", "llama-3.1-70b")
        for g in ("h100-80gb", "a100-80gb", "h200-141gb")
        for t in (1, 2, 4, 8)
    ],
)
def test_no_step_prefills_faster_than_the_gpus_bf16_peak(model: str, gpu: str, tp: int) -> None:
    # BLIS's 70B TP8 fit reads 178% of an H100's peak, its 8B A100 fit 108%: noise in a fit, not an engine
    try:
        profile = replica_profile(model, gpu, tp)
    except PerfError:
        return  # the model does not fit these GPUs at this TP
    floor = prefill_floor(model_spec(model), gpu_spec(gpu), tp)
    assert profile.step.c_prefill >= floor * (1 - 1e-12)


def test_a_fit_raised_to_the_peak_says_so() -> None:
    step = replica_profile("llama-3.1-70b", "h100-80gb", 8).step
    spec, h100 = model_spec("llama-3.1-70b"), gpu_spec("h100-80gb")
    assert step.c_prefill == pytest.approx(2 * spec.parameters / (8 * h100.bf16_flops))
    assert "c_prefill raised to the BF16 peak's" in step.source and "178% of the peak" in step.source
