"""`inferscale simulate`: replay a trace against scaling policies side by side and score them."""

from __future__ import annotations

import inspect
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from inferscale.commands import checks
from inferscale.commands.replay_options import (
    REQUEST_LEVEL_LIMIT,
    REQUEST_MODE_MAX,
    DurationOpt,
    FormatOpt,
    GpuOpt,
    IntervalOpt,
    JsonOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    ModeOpt,
    OutageKindOpt,
    OutageOpt,
    RateScaleOpt,
    ReleaseOpt,
    SeedOpt,
    SloItlOpt,
    SloTpotOpt,
    SloTtftOpt,
    StartOpt,
    TimeScaleOpt,
    TimeToReadyOpt,
    TpOpt,
    TraceOpt,
    WindowOpt,
    WorkersOpt,
    trace_window,
)
from inferscale.perf import PerfError, model_spec
from inferscale.perf.capacity import slo_floor
from inferscale.scaling.durations import format_duration
from inferscale.scaling.types import Release
from inferscale.sim.decisions import write_jsonl
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import curve_tables, run_fluid
from inferscale.sim.outage import PROMETHEUS_DOWN
from inferscale.sim.plots import plot_formats, plot_timelines
from inferscale.sim.policies import POLICY_NAMES
from inferscale.sim.policies.context import BASELINE_TARGETS, check_baseline_target
from inferscale.sim.policies.inferscale import Inferscale
from inferscale.sim.policy import ScalingPolicy
from inferscale.sim.run import RunResult, parallel, run_policy
from inferscale.sim.scenario import (
    DEFAULT_TIME_TO_READY,
    FluidPrepared,
    Prepared,
    Scenario,
    expected_requests,
    prepare,
    prepare_fluid,
)
from inferscale.sim.traces import TraceError

MODES = ("auto", "request", "fluid")
EXPLAINED = Inferscale.name  # the policy whose decisions carry a reason and a message


class SimulateInputError(checks.InputError):
    pass


LOAD_ERRORS = (TraceError, PerfError, ValueError, OSError)  # the input errors: checks.InputError is a ValueError


@contextmanager
def input_errors(prefix: str = "") -> Iterator[None]:
    """Bad input ends a command with exit code 2, its message on stderr: 1 is left for a failed output (or a
    target `tune` cannot meet), so scripts can tell them apart."""
    try:
        yield
    except LOAD_ERRORS as e:
        print(f"error: {prefix}{e}", file=sys.stderr)
        raise typer.Exit(2) from None


def _prepare(scenario: Scenario, mode: str) -> Prepared | FluidPrepared:
    """Request-level unless asked otherwise or the trace stands for more requests than is sensible to
    build one by one (a 14-day ServeGen curve is billions)."""
    if mode == "request":
        _, _, expected = expected_requests(scenario)
        if expected > REQUEST_MODE_MAX:
            raise SimulateInputError(
                f"--mode request: the selected window stands for {expected:,.0f} requests, more than the "
                f"{REQUEST_MODE_MAX:,} a request-level replay builds one by one; use --mode fluid, a shorter "
                "--duration or a lower --rate-scale"
            )
        return prepare(scenario)
    if mode == "fluid":
        return prepare_fluid(scenario)
    _, _, expected = expected_requests(scenario)
    return prepare_fluid(scenario) if expected > REQUEST_LEVEL_LIMIT else prepare(scenario)


def _policies(given: list[str] | None) -> list[str]:
    names = list(given or POLICY_NAMES)
    unknown = [repr(n) for n in dict.fromkeys(names) if n not in POLICY_NAMES]
    if unknown:
        label = "policy" if len(unknown) == 1 else "policies"
        raise SimulateInputError(f"unknown {label} {', '.join(unknown)}; known: {', '.join(POLICY_NAMES)}")
    checks.given_once("--policy", names)
    return names


