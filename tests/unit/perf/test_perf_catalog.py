import pytest

from inferscale.perf import UnknownGPU, UnknownModel, gpu_spec, kv_bytes_per_token, model_spec
from inferscale.perf.catalog import dtype_bytes, vllm_batch_defaults
from inferscale.perf.errors import PerfError


@pytest.mark.parametrize(
    ("name", "kv_bytes"),
    [("llama-3.1-8b", 131072), ("llama-3.1-70b", 327680), ("qwen3-32b", 262144), ("qwen3-8b", 147456)],
)
def test_kv_bytes_per_token_matches_the_reference_table(name: str, kv_bytes: int) -> None:
    assert kv_bytes_per_token(model_spec(name)) == kv_bytes
    assert kv_bytes_per_token(model_spec(name), "fp8") == kv_bytes // 2


def test_lookups_are_case_insensitive_and_accept_aliases() -> None:
    assert model_spec("Llama-3.1-8B").name == "llama-3.1-8b"
    assert model_spec("meta-llama/Llama-3.3-70B-Instruct").name == "llama-3.1-70b"
    assert gpu_spec("H100").name == "h100-80gb"
    assert gpu_spec(" L40S-48GB ").name == "l40s-48gb"


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownModel, match=r"unknown model 'gpt-5'.*llama-3.1-8b.*qwen3-32b"):
        model_spec("gpt-5")
    with pytest.raises(UnknownGPU, match=r"unknown GPU 'v100'.*a100-80gb.*h100-80gb"):
        gpu_spec("v100")
    with pytest.raises(PerfError, match="known dtypes: bf16, fp16, fp8"):
        dtype_bytes("int4")


def test_weight_bytes_follow_parameters_and_dtype() -> None:
    m = model_spec("llama-3.1-8b")
    assert m.weight_bytes("bf16") == pytest.approx(16.06e9)
    assert m.weight_bytes("fp8") * 2 == m.weight_bytes("bf16")


@pytest.mark.parametrize(
    ("gpu", "seqs", "tokens"),
    [("h100-80gb", 1024, 8192), ("h200-141gb", 1024, 8192), ("a100-80gb", 256, 2048), ("l40s-48gb", 256, 2048)],
)
def test_vllm_batch_defaults_follow_gpu_class(gpu: str, seqs: int, tokens: int) -> None:
    assert vllm_batch_defaults(gpu_spec(gpu)) == (seqs, tokens)


@pytest.mark.parametrize(
    ("name", "context"),
    [("llama-3.1-8b", 131072), ("llama-3.1-70b", 131072), ("qwen3-32b", 40960), ("qwen3-8b", 40960)],
)
def test_context_windows_are_config_json_max_position_embeddings(name: str, context: int) -> None:
    assert model_spec(name).context_tokens == context
