import json
import math
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from inferscale import cli
from inferscale.commands.plan import plan as plan_command
from inferscale.perf import replica_capacity_rps, replica_profile
from inferscale.perf.capacity import slo_floor

runner = CliRunner()
# A group of its own, so `plan` is a subcommand here whatever else inferscale.cli registers.
app = typer.Typer(pretty_exceptions_enable=False)
app.callback()(lambda: None)
app.command("plan")(plan_command)
BASE = ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-80gb"]
LOAD = ["--rps", "100", "--input-tokens", "1000", "--output-tokens", "200"]


def _json(args: list[str], code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_json_sizes_the_load_from_the_perf_model() -> None:
    plan = _json([*BASE, *LOAD, "--slo-ttft", "500ms", "--slo-itl", "50ms", "--gpu-price", "3"])
    capacity = replica_capacity_rps(replica_profile("llama-3.1-8b", "h100-80gb"), 1000, 200, 0.5, 0.05)
    assert plan["kv_bytes_per_token"] == 131072
    assert plan["kv_capacity_tokens"] == replica_profile("llama-3.1-8b", "h100-80gb").kv_capacity_tokens
    assert plan["max_concurrency"] == plan["kv_capacity_tokens"] // 1200
    assert plan["replica_capacity_rps"] == pytest.approx(capacity)
    assert plan["replicas_needed"] == math.ceil(100 / capacity)
    assert plan["gpus"] == plan["replicas_needed"]
    assert plan["cost_per_hour"] == pytest.approx(3 * plan["gpus"])
    assert plan["gpu_price_source"] == "--gpu-price"


def test_tp_multiplies_gpus_and_slo_none_disables_a_bound() -> None:
    plan = _json(["plan", "--model", "llama-3.1-70b", "--gpu", "H100", "--tp", "4", *LOAD, "--slo-ttft", "none"])
    assert plan["gpus"] == 4 * plan["replicas_needed"]
    assert plan["slo_ttft"] is None and plan["slo_itl"] == 0.05


def test_without_lengths_capacity_is_unknown_not_zero() -> None:
    plan = _json(BASE)
    assert plan["kv_capacity_tokens"] > 0
    assert plan["max_concurrency"] is None and plan["replica_capacity_rps"] is None
    assert plan["replicas_needed"] is None


def test_unattainable_slo_reports_zero_capacity_and_no_replica_count() -> None:
    plan = _json([*BASE, *LOAD, "--slo-itl", "2ms"], code=1)  # the plan, and an exit a script cannot read as sized
    assert plan["replica_capacity_rps"] == 0.0 and plan["replicas_needed"] is None
    assert plan["operating_point"]["limited_by"] == "unattainable"


def test_tables_show_the_breakdown_and_the_answer() -> None:
    result = runner.invoke(app, [*BASE, *LOAD], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("weights", "KV cache", "444,304 tokens", "replicas needed", "measured: BLIS"):
        assert text in result.stdout


def test_without_slos_capacity_is_the_peak_and_ttft_unbounded() -> None:
    plan = _json([*BASE, *LOAD, "--slo-ttft", "none", "--slo-itl", "off"])
    assert plan["operating_point"]["ttft_p95"] is None
    assert plan["operating_point"]["limited_by"] in {"max_num_seqs", "kv_cache", "token_budget"}
    result = runner.invoke(app, [*BASE, *LOAD, "--slo-ttft", "none", "--slo-itl", "none"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "unbounded" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "--model", "gpt-9", "--gpu", "h100"], "unknown model 'gpt-9'; known models: llama-3.1-70b"),
        (["plan", "--model", "llama-3.1-8b", "--gpu", "tpu"], "known GPUs: a100-80gb, h100-80gb"),
        (
            [*BASE, "--tp", "3"],
            "--tp 3: tensor parallelism 3 does not divide llama-3.1-8b's 8 KV heads and 32 attention heads",
        ),
        (["plan", "--model", "llama-3.1-70b", "--gpu", "l40s"], "weights"),
        ([*BASE, *LOAD, "--slo-ttft", "fast"], "--slo-ttft: invalid duration 'fast'"),
        ([*BASE, *LOAD, "--slo-itl", "0ms"], "--slo-itl must be positive"),
        ([*BASE, "--rps", "10"], "--rps needs --input-tokens and --output-tokens"),
        ([*BASE, "--input-tokens", "10"], "give both --input-tokens and --output-tokens"),
        ([*BASE, *LOAD, "--gpu-price", "-1"], "--gpu-price must be a positive number"),
        ([*BASE, "--rps", "0", "--input-tokens", "1", "--output-tokens", "1"], "--rps must be a positive"),
        ([*BASE, "--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization must be in (0, 1], got 1.5"),
        ([*BASE, "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization must be in (0, 1], got nan"),
        ([*BASE, "--dtype", "int4"], "known: bf16, fp16, fp8"),
        (
            [
                *BASE,
                "--rps",
                "1",
                "--input-tokens",
                "100000",
                "--output-tokens",
                "100",
                "--gpu-memory-utilization",
                "0.25",
            ],
            "a request of 100,000 + 100 tokens does not fit in one replica's KV cache (20,192 tokens",
        ),
        (
            [*BASE, "--rps", "1", "--input-tokens", "200000", "--output-tokens", "10"],
            "a request of 200,000 + 10 tokens is longer than llama-3.1-8b's context window (131,072 tokens)",
        ),
        (
            ["plan", "--model", "qwen3-32b", "--gpu", "h100", "--input-tokens", "40000", "--output-tokens", "961"],
            "longer than qwen3-32b's context window (40,960 tokens)",
        ),
        ([*BASE, "--max-num-seqs", "0"], "--max-num-seqs must be a whole number >= 1, got 0"),
        # the batch limits' activations, not the weights, fill the GPU: the message names them
        (
            ["plan", "--model", "llama-3.1-8b", "--gpu", "l40s-48gb", "--max-num-batched-tokens", "262144"],
            "reserve (activations at max_num_seqs 256 and max_num_batched_tokens 262144) exceed the 40.5 GiB usable "
            "on l40s-48gb at gpu_memory_utilization 0.9; lower max_num_batched_tokens or max_num_seqs, raise TP",
        ),
        (["plan", "--model", "llama-3.1-70b", "--gpu", "l40s-48gb"], "gpu_memory_utilization 0.9; raise TP or use a"),
        ([*BASE, *LOAD[2:], "--rps", "1e308"], "--rps must be at most 1e+07 requests/s, got 1e+308"),
        ([*BASE, *LOAD[2:], "--rps", "10000001"], "--rps must be at most 1e+07 requests/s, got 1e+07"),
        ([*BASE, *LOAD, "--gpu-price", "1e308"], "--gpu-price must be at most 1e+06 per GPU-hour, got 1e+308"),
    ],
)
def test_bad_input_is_a_message_and_exit_code_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_plan_is_registered_on_the_inferscale_command() -> None:
    assert "plan" in [c.name for c in cli.app.registered_commands]


MOONCAKE = ["--rps", "40", "--input-tokens", "15000", "--output-tokens", "149", "--slo-ttft", "7s"]


def test_a_prefill_step_over_the_itl_slo_is_reported_with_the_budget_that_fits() -> None:
    plan = _json([*BASE, *MOONCAKE])
    step = plan["prefill_step"]
    assert step["within_itl_slo"] is False and step["step_s"] > 0.05
    budget = step["max_num_batched_tokens_within_itl_slo"]
    assert budget is not None and budget < plan["max_num_batched_tokens"]
    text = runner.invoke(app, [*BASE, *MOONCAKE])
    assert text.exit_code == 0, text.output
    words = " ".join(text.output.split())  # the console wraps the note
    assert "over the ITL SLO" in words and f"--max-num-batched-tokens {budget}" in words
    fixed = _json([*BASE, *MOONCAKE, "--max-num-batched-tokens", str(budget)])
    assert fixed["max_num_batched_tokens"] == budget and fixed["prefill_step"]["within_itl_slo"] is True
    fixed_text = runner.invoke(app, [*BASE, *MOONCAKE, "--max-num-batched-tokens", str(budget)]).output
    assert "over the ITL SLO" not in " ".join(fixed_text.split())


def test_the_engines_seats_and_budget_reach_the_plan() -> None:
    plan = _json([*BASE, *LOAD, "--max-num-seqs", "64", "--max-num-batched-tokens", "4096"])
    assert (plan["max_num_seqs"], plan["max_num_batched_tokens"]) == (64, 4096)
    assert plan["replica_capacity_rps"] < _json([*BASE, *LOAD])["replica_capacity_rps"]


def test_batch_limits_vllm_refuses_exit_2_with_the_reason() -> None:
    result = runner.invoke(app, [*BASE, "--max-num-batched-tokens", "512"])
    assert result.exit_code == 2
    assert "--max-num-batched-tokens 512 must be >= --max-num-seqs 1024 (vLLM's default on h100-80gb)" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("model", "context"), [("llama-3.1-8b", 131072), ("qwen3-32b", 40960)])
def test_a_request_as_long_as_the_context_window_is_planned(model: str, context: int) -> None:
    plan = _json(
        ["plan", "--model", model, "--gpu", "h200", "--input-tokens", str(context - 100), "--output-tokens", "100"]
    )
    assert plan["input_tokens"] + plan["output_tokens"] == context


@pytest.mark.parametrize(
    ("slos", "named", "not_named"),
    [
        (["--slo-ttft", "1ms"], "--slo-ttft 1ms", "--slo-itl"),
        (["--slo-itl", "1ms"], "--slo-itl 1ms", "--slo-ttft"),
        (["--slo-itl", "1ms", "--slo-ttft", "1ms"], "--slo-ttft 1ms and --slo-itl 1ms", None),
    ],
)
def test_an_slo_no_load_meets_is_explained_with_the_floor_one_replica_reaches(
    slos: list[str], named: str, not_named: str | None
) -> None:
    plan = _json([*BASE, *LOAD, *slos], code=1)
    ttft, itl = slo_floor(replica_profile("llama-3.1-8b", "h100-80gb"), 1000, 200) or (0.0, 0.0)
    assert plan["slo_floor"] == {"ttft_p95": pytest.approx(ttft), "itl": pytest.approx(itl)}
    note = plan["unattainable"]
    assert f"no load meets {named} at 1,000 in / 200 out" in note
    assert "TTFT P95 23.1 ms and mean ITL 6.0 ms at best" in note  # rounded up, so that SLO is reachable
    assert not_named is None or not_named not in note
    result = runner.invoke(app, [*BASE, *LOAD, *slos])
    assert result.exit_code == 1 and f"note: {note}." in " ".join(result.stdout.split())  # the console wraps it
    assert f"error: no replica count for this load: {note}" in result.stderr
    # the floor is what it says: an SLO just above it leaves capacity
    assert _json([*BASE, *LOAD, "--slo-ttft", "29ms", "--slo-itl", "6.0ms"])["replica_capacity_rps"] > 0


def test_an_attainable_slo_has_a_floor_and_no_explanation() -> None:
    plan = _json([*BASE, *LOAD])
    assert plan["unattainable"] is None and plan["slo_floor"]["itl"] < plan["slo_itl"]
    assert _json(BASE)["slo_floor"] is None  # no lengths, no floor


def _error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    return " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("lengths", "message", "enough"),
    [
        ([], "the least that leaves a KV cache", "0.22"),
        (["--input-tokens", "1000", "--output-tokens", "200"], "enough for one request of 1,000 + 200 tokens", "0.23"),
    ],
)
def test_a_utilization_too_low_for_any_kv_cache_names_the_flag_and_the_value_that_is_enough(
    lengths: list[str], message: str, enough: str
) -> None:
    text = _error([*BASE, "--gpu-memory-utilization", "0.2", *lengths])
    assert "--gpu-memory-utilization 0.2 leaves no room for the KV cache" in text
    assert f"raise --gpu-memory-utilization to at least {enough} ({message}), raise --tp, or use a larger --gpu" in text
    plan = _json([*BASE, "--gpu-memory-utilization", enough, *lengths])
    assert plan["kv_capacity_tokens"] > 0
    assert not lengths or plan["replica_capacity_rps"] > 0


