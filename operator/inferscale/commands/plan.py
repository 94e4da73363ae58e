"""`inferscale plan`: memory, KV capacity and replicas needed for a model on a GPU type at an SLO."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from inferscale.commands import checks, plan_trace
from inferscale.commands.replay_options import DurationOpt, FormatOpt, StartOpt
from inferscale.perf import (
    DoesNotFit,
    PerfError,
    ReplicaProfile,
    advice,
    gpu_spec,
    max_concurrency,
    model_spec,
    operating_point,
    prefill_step,
    replica_memory,
    replica_profile,
)
from inferscale.perf.capacity import KV_HEADROOM, hard_limit, slo_floor
from inferscale.perf.catalog import DTYPE_BYTES, GiB
from inferscale.perf.profile import utilization_needed
from inferscale.scaling.durations import format_duration
from inferscale.sim.traces import MAX_RATE

_DISABLED = {"none", "off"}
# USD per GPU-hour: far above any GPU's price, and far enough from float overflow that a fleet's cost is a number.
MAX_GPU_PRICE = 1e6


class PlanInputError(checks.InputError):
    pass


def _slo(option: str, text: str) -> float | None:
    if text.strip().lower() in _DISABLED:
        return None
    try:
        return checks.positive_duration(option, text)
    except checks.InputError as e:
        raise PlanInputError(f"{e}, or 'none' to disable") from None


def _positive(option: str, value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise PlanInputError(f"{option} must be a positive number, got {value}")


KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")  # vLLM's --kv-cache-dtype choices


def _kv_dtype(kv_cache_dtype: str, weight_dtype: str) -> str:
    """What the KV cache stores: vLLM's "auto" keeps the model's activation dtype, BF16 even for FP8 weights."""
    choice = kv_cache_dtype.lower()
    if choice not in KV_CACHE_DTYPES:
        raise PlanInputError(f"--kv-cache-dtype {kv_cache_dtype!r} is not known; known: {', '.join(KV_CACHE_DTYPES)}")
    if choice.startswith("fp8"):
        return "fp8"
    return "fp16" if weight_dtype == "fp16" else "bf16"


def build_plan(
    model: str,
    gpu: str,
    tp: int,
    gpu_memory_utilization: float,
    dtype: str,
    rps: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    slo_ttft: str,
    slo_itl: str,
    gpu_price: float | None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    traffic: plan_trace.TraceLoad | None = None,
    kv_cache_dtype: str = "auto",
) -> dict[str, Any]:
    """The plan as one JSON-ready dict; raises PlanInputError or PerfError with a user-facing message.
    With `traffic`, the one-request tables are at its mean lengths and the replicas for its most demanding window."""
    checks.tensor_parallel(tp, model)
    if traffic is not None:
        if rps is not None:
            raise PlanInputError("give --rps or --trace, not both: the trace's windows are the load")
        if input_tokens is not None or output_tokens is not None:
            raise PlanInputError("--trace brings its own request lengths: drop --input-tokens and --output-tokens")
        input_tokens, output_tokens = traffic.mean_lengths
    if dtype.lower() not in DTYPE_BYTES:
        raise PlanInputError(f"--dtype {dtype!r} is not known; known: {', '.join(sorted(DTYPE_BYTES))}")
    kv_dtype = _kv_dtype(kv_cache_dtype, dtype.lower())
    if (input_tokens is None) != (output_tokens is None):
        raise PlanInputError("give both --input-tokens and --output-tokens, or neither")
    if rps is not None and input_tokens is None:
        raise PlanInputError("--rps needs --input-tokens and --output-tokens to size replicas")
    if input_tokens is not None and input_tokens < 1:
        raise PlanInputError(f"--input-tokens must be at least 1, got {input_tokens}")
    if output_tokens is not None and output_tokens < 1:
        raise PlanInputError(f"--output-tokens must be at least 1, got {output_tokens}")
    if not 0.0 < gpu_memory_utilization <= 1.0:  # NaN fails too
        raise PlanInputError(f"--gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    _positive("--rps", rps)
    if rps is not None and rps > MAX_RATE:
        # the trace loaders' bound: a replica count past it describes no deployment
        raise PlanInputError(f"--rps must be at most {MAX_RATE:g} requests/s, got {rps:g}")
    _positive("--gpu-price", gpu_price)
    if gpu_price is not None and gpu_price > MAX_GPU_PRICE:
        raise PlanInputError(f"--gpu-price must be at most {MAX_GPU_PRICE:g} per GPU-hour, got {gpu_price:g}")
    ttft, itl = _slo("--slo-ttft", slo_ttft), _slo("--slo-itl", slo_itl)
    dtype = dtype.lower()

    checks.batch_limits(gpu, max_num_seqs, max_num_batched_tokens)
    limits = (max_num_seqs, max_num_batched_tokens)
    request = None
    # Why no replica serves one request of these lengths. Given as flags, that is an error; a trace's mean is
    # not a request of the trace, whose windows are sized at their own lengths (a window no replica serves is
    # counted apart), so its plan is given without the one-request figures.
    too_long: str | None = None
    if input_tokens is not None and output_tokens is not None:
        request = f"{input_tokens:,} + {output_tokens:,} tokens"
        context = model_spec(model).context_tokens
        if input_tokens + output_tokens > context:
            # vLLM refuses a max_model_len above the model's max_position_embeddings
            too_long = (
                f"a{' mean' if traffic else ''} request of {request} is longer than {model_spec(model).name}'s "
                f"context window ({context:,} tokens)"
            )
            if traffic is None:
                raise PlanInputError(f"{too_long}; lower --input-tokens or --output-tokens")
    # What the memory allows: one full-length request with the capacity model's headroom, or any KV cache.
    wanted = 1 if input_tokens is None or output_tokens is None or too_long else input_tokens + output_tokens
    enough = utilization_needed(model, gpu, tp, math.ceil(wanted / KV_HEADROOM), dtype, *limits, kv_dtype)
    utilization_is_short = gpu_memory_utilization < enough <= 1
    remedies = ["raise --tp", "use a larger --gpu"]
    if utilization_is_short:
        purpose = f"enough for one request of {request}" if wanted > 1 else "the least that leaves a KV cache"
        remedies.insert(0, f"raise --gpu-memory-utilization to at least {enough:g} ({purpose})")
    try:
        mem = replica_memory(model, gpu, tp, gpu_memory_utilization, dtype, *limits, kv_dtype)
    except DoesNotFit:
        if not utilization_is_short:
            raise  # not even all of the GPU's memory would do: the perf model's message says why
        usable = int(gpu_spec(gpu).memory_bytes * gpu_memory_utilization) / GiB
        raise PlanInputError(
            f"--gpu-memory-utilization {gpu_memory_utilization:g} leaves no room for the KV cache: "
            f"{model_spec(model).name}'s {dtype} weights and reserve need more than the {usable:.1f} GiB it makes "
            f"usable on each {gpu_spec(gpu).name}; {_either(remedies)}"
        ) from None
    profile = replica_profile(model, gpu, tp, gpu_memory_utilization, dtype, *limits, kv_dtype)
    if input_tokens is not None and output_tokens is not None and wanted > profile.kv_capacity_tokens:
        # vLLM refuses to start when max_model_len exceeds the KV cache: no SLO can be met
        too_long = (
            f"a{' mean' if traffic else ''} request of {request} does not fit in one replica's KV cache "
            f"({profile.kv_capacity_tokens:,} tokens for {profile.model} on {profile.tp}x {profile.gpu} at "
            f"--gpu-memory-utilization {gpu_memory_utilization:g})"
        )
        if traffic is None:
            raise PlanInputError(f"{too_long}; {_either([*remedies, 'shorten the requests'])}")
    price = gpu_price if gpu_price is not None else gpu_spec(gpu).price_per_hour
    replica_cost = price * profile.gpus
    plan: dict[str, Any] = {
        "model": profile.model,
        "gpu": profile.gpu,
        "tp": profile.tp,
        "gpus_per_replica": profile.gpus,
        "dtype": dtype,
        "kv_cache_dtype": kv_dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        "memory_per_gpu_bytes": {
            "total": mem.total,
            "usable": mem.usable,
            "weights": mem.weights,
            "reserve": mem.reserve,
            "kv": mem.kv,
        },
        "kv_bytes_per_token": profile.kv_bytes_per_token,
        "kv_capacity_tokens": profile.kv_capacity_tokens,
        "max_num_seqs": profile.max_num_seqs,
        "max_num_batched_tokens": profile.max_num_batched_tokens,
        "block_size": profile.block_size,
        "step": {
            "c0": profile.step.c0,
            "c_prefill": profile.step.c_prefill,
            "c_decode": profile.step.c_decode,
            "c_kv": profile.step.c_kv,
            "source": profile.step.source,
        },
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "slo_ttft": ttft,
        "slo_itl": itl,
        "max_concurrency": None,
        "replica_capacity_rps": None,
        "operating_point": None,
        "prefill_step": None,
        "slo_floor": None,
        "unattainable": None,
        "rps": rps,
        "replicas_needed": None,
        "gpus": None,
        "gpu_price_per_hour": price,
        "gpu_price_source": "--gpu-price" if gpu_price is not None else "catalog default (assumption)",
        "cost_per_replica_hour": replica_cost,
        "cost_per_hour": None,
        "trace": None,
    }
    if input_tokens is None or output_tokens is None:
        return plan
    if too_long is not None and traffic is not None:
        plan["unattainable"] = f"{too_long}: no one-request figure is given at it"
        _size_trace(plan, traffic, profile, ttft, itl, replica_cost)
        return plan
    op = operating_point(profile, float(input_tokens), float(output_tokens), ttft, itl)
    plan["max_concurrency"] = max_concurrency(profile, input_tokens, output_tokens)
    plan["replica_capacity_rps"] = op.rate_rps
    plan["operating_point"] = {
        "batch": op.batch,
        "itl": _finite(op.itl),
        "ttft_p95": _finite(op.ttft_p95),  # None: unbounded, the queue grows at the peak rate
        "limited_by": op.limited_by,
    }
    floor = slo_floor(profile, float(input_tokens), float(output_tokens))
    plan["slo_floor"] = None if floor is None else {"ttft_p95": floor[0], "itl": floor[1]}
    if op.limited_by == "unattainable":
        given = {"--slo-ttft": (slo_ttft, ttft), "--slo-itl": (slo_itl, itl)}
        plan["unattainable"] = _unattainable(profile, input_tokens, output_tokens, floor, given, remedies)
    step = prefill_step(profile, float(input_tokens), float(output_tokens), ttft, itl)
    plan["prefill_step"] = {
        "batch": step.batch,
        "chunk_tokens": step.chunk_tokens,
        "step_s": step.step_s,
        "within_itl_slo": step.within_slo,
        "max_num_batched_tokens_within_itl_slo": step.fitting.max_num_batched_tokens if step.fitting else None,
        "max_num_seqs_within_itl_slo": step.fitting.max_num_seqs if step.fitting else None,
        "advice": advice(step, itl) if step.within_slo is False and itl is not None else None,
    }
    if traffic is not None:
        _size_trace(plan, traffic, profile, ttft, itl, replica_cost)
    elif rps is not None and op.rate_rps > 0:
        _size(plan, math.ceil(rps / op.rate_rps), profile, replica_cost)
    return plan


def _size_trace(
    plan: dict[str, Any],
    traffic: plan_trace.TraceLoad,
    profile: ReplicaProfile,
    ttft: float | None,
    itl: float | None,
    replica_cost: float,
) -> None:
    plan["trace"], sizing = plan_trace.section(traffic, profile, ttft, itl, replica_cost)
    plan["rps"] = sizing.peak.rate_rps
    _size(plan, sizing.peak.replicas, profile, replica_cost)


def _size(plan: dict[str, Any], replicas: int | None, profile: ReplicaProfile, replica_cost: float) -> None:
    if replicas is not None:
        plan["replicas_needed"] = replicas
        plan["gpus"] = replicas * profile.gpus
        plan["cost_per_hour"] = replicas * replica_cost


def _either(options: list[str]) -> str:
    return ", ".join(options[:-1]) + f", or {options[-1]}"


def _unattainable(
    profile: ReplicaProfile,
    i: int,
    o: int,
    floor: tuple[float, float] | None,
    given: dict[str, tuple[str, float | None]],
    remedies: list[str],
) -> str:
    """Why no load meets the SLO: an SLO below what an idle replica reaches (and that floor, so the user
    knows what is reachable), or a replica that holds no request of these lengths at all."""
    if floor is not None:
        ttft, itl = floor
        below = [
            f"{flag} {text}"
            for (flag, (text, slo)), best in zip(given.items(), floor, strict=True)
            if slo is not None and best > slo
        ]
        return (
            f"no load meets {' and '.join(below) or 'the SLO'} at {i:,} in / {o:,} out: an idle replica reaches "
            f"TTFT P95 {_ms_up(ttft)} and mean ITL {_ms_up(itl)} at best; an SLO must be above that floor to leave "
            "capacity"
        )
    _, reason = hard_limit(profile, float(i), float(o))
    if reason == "kv_cache":
        return (
            f"one replica's KV cache ({profile.kv_capacity_tokens:,} tokens) holds no request of {i:,} + {o:,} "
            f"tokens with the capacity model's {1 - KV_HEADROOM:.0%} headroom; {_either(remedies)}"
        )
    # The capacity model spreads a prompt over the request's output steps, beside one decode token; vLLM
    # chunks such a prompt over several steps instead, which the model does not size.
    per_step = math.ceil(1 + i / o)
    return (
        f"the capacity model spreads a prompt over its answer's steps, and {i:,} + {o:,} tokens put {per_step:,} "
        f"tokens in each, more than --max-num-batched-tokens {profile.max_num_batched_tokens:,}: it cannot size a "
        "prompt this long against an answer this short (vLLM would chunk the prompt over several steps); size "
        "such a workload with `inferscale simulate`"
    )


def _ms_up(seconds: float) -> str:
    # rounded up: an SLO set to the figure shown is reachable
    return f"{math.ceil(seconds * 1e4) / 10:,.1f} ms"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _ms(x: float | None) -> str:
    return "unbounded" if x is None else f"{x * 1e3:.1f} ms"


def _gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


def _render(plan: dict[str, Any], console: Console) -> None:
    mem = plan["memory_per_gpu_bytes"]
    precision = f"{plan['dtype']}, KV {plan['kv_cache_dtype']}"
    t = Table(title=f"{plan['model']} on {plan['gpu']} x{plan['tp']} ({precision}): memory per GPU")
    t.add_column("item")
    t.add_column("value", justify="right")
    t.add_row("total", _gib(mem["total"]))
    t.add_row(f"usable (x{plan['gpu_memory_utilization']})", _gib(mem["usable"]))
    t.add_row("weights", _gib(mem["weights"]))
    t.add_row("activations + CUDA graphs reserve", _gib(mem["reserve"]))
    t.add_row("KV cache", _gib(mem["kv"]))
    console.print(t)

    s = plan["step"]
    r = Table(title="replica")
    r.add_column("item")
    r.add_column("value", justify="right")
    r.add_row("KV bytes per token", f"{plan['kv_bytes_per_token']:,} ({plan['kv_bytes_per_token'] / 1024:g} KiB)")
    r.add_row("KV capacity", f"{plan['kv_capacity_tokens']:,} tokens")
    r.add_row("max_num_seqs / max_num_batched_tokens", f"{plan['max_num_seqs']} / {plan['max_num_batched_tokens']}")
    r.add_row(
        "step time",
        f"{s['c0'] * 1e3:.2f} ms + {s['c_prefill'] * 1e6:.2f} µs/prefill token + {s['c_decode'] * 1e6:.2f} µs/seq"
        f" + {s['c_kv'] * 1e9:.1f} ns/context token",
    )
    r.add_row("step-time source", s["source"])
    console.print(r)

    c = Table(title="capacity at the SLO")
    c.add_column("item")
    c.add_column("value", justify="right")
    if plan["input_tokens"] is None:
        c.add_row("lengths", "not given: pass --input-tokens and --output-tokens")
    else:
        op = plan["operating_point"]
        ttft = "none" if plan["slo_ttft"] is None else format_duration(plan["slo_ttft"])
        itl = "none" if plan["slo_itl"] is None else format_duration(plan["slo_itl"])
        c.add_row("request", f"{plan['input_tokens']} in / {plan['output_tokens']} out")
        c.add_row("SLO", f"TTFT P95 ≤ {ttft}, mean ITL ≤ {itl}")
        if op is None:  # a trace's mean request that no replica serves: the note below says why
            c.add_row("replica capacity", "none at this mean request; the windows are sized at their own lengths")
        else:
            c.add_row("max concurrency (KV, full length)", str(plan["max_concurrency"]))
            if op["limited_by"] == "unattainable":
                c.add_row("replica capacity", "0: one replica cannot meet this SLO at any load")
            else:
                capacity = f"{plan['replica_capacity_rps']:.2f} req/s (limited by {op['limited_by']})"
                c.add_row("replica capacity", capacity)
                c.add_row("at batch / ITL / TTFT P95", f"{op['batch']:.0f} / {_ms(op['itl'])} / {_ms(op['ttft_p95'])}")
            step = plan["prefill_step"]
            c.add_row("step with a prompt's prefill chunk", f"{step['chunk_tokens']:,} tokens: {_ms(step['step_s'])}")
        if plan["rps"] is not None:
            busiest = plan["trace"] is not None
            c.add_row("load (the window needing the most replicas)" if busiest else "load", f"{plan['rps']:g} req/s")
            if plan["replicas_needed"] is not None:
                needed = "replicas needed (at that window's lengths)" if busiest else "replicas needed"
                c.add_row(needed, str(plan["replicas_needed"]))
                c.add_row("GPUs", str(plan["gpus"]))
                c.add_row("cost", f"${plan['cost_per_hour']:,.2f}/h at ${plan['gpu_price_per_hour']:g}/GPU-h")
    c.add_row("cost per replica", f"${plan['cost_per_replica_hour']:,.2f}/h ({plan['gpu_price_source']})")
    console.print(c)
    if plan["trace"] is not None:
        plan_trace.render(plan, console)
    if plan["unattainable"] is not None:
        console.print(f"note: {plan['unattainable']}.", style="yellow")
    if plan["prefill_step"] is not None and plan["prefill_step"]["advice"] is not None:
        console.print(f"note: {plan['prefill_step']['advice']}.", style="yellow")


def plan(
    model: Annotated[str, typer.Option(help="Catalog model, e.g. llama-3.1-8b, llama-3.1-70b, qwen3-32b.")],
    gpu: Annotated[str, typer.Option(help="Catalog GPU, e.g. h100-80gb, a100-80gb, h200-141gb, l40s-48gb.")],
    tp: Annotated[int, typer.Option(help="Tensor parallelism (GPUs per replica).")] = 1,
    gpu_memory_utilization: Annotated[float, typer.Option(help="vLLM --gpu-memory-utilization.")] = 0.9,
    dtype: Annotated[str, typer.Option(help="Weight precision: bf16, fp16 or fp8.")] = "bf16",
    kv_cache_dtype: Annotated[
        str, typer.Option(help="vLLM --kv-cache-dtype: auto (the model's BF16/FP16) or fp8 (half the bytes).")
    ] = "auto",
    rps: Annotated[float | None, typer.Option(help="Load to size for, requests/s.")] = None,
    input_tokens: Annotated[int | None, typer.Option(help="Mean prompt length.")] = None,
    output_tokens: Annotated[int | None, typer.Option(help="Mean output length.")] = None,
    slo_ttft: Annotated[str, typer.Option(help="TTFT P95 target, e.g. 500ms; 'none' disables.")] = "500ms",
    slo_itl: Annotated[str, typer.Option(help="Mean ITL target, e.g. 50ms; 'none' disables.")] = "50ms",
    gpu_price: Annotated[float | None, typer.Option(help="USD per GPU-hour (default: catalog assumption).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="vLLM --max-num-seqs (default: vLLM's for the GPU).")] = None,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option(help="vLLM --max-num-batched-tokens, the chunked-prefill budget (default: vLLM's).")
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="Size for this traffic instead of --rps and lengths: each window at its own lengths, the "
            "replicas the most demanding one needs, GPU-hours held at that need and following it (Azure CSV, "
            "Mooncake JSONL, ServeGen CSV).",
        ),
    ] = None,
    fmt: FormatOpt = None,
    # None rather than 1: a scale given without --trace is told apart from the default, and refused
    rate_scale: Annotated[
        float | None, typer.Option("--rate-scale", help="Multiply the trace's request rate (default 1).")
    ] = None,
    time_scale: Annotated[
        float | None, typer.Option("--time-scale", help="Compress the trace's time (divide timestamps; default 1).")
    ] = None,
    start: StartOpt = None,
    duration: DurationOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
) -> None:
    """Size a deployment: memory breakdown, KV capacity, one replica's capacity at the SLO, replicas and cost.
    Exit 2 on bad input; 1 when a load was given (--rps or --trace) and no replica count serves it at the SLO (the
    plan is still printed, with why)."""
    try:
        traffic = None
        trace_only = (
            ("--format", fmt), ("--rate-scale", rate_scale), ("--time-scale", time_scale), ("--start", start),
            ("--duration", duration),
        )  # fmt: skip
        given = [flag for flag, value in trace_only if value is not None]
        if trace is None and given:  # they would go unused: the plan would answer another question than asked
            raise PlanInputError(f"{', '.join(given)} need{'s' if len(given) == 1 else ''} --trace")
        if trace is not None:
            try:
                scales = (1.0 if rate_scale is None else rate_scale, 1.0 if time_scale is None else time_scale)
                traffic = plan_trace.load(trace, fmt, *scales, start, duration)
            except ValueError as e:  # TraceError, and a window with no request
                raise PlanInputError(str(e)) from None
        result = build_plan(
            model,
            gpu,
            tp,
            gpu_memory_utilization,
            dtype,
            rps,
            input_tokens,
            output_tokens,
            slo_ttft,
            slo_itl,
            gpu_price,
            max_num_seqs,
            max_num_batched_tokens,
            traffic,
            kv_cache_dtype,
        )
    except (checks.InputError, PerfError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        _render(result, Console())
    if (rps is not None or traffic is not None) and result["replicas_needed"] is None:
        # the plan is printed, but a script that sizes from replicas_needed must not read null as an answer
        why = result["unattainable"] or "no replica count serves this load at the SLO"
        typer.echo(f"error: no replica count for this load: {why}", err=True)
        raise typer.Exit(1)