def check_outputs(trace: Path, json_out: Path | None, plot: Path | None, decisions: Path | None) -> None:
    taken: dict[tuple[object, ...], str] = {}
    for flag, path in (("--json", json_out), ("--plot", plot), ("--decisions", decisions)):
        if path is None:
            continue
        checks.not_the_trace(flag, path, trace)
        other = taken.setdefault(checks.same_file_key(path), flag)
        if other != flag:
            raise SimulateInputError(f"{other} and {flag} are the same file {path}; give each its own")
    if json_out is not None:
        checks.output_file("--json", json_out)
    if decisions is not None:
        checks.output_file("--decisions", decisions)
    if plot is not None:
        formats = sorted(plot_formats())
        # matplotlib appends .png to a name without a suffix: the file written would not be the one checked
        if not plot.suffix:
            raise SimulateInputError(f"--plot {plot}: give the image's suffix, e.g. {plot.name}.png")
        if plot.suffix[1:].lower() not in formats:
            raise SimulateInputError(
                f"--plot {plot}: cannot write a {plot.suffix} image; use .png or one of {', '.join(formats)}"
            )
        checks.output_file("--plot", plot)


def _span(prepared: Prepared | FluidPrepared) -> float:
    """Seconds replayed, on the scaled axis."""
    return prepared.duration if isinstance(prepared, FluidPrepared) else prepared.workload.duration


class TooLong(NamedTuple):
    over_context: int  # prompt + output above the model's context window: vLLM answers 400
    over_kv: int  # within the context, above one replica's KV cache: vLLM refuses them too
    # each is refused by every engine and counts as a miss


def _too_long(prepared: Prepared) -> TooLong:
    w = prepared.workload
    length = w.input_tokens + w.output_tokens
    over = length > model_spec(prepared.profile.model).context_tokens
    refused = prepared.run_config.engine.refuses(w.input_tokens, w.output_tokens)
    return TooLong(int(np.count_nonzero(over)), int(np.count_nonzero(refused & ~over)))


def _too_long_notes(prepared: Prepared) -> list[str]:
    counts, n, model = _too_long(prepared), f"{len(prepared.workload):,}", model_spec(prepared.profile.model)
    notes = []
    if counts.over_context:
        notes.append(
            f"note: {counts.over_context:,} of {n} requests are longer than {model.name}'s context window "
            f"({model.context_tokens:,} tokens): the engines refuse them, as vLLM does (HTTP 400), and each counts "
            "as a miss"
        )
    if counts.over_kv:
        notes.append(
            f"note: {counts.over_kv:,} of {n} requests are longer than one replica's KV cache holds "
            f"({prepared.run_config.engine.longest_in_cache:,} tokens, a block short of its "
            f"{prepared.profile.kv_capacity_tokens:,}): the engines refuse them, as vLLM does, and each counts "
            "as a miss"
        )
    return notes


def too_short(prepared: Prepared | FluidPrepared) -> str | None:
    """Why a replay this short cannot tell the policies apart, or None when it can."""
    span, cfg, interval = _span(prepared), prepared.run_config, prepared.scenario.interval
    first = cfg.first_decision(interval)
    if first > cfg.warmup:  # an --interval longer than the warm-up puts the first decision later
        start = (
            f"first decision at {format_duration(first)} (the first tick of --interval {format_duration(interval)} "
            f"past the {format_duration(cfg.warmup)} warm-up)"
        )
    else:
        start = f"{format_duration(cfg.warmup)} warm-up"
    ready_by = first + cfg.time_to_ready.high
    if span >= ready_by:
        return None
    if span <= cfg.warmup:
        why = f"is no longer than the policies' {start}: no policy can act"
    elif span <= first:  # --interval is inferscale's: the baselines decide on their own from the warm-up on
        why = f"is no longer than inferscale's {start}: inferscale cannot act"
    else:
        why = (
            f"is shorter than the {start} plus the {format_duration(cfg.time_to_ready.high)} top of "
            "--time-to-ready: a replica a policy orders may not be Ready before it ends"
        )
    return (
        f"the replay ({format_duration(span)}) {why}, so the policies' results cannot show a real "
        f"difference; replay at least {format_duration(ready_by)} to compare them"
    )