def test_a_request_the_kv_cache_does_not_hold_names_the_utilization_that_holds_it() -> None:
    lengths = ["--input-tokens", "100000", "--output-tokens", "100", "--slo-ttft", "none", "--slo-itl", "none"]
    text = _error([*BASE, "--gpu-memory-utilization", "0.25", *lengths])
    assert "(20,192 tokens for llama-3.1-8b on 1x h100-80gb at --gpu-memory-utilization 0.25)" in text
    assert "raise --gpu-memory-utilization to at least 0.39 (enough for one request of 100,000 + 100 tokens)" in text
    assert _json([*BASE, "--gpu-memory-utilization", "0.39", *lengths])["replica_capacity_rps"] > 0


def test_a_request_that_fits_only_without_headroom_is_explained_with_the_utilization() -> None:
    plan = _json([*BASE, "--gpu-memory-utilization", "0.25", "--input-tokens", "19000", "--output-tokens", "100"])
    assert plan["replica_capacity_rps"] == 0.0 and plan["slo_floor"] is None
    assert plan["unattainable"].startswith(
        "one replica's KV cache (20,192 tokens) holds no request of 19,000 + 100 tokens with the capacity "
        "model's 10% headroom; raise --gpu-memory-utilization to at least 0.26"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpu-memory-utilization", "0.95"],
        ["plan", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--input-tokens", "100000",
         "--output-tokens", "100"],
    ],
)  # fmt: skip
def test_no_utilization_is_suggested_when_all_of_the_gpu_would_not_do(args: list[str]) -> None:
    text = _error(args)
    assert "--gpu-memory-utilization to" not in text and "TP" in text.upper()


