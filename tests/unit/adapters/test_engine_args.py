"""The vLLM batch limits read from a Deployment's containers."""

from __future__ import annotations

from typing import Any

import pytest

from inferscale.adapters.engine_args import engine_limits
from inferscale.api.convert import with_engine_limits
from inferscale.api.spec import ModelRef
from inferscale.perf import prefill_step, replica_profile
from inferscale.perf.chunking import UNCHUNKED


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": list(containers)}}}}


@pytest.mark.parametrize(
    ("container", "limits"),
    [
        ({"args": ["--model", "m", "--max-num-seqs", "256"]}, {"max_num_seqs": 256}),
        ({"args": ["--max-num-batched-tokens=2048"]}, {"max_num_batched_tokens": 2048}),
        (
            {"command": ["sh", "-c", "vllm serve m --max_num_seqs 64 --max-num-batched-tokens 4096"]},
            {"max_num_seqs": 64, "max_num_batched_tokens": 4096},
        ),
        ({"args": ["--max-num-seqs", "lots", "--max-num-batched-tokens", "0"]}, {}),  # vLLM's defaults then
        ({"args": ["--max-num-seqs"]}, {}),  # a flag without its value
        ({"args": ["--max-num-seqs", "²", "--max-num-batched-tokens", "-5"]}, {}),  # a digit int() refuses
        ({"args": ["--max-num-seqs=1_024"]}, {"max_num_seqs": 1024}),  # what argparse's int() reads
        ({"command": ["sh", "-c", "vllm serve 'm --max-num-seqs 8"]}, {"max_num_seqs": 8}),  # unbalanced quote
        ({"args": ["--model", "m"]}, {}),
    ],
)
def test_the_flags_are_read_in_every_spelling(container: dict[str, Any], limits: dict[str, int]) -> None:
    assert engine_limits(deployment(container)) == limits


def test_the_first_container_that_sets_a_flag_is_the_engine() -> None:
    sidecar = {"name": "proxy", "args": ["--port", "8080"]}
    engine = {"name": "vllm", "args": ["--max-num-seqs", "128"]}
    other = {"name": "late", "args": ["--max-num-seqs", "4"]}
    assert engine_limits(deployment(sidecar, engine, other)) == {"max_num_seqs": 128}
    assert engine_limits(None) == {} and engine_limits({"spec": {}}) == {}


def test_an_sglang_server_is_read_in_its_own_flags() -> None:
    launch = {"command": ["python", "-m", "sglang.launch_server", "--chunked-prefill-size", "2048"]}
    launch["args"] = ["--max-running-requests=256", "--max-num-seqs", "9"]  # a vLLM flag means nothing here
    assert engine_limits(deployment(launch), "sglang") == {"max_num_batched_tokens": 2048, "max_num_seqs": 256}
    assert engine_limits(deployment(launch)) == {"max_num_seqs": 9}


def test_the_spec_wins_and_the_args_beat_the_defaults() -> None:
    model = ModelRef(name="m", profile="llama-3.1-8b", max_num_seqs=512)
    filled = with_engine_limits(model, {"max_num_seqs": 64, "max_num_batched_tokens": 2048})
    assert (filled.max_num_seqs, filled.max_num_batched_tokens) == (512, 2048)
    assert with_engine_limits(model, {}) is model
    # without a profile there is no prior to size, and nothing to fill
    assert with_engine_limits(ModelRef(name="m"), {"max_num_seqs": 64}).max_num_seqs is None


def test_args_vllm_would_refuse_leave_the_model_as_it_is() -> None:
    model = ModelRef(name="m", profile="llama-3.1-8b")
    assert with_engine_limits(model, {"max_num_batched_tokens": 512}) is model  # below the default 1024 seats


def test_sglang_without_chunked_prefill_prefills_a_prompt_whole() -> None:
    # SGLang's --chunked-prefill-size -1 turns chunking off: not "unset", which would model 8,192-token chunks
    for flag in (["--chunked-prefill-size", "-1"], ["--chunked-prefill-size=-1"]):
        launch = {"command": ["python", "-m", "sglang.launch_server", *flag, "--max-running-requests", "64"]}
        limits = engine_limits(deployment(launch), "sglang")
        assert limits == {"max_num_seqs": 64, "max_num_batched_tokens": UNCHUNKED}
        filled = with_engine_limits(ModelRef(name="m", profile="llama-3.1-8b", gpu="h100-80gb"), limits)
        assert filled.max_num_batched_tokens == 131072  # the model's context: any prompt in one step
        # a 16,000-token prompt lands in one step beside the decodes, far over a 50 ms ITL
        step = prefill_step(
            replica_profile("llama-3.1-8b", "h100-80gb", max_num_seqs=64, max_num_batched_tokens=131072),
            16000,
            100,
            5.0,
            0.05,
        )
        assert step.chunk_tokens == 16000 and not step.within_slo
    # -1 is no vLLM value: its default budget stands
    assert engine_limits(deployment({"args": ["--max-num-batched-tokens", "-1"]})) == {}


@pytest.mark.parametrize(
    ("engine", "args", "tp"),
    [
        ("vllm", ["--tensor-parallel-size", "4"], 4),
        ("vllm", ["--tensor_parallel_size=2"], 2),
        ("vllm", ["-tp", "8"], 8),
        ("vllm", ["-tp=2"], 2),
        ("sglang", ["--tp-size", "4"], 4),
        ("sglang", ["--tensor-parallel-size=2"], 2),
        ("vllm", ["--tp-size", "4"], None),  # SGLang's flag: nothing to vLLM
    ],
)
def test_the_tensor_parallel_size_is_read_in_each_engine_s_flags(engine: str, args: list[str], tp: int | None) -> None:
    assert engine_limits(deployment({"args": ["--model", "m", *args]}), engine).get("tensor_parallel") == tp


def test_the_args_tensor_parallel_size_fills_a_spec_that_gives_none_and_not_one_that_does() -> None:
    seventy = ModelRef(name="m", profile="llama-3.1-70b", gpu="h100-80gb")
    assert with_engine_limits(seventy, {"tensor_parallel": 4}).tensor_parallel == 4
    chosen = ModelRef(name="m", profile="llama-3.1-70b", gpu="h100-80gb", tensor_parallel=8)
    assert with_engine_limits(chosen, {"tensor_parallel": 4}) is chosen  # the spec wins
    assert with_engine_limits(seventy, {"tensor_parallel": 3}) is seventy  # splits no head evenly: vLLM refuses it