def build_scenario(
    trace: Path,
    fmt: str | None,
    rate_scale: float,
    time_scale: float,
    duration: str | None,
    model: str,
    gpu: str,
    tp: int,
    slo_ttft: str,
    slo_itl: str,
    time_to_ready: str,
    interval: str,
    seed: int,
    slo_tpot: str | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    capacity_utilization: float | None = None,
    scale_down_release: str | None = None,
    scale_down_window: str | None = None,
    start: str | None = None,
    metrics_outage: str | None = None,
    outage_kind: str | None = None,
    baseline_target: list[str] | None = None,
    read_pods: bool = False,
) -> Scenario:
    if outage_kind is not None and metrics_outage is None:
        raise SimulateInputError(f"--outage-kind {outage_kind} needs --metrics-outage START+DURATION")
    if read_pods and metrics_outage is None:
        raise SimulateInputError("--read-pods says how inferscale lives through an outage: it needs --metrics-outage")
    window = trace_window(trace, fmt, rate_scale, time_scale, start, duration)
    checks.seed(seed)
    checks.tensor_parallel(tp, model)
    checks.batch_limits(gpu, max_num_seqs, max_num_batched_tokens)
    if capacity_utilization is not None:
        checks.fraction("--capacity-utilization", capacity_utilization)
    release = _release(scale_down_release)
    if scale_down_window is not None:
        checks.within_spec(
            "--scale-down-window", scale_down_window, checks.duration("--scale-down-window", scale_down_window)
        )
    try:
        ttr = TimeToReady.parse(time_to_ready)
    except ValueError as e:
        raise SimulateInputError(f"--time-to-ready: {e}") from None
    checks.time_to_ready("--time-to-ready", time_to_ready, ttr.high)  # inferscale's warmup.timeToReady
    return replace(
        window,
        model=model,
        gpu=gpu,
        tp=tp,
        slo_ttft=checks.spec_duration("--slo-ttft", slo_ttft),
        slo_itl=checks.spec_duration("--slo-itl", slo_itl),
        slo_tpot=checks.spec_duration("--slo-tpot-p95", slo_tpot) if slo_tpot is not None else None,
        time_to_ready=ttr,
        # not in the spec the replay builds; bounded as the operator's tick, which no service decides faster than
        interval=checks.tick("--interval", interval),
        seed=seed,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        capacity_utilization=capacity_utilization,
        scale_down_release=release,
        scale_down_window=scale_down_window,
        baseline_targets=baseline_targets(baseline_target or []),
        reads_pods=read_pods,
        outage=(
            checks.outage("--metrics-outage", metrics_outage, outage_kind or PROMETHEUS_DOWN)
            if metrics_outage is not None
            else None
        ),
    )


def baseline_targets(given: list[str]) -> tuple[tuple[str, float], ...]:
    """--baseline-target NAME=VALUE, each peer at most once."""
    out: list[tuple[str, float]] = []
    for text in given:
        name, eq, raw = text.partition("=")
        name = name.strip()
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not eq or not name or math.isnan(value):
            raise SimulateInputError(f"--baseline-target takes NAME=VALUE, e.g. keda-queue=10, got {text!r}")
        if any(name == seen for seen, _ in out):
            raise SimulateInputError(f"--baseline-target {name} is given twice")
        try:
            check_baseline_target(name, value)
        except ValueError as e:
            raise SimulateInputError(f"--baseline-target {e}") from None
        out.append((name, value))
    return tuple(out)


