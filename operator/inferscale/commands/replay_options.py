"""The options that describe a replay, shared by `inferscale simulate` and `inferscale tune` so that
the same flags mean the same scenario in both."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferscale.commands import checks
from inferscale.sim.scenario import Scenario
from inferscale.sim.traces import TRACE_FORMATS, resolve_format

REQUEST_LEVEL_LIMIT = 5_000_000  # ~1 min per policy at the measured speed, a few GB of memory
# The most a request-level replay asked for by name builds: the arrays alone hold tens of bytes per request,
# and 14 days of a ServeGen curve are billions of requests (a traceback from numpy, or hours).
REQUEST_MODE_MAX = 4 * REQUEST_LEVEL_LIMIT

TraceOpt = Annotated[Path, typer.Option("--trace", help="Trace file (Azure CSV, Mooncake JSONL, ServeGen CSV).")]
FormatOpt = Annotated[
    str | None, typer.Option("--format", help=f"One of {', '.join(TRACE_FORMATS)}; detected if omitted.")
]
RateScaleOpt = Annotated[float, typer.Option("--rate-scale", help="Multiply the request rate.")]
TimeScaleOpt = Annotated[float, typer.Option("--time-scale", help="Compress time (divide timestamps).")]
DurationOpt = Annotated[str | None, typer.Option("--duration", help="Replay only this long, e.g. 30m.")]
StartOpt = Annotated[
    str | None,
    typer.Option(
        "--start",
        help="Skip the trace before this point (after --time-scale), e.g. 168h to replay from its second week; "
        "a ServeGen start falls on a window boundary.",
    ),
]
ModelOpt = Annotated[str, typer.Option("--model", help="Catalog model name.")]
GpuOpt = Annotated[str, typer.Option("--gpu", help="Catalog GPU name.")]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor parallelism (GPUs per replica).")]
SloTtftOpt = Annotated[str, typer.Option("--slo-ttft", help="Per-request TTFT target.")]
SloItlOpt = Annotated[str, typer.Option("--slo-itl", help="Per-request mean ITL target.")]
SloTpotOpt = Annotated[
    str | None,
    typer.Option(
        "--slo-tpot-p95",
        help="Also give inferscale spec.slo.tpotP95 (P95 of per-request TPOT), e.g. 50ms; scores still use --slo-itl.",
    ),
]
ReleaseOpt = Annotated[
    str | None,
    typer.Option(
        "--scale-down-release",
        help="Give inferscale spec.behavior.scaleDown.release: Linear (default) steps down through the "
        "scale-down window, Hold keeps the window's highest recommendation to its end (HPA).",
    ),
]
WindowOpt = Annotated[
    str | None,
    typer.Option(
        "--scale-down-window",
        help="Give inferscale spec.behavior.scaleDown.stabilizationWindow, e.g. 300s (HPA's); unset, the window "
        "is the time-to-ready + 1m.",
    ),
]
TimeToReadyOpt = Annotated[
    str, typer.Option("--time-to-ready", help="Pod creation to Ready: fixed '180s' or uniform '120s-240s'.")
]
OutageOpt = Annotated[
    str | None,
    typer.Option(
        "--metrics-outage",
        help="Take the metrics away from START for DURATION of the replay, e.g. 20m+10m: every policy lives "
        "through it as the component it models would (`docs/benchmarks.md`, section on outages).",
    ),
]
OutageKindOpt = Annotated[
    str | None,
    typer.Option(
        "--outage-kind",
        help="With --metrics-outage: prometheus-down (every query errors; the default) or vllm-unscraped "
        "(Prometheus answers, the vLLM series are empty).",
    ),
]
IntervalOpt = Annotated[str, typer.Option("--interval", help="inferscale's decision interval.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for request generation and time-to-ready.")]
MaxNumSeqsOpt = Annotated[
    int | None, typer.Option("--max-num-seqs", help="vLLM --max-num-seqs of every replica (default: vLLM's).")
]
MaxNumBatchedTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-num-batched-tokens",
        help="vLLM --max-num-batched-tokens, the chunked-prefill budget of every replica (default: vLLM's).",
    ),
]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")]
WorkersOpt = Annotated[
    int,
    typer.Option(
        "--workers",
        help="Processes running the replays in parallel; 0: one per replay, up to the cores it may use (its CPU "
        "affinity and cgroup CPU limit).",
    ),
]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help=f"request (every request through the engines), fluid (rate curve on the perf model's steady "
        f"state), or auto: fluid above {REQUEST_LEVEL_LIMIT:,} requests.",
    ),
]


def trace_window(
    trace: Path, fmt: str | None, rate_scale: float, time_scale: float, start: str | None, duration: str | None
) -> Scenario:
    """The part of a trace the flags select, checked; the rest of the Scenario at its defaults."""
    checks.trace_file(trace)
    checks.trace_format(fmt, TRACE_FORMATS)
    checks.positive_number("--rate-scale", rate_scale)
    checks.positive_number("--time-scale", time_scale)
    return Scenario(
        trace=trace,
        # Detected here rather than in the loaders so the JSON records the format that was used.
        fmt=resolve_format(trace, fmt),
        rate_scale=rate_scale,
        time_scale=time_scale,
        start=checks.duration("--start", start) if start is not None else 0.0,
        duration=_replay_duration(duration) if duration is not None else None,
    )


def _replay_duration(text: str) -> float:
    """A replay's --duration: under a second it holds no scrape and no decision, and the peak-rate check would
    blame --rate-scale for the few requests it crams into a nanosecond."""
    seconds = checks.positive_duration("--duration", text)
    if seconds < 1.0:
        raise checks.InputError(f"--duration must be at least 1s (nothing is scraped or decided sooner), got {text!r}")
    return seconds