def test_a_prompt_too_long_for_its_answer_says_the_model_cannot_size_it_not_to_raise_the_budget() -> None:
    plan = _json([*BASE, "--input-tokens", "16383", "--output-tokens", "2"])
    note = plan["unattainable"]
    # 1 + 16383 / 2 = 8192.5 tokens per step: rounded up, so the figure is over the budget it is compared with
    assert "put 8,193 tokens in each, more than --max-num-batched-tokens 8,192" in note
    assert "vLLM would chunk the prompt" in note and "raise it" not in note


# --- plan --trace: real traffic instead of one rate and one length ---------------------------------


def _azure(tmp_path: Any, minutes: list[tuple[int, int]]) -> Any:
    """One row per request: `count` requests of `prompt` tokens (and 100 out) in each minute."""
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"]
    for m, (count, prompt) in enumerate(minutes):
        for i in range(count):
            rows.append(f"2023-11-16 18:{10 + m:02d}:{60 * i / count:09.6f},{prompt},100\n")
    path = tmp_path / "azure.csv"
    path.write_text("".join(rows))
    return path


def test_trace_sizes_the_busiest_window_at_its_own_lengths(tmp_path: Any) -> None:
    # minute 0: 600 requests of 500 tokens; minute 1: 300 of 4,000 (half the rate, 8x the prompt)
    trace = _azure(tmp_path, [(600, 500), (300, 4000)])
    plan = _json([*BASE, "--trace", str(trace), "--rate-scale", "20", "--gpu-price", "2"])
    tr = plan["trace"]
    profile = replica_profile("llama-3.1-8b", "h100-80gb")
    # the trace ends at its last request, 59.8 s into the second minute: that minute is counted over those
    rates = (600 * 20 / 60, 300 * 20 / 59.8)
    need = [
        math.ceil(rate / replica_capacity_rps(profile, i, 100, 0.5, 0.05))
        for rate, i in zip(rates, (500, 4000), strict=True)
    ]
    assert tr["windows"] == 2 and tr["format"] == "azure" and tr["unattainable_windows"] == 0
    assert need[1] > need[0]  # the slower minute of longer prompts is the peak
    assert tr["peak"]["replicas"] == plan["replicas_needed"] == max(need)
    # the count is the peak's rate over one replica's capacity at the peak's lengths, which the JSON gives
    assert plan["replicas_needed"] == math.ceil(plan["rps"] / tr["peak"]["replica_capacity_rps"])
    assert tr["peak"]["replica_capacity_rps"] == pytest.approx(replica_capacity_rps(profile, 4000, 100, 0.5, 0.05))
    assert tr["peak"]["input_tokens"] == 4000 and plan["rps"] == pytest.approx(rates[1])
    assert plan["input_tokens"] == round((600 * 500 + 300 * 4000) / 900)  # the tables show the mean request
    assert tr["gpu_hours_at_peak"] == pytest.approx(max(need) * tr["duration_s"] / 3600)
    assert tr["gpu_hours_following_need"] < tr["gpu_hours_at_peak"]
    assert tr["cost_at_peak"] == pytest.approx(2 * tr["gpu_hours_at_peak"])