def scenario_from_flags(flags: Mapping[str, Any], unset: frozenset[str] = frozenset()) -> Scenario:
    """`build_scenario` from a command's parameters, which carry its argument names (the commands share
    their replay flags, `replay_options`); `unset`: the arguments the command leaves at their default."""
    names = inspect.signature(build_scenario).parameters
    missing = {name for name in names if name not in flags} - unset
    if missing:  # a flag renamed in one command would otherwise fall back to its default unseen
        raise TypeError(f"build_scenario arguments missing from the command: {', '.join(sorted(missing))}")
    return build_scenario(**{name: flags[name] for name in names if name in flags})


def _release(value: str | None) -> str | None:
    """The spec's spelling of --scale-down-release, which takes any case."""
    if value is None:
        return None
    known = {r.value.lower(): r.value for r in Release}
    if value.lower() not in known:
        raise SimulateInputError(f"--scale-down-release {value!r} is not known; known: {', '.join(known.values())}")
    return known[value.lower()]


def scenario_json(prepared: Prepared | FluidPrepared) -> dict[str, Any]:
    """The scenario as replayed: what was asked and what the trace and the fleet sizing made of it."""
    scenario = prepared.scenario.describe()
    if isinstance(prepared, FluidPrepared):
        mode, requests = "fluid", round(prepared.expected_requests)
    else:
        mode, requests = "request", len(prepared.workload)
    too_long = _too_long(prepared) if isinstance(prepared, Prepared) else None  # fluid: mean lengths, no requests
    scenario.update(
        {
            # the catalog's names, as `plan` prints them: " H100 " and "h100-80gb" are one GPU to join runs on
            "model": prepared.profile.model,
            "gpu": prepared.profile.gpu,
            "mode": mode,
            "requests": requests,
            "context_window_tokens": model_spec(prepared.profile.model).context_tokens,
            "requests_over_context_window": None if too_long is None else too_long.over_context,
            "requests_refused_too_long": None if too_long is None else too_long.over_context + too_long.over_kv,
            "duration_s": _span(prepared),
            "gpus_per_replica": prepared.profile.gpus,
            "initial_replicas": prepared.run_config.initial_replicas,
            "max_replicas": prepared.context.max_replicas,
        }
    )
    return scenario


def scores_json(r: RunResult) -> dict[str, Any]:
    s = r.scores
    return {
        "slo_attainment": s.slo_attainment,
        "gpu_hours": s.gpu_hours,
        "ttft_p95_s": s.ttft_p95_s,
        "ttft_p99_s": s.ttft_p99_s,
        "itl_mean_s": s.itl_mean_s,
        "scale_actions": s.scale_actions,
        "requests": s.requests,
        "unfinished": s.unfinished,
        "wall_seconds": r.wall_seconds,
    }


def report(prepared: Prepared | FluidPrepared, results: dict[str, RunResult]) -> dict[str, Any]:
    """The JSON document: the scenario and each policy's scores."""
    return {"scenario": scenario_json(prepared), "policies": {name: scores_json(r) for name, r in results.items()}}


def gpu_hours_text(gpu_hours: float) -> str:
    return f"{gpu_hours:.1f}" if gpu_hours >= 10 else f"{gpu_hours:#.3g}"  # a short replay is not 0.0; 3 reads 3.00


