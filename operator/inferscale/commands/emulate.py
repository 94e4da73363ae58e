"""`inferscale emulate`: simulated vLLM engines behind a real Deployment's Ready pods, in real time."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import signal
import sys
from typing import Annotated, Any

import typer

from inferscale.commands import checks
from inferscale.scaling.durations import format_duration


def _fail(message: str) -> typer.Exit:
    typer.echo(f"inferscale emulate: {message}", err=True)
    return typer.Exit(2)


def emulate(
    deployment: Annotated[str, typer.Option(help="The Deployment whose Ready pods get an engine each.")],
    trace: Annotated[pathlib.Path, typer.Option(help="Trace to replay (Azure CSV, Mooncake JSONL or ServeGen CSV).")],
    namespace: Annotated[
        str, typer.Option("--namespace", "-n", help="Namespace of the Deployment whose Ready pods get an engine.")
    ] = "default",
    fmt: Annotated[str | None, typer.Option("--format", help="azure | mooncake | servegen (default: detect).")] = None,
    rate_scale: Annotated[float, typer.Option(help="Multiply the request rate.")] = 1.0,
    time_scale: Annotated[float, typer.Option(help="Compress time: 12 replays an hour in 5 minutes.")] = 1.0,
    start: Annotated[
        str | None, typer.Option(help="Skip the trace before this point (after compression), e.g. 2h.")
    ] = None,
    duration: Annotated[str | None, typer.Option(help="Replay only this long (after compression).")] = None,
    model: Annotated[str, typer.Option(help="Model catalog entry for the engines' performance.")] = "llama-3.1-8b",
    gpu: Annotated[str, typer.Option(help="GPU catalog entry.")] = "h100-80gb",
    tp: Annotated[int, typer.Option(help="Tensor parallel size (GPUs per replica).")] = 1,
    max_num_seqs: Annotated[int | None, typer.Option(help="vLLM --max-num-seqs (default: vLLM's).")] = None,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option(help="vLLM --max-num-batched-tokens (default: vLLM's).")
    ] = None,
    model_name: Annotated[
        str, typer.Option(help="The model_name label the engines report.")
    ] = "meta-llama/Llama-3.1-8B-Instruct",
    slo_ttft: Annotated[str, typer.Option(help="TTFT target for the attainment summary.")] = "500ms",
    slo_itl: Annotated[str, typer.Option(help="Mean ITL target for the attainment summary.")] = "50ms",
    targets_dir: Annotated[
        pathlib.Path, typer.Option(help="Prometheus file-discovery directory.", envvar="E2E_PROMETHEUS_TARGETS")
    ] = pathlib.Path(".e2e/prometheus/targets"),
    results: Annotated[pathlib.Path | None, typer.Option(help="Write the outcome as JSON here.")] = None,
    seed: Annotated[
        int, typer.Option(help="Seed for the requests a ServeGen curve generates and for --rate-scale's copies.")
    ] = 0,
    kubeconfig: Annotated[str | None, typer.Option(help="Kubeconfig (default: KUBECONFIG).")] = None,
) -> None:
    """Replay a trace against simulated engines on a Deployment's pods, serving vLLM /metrics per pod."""
    from inferscale.adapters.kube import KubeApi
    from inferscale.emulator import Emulator, EmulatorConfig, TargetError
    from inferscale.perf import replica_profile
    from inferscale.sim.traces import TRACE_FORMATS, load_request_arrays

    try:
        # Checked here, before the trace is read, so that the messages name the flags (as `simulate` does).
        checks.object_name("--deployment", deployment)
        checks.namespace_name("--namespace", namespace)
        checks.not_blank("--model-name", model_name)
        checks.trace_file(trace)
        checks.trace_format(fmt, TRACE_FORMATS)
        checks.positive_number("--rate-scale", rate_scale)
        checks.positive_number("--time-scale", time_scale)
        checks.seed(seed)
        checks.tensor_parallel(tp, model)
        ttft = checks.positive_duration("--slo-ttft", slo_ttft)
        itl = checks.positive_duration("--slo-itl", slo_itl)
        limit = checks.positive_duration("--duration", duration) if duration is not None else None
        skip = checks.duration("--start", start) if start is not None else 0.0
        checks.batch_limits(gpu, max_num_seqs, max_num_batched_tokens)
        if results is not None:
            checks.not_the_trace("--results", results, trace)
            checks.output_file("--results", results)  # as simulate's and tune's --json
        checks.output_folder("--targets-dir", targets_dir)
        profile = replica_profile(
            model, gpu, tp, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
        )
        requests, span = load_request_arrays(trace, fmt, rate_scale, time_scale, limit, seed, start=skip)
    except (ValueError, OSError) as e:  # InputError, PerfError and TraceError are ValueErrors
        raise _fail(str(e)) from None
    if limit is not None and format_duration(span) != format_duration(limit):  # not a rounding difference
        after = f" after --start {format_duration(skip)}" if skip > 0 else ""
        typer.echo(
            f"note: the trace covers only {format_duration(span)}{after}; the replay lasts the "
            f"{format_duration(limit)} of --duration, without requests after that",
            err=True,
        )
    try:
        kube = KubeApi(checks.credentials(kubeconfig))
    except checks.InputError as e:
        raise _fail(str(e)) from None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = EmulatorConfig(
        namespace=namespace,
        deployment=deployment,
        model_name=model_name,
        profile=profile,
        requests=requests,
        duration=limit if limit is not None else span,
        targets_dir=targets_dir,
        slo_ttft=ttft,
        slo_itl=itl,
        results=results,
    )

    async def main() -> dict[str, Any]:
        # SIGTERM (a cancelled job, `kill`) ends the replay as Ctrl-C does, but with a summary of what ran and
        # without leaving the targets file to point Prometheus at closed ports
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            return await Emulator(cfg, kube).run(stop)
        finally:
            await kube.close()

    try:
        summary = asyncio.run(main())
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except TargetError as e:
        raise _fail(str(e)) from None
    _report(summary, deployment)


def _report(summary: dict[str, Any], deployment: str) -> None:
    from inferscale.emulator import late_routing, unserved

    att, finished, n = summary["slo_attainment"], summary["finished"], summary["requests"]
    stopped = " (stopped by SIGTERM)" if summary.get("interrupted") else ""
    typer.echo(
        f"{finished}/{n} requests finished, SLO attainment {att:.1%}{stopped}" if att is not None else "no requests"
    )
    late = late_routing(summary)
    if late is not None:
        typer.echo(f"note: {late}", err=True)
    if summary.get("interrupted"):
        raise typer.Exit(128 + signal.SIGTERM)
    if finished == 0 < n:
        typer.echo(f"inferscale emulate: no request finished: {unserved(summary, deployment)}", err=True)
        raise typer.Exit(1)