def test_a_trace_compressed_into_less_than_a_minute_is_sized_at_its_own_rate(tmp_path: Any) -> None:
    # 600 requests over 599 s, compressed 3,600 times: 0.166 s, about 3,600 requests/s (not 10 over a minute)
    trace = _azure(tmp_path, [(60, 1000)] * 10)
    tr = _json([*BASE, "--trace", str(trace), "--time-scale", "3600"])["trace"]
    assert tr["windows"] == 1 and tr["duration_s"] == pytest.approx(599 / 3600)
    assert tr["requests"] == pytest.approx(600) and tr["peak"]["rps"] == pytest.approx(600 / (599 / 3600))


def test_trace_tables_name_the_window_needing_the_most_replicas(tmp_path: Any) -> None:
    trace = _azure(tmp_path, [(60, 1000), (120, 1000), (60, 1000)])
    result = runner.invoke(app, [*BASE, "--trace", str(trace), "--start", "1m", "--json"])
    plan = json.loads(result.stdout)
    result = runner.invoke(app, [*BASE, "--trace", str(trace), "--start", "1m"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "traffic: azure.csv" in result.stdout and "from --start 1m" in result.stdout
    assert plan["trace"]["peak"]["at_s"] == 0.0  # the trace's second minute, the replay's first
    replicas = plan["replicas_needed"]
    row = f"2.00 req/s of 1,000 in / 100 out at 0s: {replicas} replica{'' if replicas == 1 else 's'}"
    assert "the window needing the most replicas" in result.stdout and row in result.stdout
    assert "following each window's need" in result.stdout


def test_trace_gpu_hours_count_every_gpu_of_a_replica(tmp_path: Any) -> None:
    trace = _azure(tmp_path, [(600, 1000), (300, 1000)])
    tr = _json(["plan", "--model", "llama-3.1-70b", "--gpu", "h100-80gb", "--tp", "2", "--trace", str(trace)])["trace"]
    assert tr["gpu_hours_at_peak"] == pytest.approx(2 * tr["replica_hours_at_peak"])
    assert tr["gpu_hours_following_need"] == pytest.approx(2 * tr["replica_hours_following_need"])


def test_trace_with_no_servable_window_gives_no_figure_and_says_why(tmp_path: Any) -> None:
    trace = _azure(tmp_path, [(60, 1000), (60, 1000)])
    plan = _json([*BASE, "--trace", str(trace), "--slo-itl", "1ms"], code=1)
    assert plan["replicas_needed"] is None and plan["trace"]["unattainable_windows"] == 2
    assert plan["trace"]["gpu_hours_at_peak"] is None and plan["trace"]["cost_following_need"] is None
    result = runner.invoke(app, [*BASE, "--trace", str(trace), "--slo-itl", "1ms"], env={"COLUMNS": "200"})
    assert result.exit_code == 1 and "n/a: no window can be served" in result.stdout
    assert "in 2 of 2 windows no replica count serves the requests" in result.stdout


@pytest.mark.parametrize(
    ("long_prompt", "extra", "why"),
    [
        (10_000_000, [], "a mean request of 2,000,080 + 10 tokens is longer than llama-3.1-8b's context window"),
        (120_000, ["--gpu-memory-utilization", "0.25"], "a mean request of 24,080 + 10 tokens does not fit in one"),
    ],
)
def test_one_request_too_long_among_short_ones_leaves_its_window_out_rather_than_refusing_the_trace(
    tmp_path: Any, long_prompt: int, extra: list[str], why: str
) -> None:
    # 5 requests over 3 minutes; the long one alone in the second minute takes the trace's mean past what one
    # replica serves, but not the first or the last minute's
    trace = tmp_path / "one_long.csv"
    times, prompts = ["18:00:00", "18:00:30", "18:01:10", "18:02:00", "18:02:59"], [100, 100, long_prompt, 100, 100]
    trace.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        + "".join(f"2023-11-16 {t},{p},10\n" for t, p in zip(times, prompts, strict=True))
    )
    plan = _json([*BASE, "--trace", str(trace), *extra])
    assert plan["trace"]["windows"] == 3 and plan["trace"]["unattainable_windows"] == 1
    assert plan["replicas_needed"] == 1 and plan["trace"]["peak"]["input_tokens"] == 100
    assert plan["unattainable"].startswith(why) and plan["operating_point"] is None
    result = runner.invoke(app, [*BASE, "--trace", str(trace), *extra], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "in 1 of 3 windows no replica count serves the requests" in result.stdout
    assert f"note: {why}" in result.stdout


def test_a_trace_part_without_requests_is_one_error_line(tmp_path: Any) -> None:
    trace = tmp_path / "gap.jsonl"  # a request at 0 s and one at 5 minutes
    trace.write_text(
        '{"timestamp": 0, "input_length": 100, "output_length": 10}\n'
        '{"timestamp": 300000, "input_length": 100, "output_length": 10}\n'
    )
    result = runner.invoke(app, [*BASE, "--trace", str(trace), "--start", "2m", "--duration", "2m"])
    assert result.exit_code == 2 and "holds no request; nothing to size" in result.stderr, result.output
    assert result.stderr.count("\n") == 1
    # a rate scaled to less than one request in all: sized, it read 0 replicas
    result = runner.invoke(app, [*BASE, "--trace", str(trace), "--rate-scale", "1e-300"])
    assert result.exit_code == 2 and "nothing to size (2e-300 expected at --rate-scale 1e-300)" in result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rps", "10"], "give --rps or --trace, not both"),
        (["--input-tokens", "100", "--output-tokens", "10"], "--trace brings its own request lengths"),
        (["--start", "5m"], "is at or past the trace's end"),
        (["--rate-scale", "0"], "--rate-scale must be a positive number"),
        (["--format", "mooncake"], "azure.csv"),
    ],
)
def test_trace_bad_input_is_one_error_line(tmp_path: Any, extra: list[str], message: str) -> None:
    trace = _azure(tmp_path, [(60, 1000), (60, 1000)])
    result = runner.invoke(app, [*BASE, "--trace", str(trace), *extra])
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1, result.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--rate-scale", "-1", "--duration", "0s", "--start", "abc", "--time-scale", "nan", "--format", "bogus"],
            "error: --format, --rate-scale, --time-scale, --start, --duration need --trace\n",
        ),
        (["--rate-scale", "1"], "error: --rate-scale needs --trace\n"),  # given, even at its default
    ],
)
def test_trace_flags_without_a_trace_are_refused_not_ignored(extra: list[str], message: str) -> None:
    result = runner.invoke(app, [*BASE, "--rps", "1000", "--input-tokens", "100", "--output-tokens", "10", *extra])
    assert result.exit_code == 2 and result.stderr == message, result.output