def _table(results: dict[str, RunResult], slo_ttft: float) -> Table:
    oracle = results.get("oracle")
    table = Table(title=f"SLO attainment = TTFT ≤ {format_duration(slo_ttft)} and mean ITL within target")
    for col in ("policy", "attainment", "GPU-h", "× oracle", "actions", "TTFT P95", "TTFT P99", "ITL mean"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for name, r in results.items():
        s = r.scores
        ratio = f"{s.gpu_hours / oracle.scores.gpu_hours:.2f}" if oracle and oracle.scores.gpu_hours > 0 else "-"
        table.add_row(
            name,
            f"{100 * s.slo_attainment:.2f}%",
            gpu_hours_text(s.gpu_hours),
            ratio,
            str(s.scale_actions),
            format_duration(s.ttft_p95_s),
            format_duration(s.ttft_p99_s),
            format_duration(s.itl_mean_s) if s.itl_mean_s is not None else "-",
        )
    return table


def load(scenario: Scenario, mode: str) -> Prepared | FluidPrepared:
    """The scenario's replay, loaded under a status line; raises SimulateInputError on an unknown mode (in any
    case, as --format)."""
    if mode.lower() not in MODES:
        raise SimulateInputError(f"--mode {mode!r} is not known; known: {', '.join(MODES)}")
    with Console(stderr=True).status("loading the trace"):
        return _prepare(scenario, mode.lower())


def idle_floor(prepared: Prepared | FluidPrepared) -> tuple[float, float] | None:
    """An idle replica's TTFT P95 and mean ITL at the trace's mean lengths when either is over the SLO: the miss no
    replica count fixes. None when the SLO is above it (or the perf model has no figure at these lengths)."""
    ctx, s = prepared.context, prepared.scenario
    try:
        floor = slo_floor(prepared.profile, ctx.mean_input_tokens, ctx.mean_output_tokens)
    except PerfError:
        return None
    return None if floor is None or (floor[0] <= s.slo_ttft and floor[1] <= s.slo_itl) else floor


def _sizable(prepared: Prepared | FluidPrepared) -> None:
    """The replay sizes its fleets (warm start, max replicas, the oracle's and static peak's counts) from one
    replica's capacity at the SLO at the trace's mean lengths. An SLO below what an idle replica reaches there is
    refused: every fleet would be sized from a placeholder (4 replicas at most on a trace that needs hundreds), and
    each score read as the policies' failure. Lengths the capacity model cannot size (a long prompt over a token
    budget its short answer's steps cannot spread it over) still replay, with the placeholder said."""
    ctx, s, p = prepared.context, prepared.scenario, prepared.profile
    mean_in, mean_out = ctx.mean_input_tokens, ctx.mean_output_tokens
    if ctx.capacity_rps(mean_in, mean_out) > 0:
        return
    at = f"at the trace's mean lengths ({mean_in:,.0f} tokens in, {mean_out:,.0f} out) on {p.model} / {p.gpu} TP{p.tp}"
    floor = idle_floor(prepared)
    if floor is not None:
        raise SimulateInputError(
            f"no replica count meets --slo-ttft {format_duration(s.slo_ttft)} and --slo-itl "
            f"{format_duration(s.slo_itl)} {at}: an idle replica reaches TTFT P95 {format_duration(floor[0])} and "
            f"mean ITL {format_duration(floor[1])} at best, so the replay has no fleet size to start from or cap at; "
            "set the SLO above that floor or choose a larger --gpu or --tp (`inferscale plan` gives the floor)"
        )
    print(
        f"warning: the capacity model gives no rate per replica {at} (`inferscale plan` says why), so the fleets "
        f"start at {ctx.initial_replicas} and are capped at {ctx.max_replicas} replicas, not sized from the load; "
        "the oracle and static-peak hold that cap",
        file=sys.stderr,
    )


def outage_within(prepared: Prepared | FluidPrepared) -> None:
    """An outage that starts after the replay has ended would leave every policy as it was, silently."""
    outage, span = prepared.scenario.outage, _span(prepared)
    if outage is not None and outage.start >= span:
        raise SimulateInputError(
            f"--metrics-outage starts at {format_duration(outage.start)}, at or after the replay's end "
            f"({format_duration(span)})"
        )


def note_limits(prepared: Prepared | FluidPrepared) -> None:
    """Say on stderr where the replay differs from what was asked or cannot tell policies apart."""
    scenario, span = prepared.scenario, _span(prepared)
    if scenario.duration is not None and format_duration(span) != format_duration(scenario.duration):
        # only a difference the user can see: a request trace ends at its last arrival, not on a round figure
        scaled = f" at --time-scale {scenario.time_scale:g}" if scenario.time_scale != 1 else ""
        after = f" after --start {format_duration(scenario.start)}" if scenario.start > 0 else ""
        print(
            f"note: the trace covers only {format_duration(span)}{after}{scaled}; the replay stops there, not at the "
            f"{format_duration(scenario.duration)} of --duration",
            file=sys.stderr,
        )
    for note in _too_long_notes(prepared) if isinstance(prepared, Prepared) else []:
        print(note, file=sys.stderr)
    warning = too_short(prepared)
    if warning is not None:
        print(f"warning: {warning}", file=sys.stderr)


def replay(
    prepared: Prepared | FluidPrepared, policies: Mapping[str, Callable[[], ScalingPolicy]], workers: int
) -> dict[str, RunResult]:
    """Each named policy on its own fleet over the same replay, with a progress bar on stderr."""
    names = list(policies)
    # A process per replay at most: more would be forked copies of the workload with nothing to run.
    n_workers = min(workers or usable_cpus(), len(names))
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        what = f"{len(names)} policies" if len(names) != 1 else "1 policy"
        if isinstance(prepared, FluidPrepared):
            fp = prepared
            label = f"fluid: {fp.expected_requests:,.0f} requests × {what}"
            curve_tables(fp.curve, fp.profile)  # solved once, inherited by the workers

            def job(name: str) -> RunResult:
                return run_fluid(fp.curve, fp.duration, policies[name](), fp.profile, fp.run_config)

        else:
            rp = prepared
            label = f"{len(rp.workload):,} requests × {what}"

            def job(name: str) -> RunResult:
                return run_policy(rp.workload, policies[name](), rp.run_config)

        task = progress.add_task(label, total=len(names))
        return parallel(names, job, n_workers, on_done=lambda _r: progress.advance(task))


def result_console() -> Console:
    out = Console()
    return out if out.is_terminal else Console(width=120)  # a pipe or a file: do not squeeze tables into 80 columns


def write_json(json_out: Path, doc: dict[str, Any]) -> bool:
    """Checked up front, but a full disk or a folder removed meanwhile can still fail a write: say so, and
    let the caller keep its other outputs. True when written."""
    try:
        json_out.write_text(json.dumps(doc, indent=2) + "\n")
    except OSError as e:
        print(f"error: --json {json_out}: cannot write the results: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def usable_cpus(cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPUs this process may use: those it is pinned to, fewer under a cgroup v2 CPU quota (a pod's CPU limit),
    where a copy of the workload per core of a large node would only compete for the quota."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass  # no cgroup v2 file, or one this kernel words otherwise: the affinity alone
    return cpus


def workers_count(workers: int) -> int:
    if workers < 0:
        raise SimulateInputError(f"--workers must be >= 0 (0 = one per policy, up to the usable cores), got {workers}")
    return workers


def simulate(
    trace: TraceOpt,
    fmt: FormatOpt = None,
    rate_scale: RateScaleOpt = 1.0,
    time_scale: TimeScaleOpt = 1.0,
    start: StartOpt = None,
    duration: DurationOpt = None,
    model: ModelOpt = "llama-3.1-8b",
    gpu: GpuOpt = "h100-80gb",
    tp: TpOpt = 1,
    slo_ttft: SloTtftOpt = "500ms",
    slo_itl: SloItlOpt = "50ms",
    slo_tpot: SloTpotOpt = None,
    capacity_utilization: Annotated[
        float | None,
        typer.Option(
            "--capacity-utilization",
            help="Give inferscale spec.targets.capacityUtilization: the share of a replica's capacity at the SLO "
            "the forecast demand may use (default 0.8); lower keeps standing headroom.",
        ),
    ] = None,
    scale_down_release: ReleaseOpt = None,
    scale_down_window: WindowOpt = None,
    time_to_ready: TimeToReadyOpt = DEFAULT_TIME_TO_READY,
    interval: IntervalOpt = "10s",
    metrics_outage: OutageOpt = None,
    outage_kind: OutageKindOpt = None,
    policy: Annotated[
        list[str] | None, typer.Option("--policy", help="Policy to run (repeatable); all when omitted.")
    ] = None,
    baseline_target: Annotated[
        list[str] | None,
        typer.Option(
            "--baseline-target",
            help="A peer's target as your own config sets it, NAME=VALUE (repeatable), instead of the one "
            "calibrated on the trace: "
            + "; ".join(f"{name}: {meaning}" for name, meaning in BASELINE_TARGETS.items())
            + ".",
        ),
    ] = None,
    read_pods: Annotated[
        bool,
        typer.Option(
            "--read-pods",
            help="Give inferscale spec.metrics.podPort: through --metrics-outage it reads the pods' /metrics "
            "itself (scale-ups only) instead of holding its count.",
        ),
    ] = False,
    seed: SeedOpt = 0,
    max_num_seqs: MaxNumSeqsOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    json_out: JsonOpt = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG timeline here.")] = None,
    decisions: Annotated[
        Path | None,
        typer.Option(
            "--decisions",
            help="Write inferscale's decisions here as JSON Lines: every scale, every hold that is news (a "
            "routine hold at the count told last is not), and one a minute while the SLO is missed, with the "
            "message the operator would give.",
        ),
    ] = None,
    workers: WorkersOpt = 0,
    mode: ModeOpt = "auto",
) -> None:
    """Replay a trace against scaling policies on simulated vLLM fleets and compare SLO attainment and cost."""
    with input_errors():
        names = _policies(policy)
        workers_count(workers)
        if decisions is not None and EXPLAINED not in names:
            raise SimulateInputError(
                f"--decisions: only {EXPLAINED} explains its decisions, and it is not among the policies; "
                f"add --policy {EXPLAINED}"
            )
        own = {
            "--capacity-utilization": capacity_utilization,
            "--scale-down-release": scale_down_release,
            "--scale-down-window": scale_down_window,
            "--slo-tpot-p95": slo_tpot,
            "--read-pods": read_pods or None,
        }
        given = [flag for flag, value in own.items() if value is not None]
        if given and EXPLAINED not in names:
            raise SimulateInputError(
                f"{', '.join(given)}: {'sets' if len(given) == 1 else 'set'} {EXPLAINED}'s spec, and "
                f"{EXPLAINED} is not among the policies; add --policy {EXPLAINED}"
            )
        check_outputs(trace, json_out, plot, decisions)
        scenario = scenario_from_flags(locals())
        idle = [name for name, _ in scenario.baseline_targets if name not in names]
        if idle:
            raise SimulateInputError(
                f"--baseline-target {', '.join(idle)}: not among the policies; add --policy {' --policy '.join(idle)}"
            )
        prepared = load(scenario, mode)
        _sizable(prepared)  # `tune` explains an SLO no count meets in its answer; a replay has none to give
        outage_within(prepared)

    note_limits(prepared)
    results = replay(prepared, {n: partial(prepared.policy, n) for n in names}, workers)
    result_console().print(_table(results, scenario.slo_ttft))
    failed = json_out is not None and not write_json(json_out, report(prepared, results))
    if decisions is not None:
        try:
            write_jsonl(decisions, [(n, r.decisions) for n, r in results.items() if r.decisions])
        except OSError as e:
            print(f"error: --decisions {decisions}: cannot write the decisions: {e.strerror or e}", file=sys.stderr)
            failed = True
    if plot is not None:
        title = f"{scenario.trace.stem}: {scenario.model} on {scenario.gpu}, TTR {scenario.time_to_ready}"
        try:
            plot_timelines(plot, {n: r.timeline for n, r in results.items()}, scenario.slo_ttft, title)
        except OSError as e:
            print(f"error: --plot {plot}: cannot write the plot: {e.strerror or e}", file=sys.stderr)
            failed = True
    if failed:
        raise typer.Exit(1)