def test_a_missing_trace_is_named(tmp_path: Any) -> None:
    result = runner.invoke(app, [*BASE, "--trace", str(tmp_path / "nope.csv")])
    assert result.exit_code == 2 and "nope.csv" in result.stderr and "Traceback" not in result.output


def test_an_fp8_kv_cache_halves_each_tokens_bytes_and_serves_more_long_requests() -> None:
    long_requests = ["--rps", "50", "--input-tokens", "4000", "--output-tokens", "400"]
    auto, fp8 = _json([*BASE, *long_requests]), _json([*BASE, *long_requests, "--kv-cache-dtype", "fp8"])
    assert (auto["kv_cache_dtype"], fp8["kv_cache_dtype"]) == ("bf16", "fp8")
    assert fp8["kv_bytes_per_token"] * 2 == auto["kv_bytes_per_token"]
    assert fp8["step"]["c_kv"] == pytest.approx(auto["step"]["c_kv"] / 2)
    assert fp8["replica_capacity_rps"] > auto["replica_capacity_rps"]
    assert fp8["replicas_needed"] <= auto["replicas_needed"]
    # vLLM's "auto" keeps the activation dtype: FP8 weights alone do not shrink the KV cache's tokens
    assert _json([*BASE, "--dtype", "fp8"])["kv_bytes_per_token"] == auto["kv_bytes_per_token"]


def test_an_unknown_kv_cache_dtype_is_refused_with_the_choices() -> None:
    assert "--kv-cache-dtype 'int4' is not known; known: auto, fp8, fp8_e4m3, fp8_e5m2" in _error(
        [*BASE, "--kv-cache-dtype", "int4"]
    )
