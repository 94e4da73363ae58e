"""`inferscale tune`: replay a trace with inferscale at several `capacityUtilization` values and say the
cheapest that meets an SLO-attainment target, with the oracle's GPU-hours for scale."""

from __future__ import annotations

import sys
from functools import partial
from typing import Annotated, Any

import typer
from rich.table import Table

from inferscale.commands import checks
from inferscale.commands.replay_options import (
    DurationOpt,
    FormatOpt,
    GpuOpt,
    IntervalOpt,
    JsonOpt,
    MaxNumBatchedTokensOpt,
    MaxNumSeqsOpt,
    ModelOpt,
    ModeOpt,
    RateScaleOpt,
    ReleaseOpt,
    SeedOpt,
    SloItlOpt,
    SloTpotOpt,
    SloTtftOpt,
    TimeScaleOpt,
    TimeToReadyOpt,
    TpOpt,
    TraceOpt,
    WorkersOpt,
)
from inferscale.commands.simulate import (
    LOAD_ERRORS,
    build_scenario,
    gpu_hours_text,
    load,
    note_limits,
    replay,
    result_console,
    scenario_json,
    scores_json,
    workers_count,
    write_json,
)
from inferscale.perf import PerfError, PrefillStep, advice, prefill_step
from inferscale.scaling.durations import format_duration
from inferscale.sim.policies.oracle import Oracle
from inferscale.sim.run import RunResult
from inferscale.sim.scenario import DEFAULT_TIME_TO_READY, FluidPrepared, Prepared
from inferscale.sim.tune import DEFAULT_CANDIDATES, Trial, best_attainment, cheapest_meeting, inferscale_at

REFERENCE = Oracle.name


def _candidates(given: list[float] | None) -> list[float]:
    values = list(given or DEFAULT_CANDIDATES)
    for v in values:
        checks.fraction("--capacity-utilization", v)
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:
        twice = ", ".join(f"{v:g}" for v in repeated)
        raise checks.InputError(f"--capacity-utilization {twice} is given more than once")
    return sorted(values)


def _label(cu: float) -> str:
    return f"capacityUtilization {cu:g}"


def _ratio(gpu_hours: float, oracle: RunResult) -> float | None:
    return gpu_hours / oracle.scores.gpu_hours if oracle.scores.gpu_hours > 0 else None


def _table(trials: list[Trial], oracle: RunResult, target: float, chosen: Trial | None) -> Table:
    table = Table(title=f"inferscale by capacityUtilization; target: {100 * target:.2f}% SLO attainment")
    for col in ("capacityUtilization", "attainment", "GPU-h", "× oracle", "actions", "TTFT P95", "TTFT P99", "meets"):
        table.add_column(col, justify="right")
    for t in trials:
        s, ratio = t.scores, _ratio(t.scores.gpu_hours, oracle)
        table.add_row(
            f"{t.capacity_utilization:.2f}" + (" ←" if t is chosen else ""),
            f"{100 * s.slo_attainment:.2f}%",
            gpu_hours_text(s.gpu_hours),
            f"{ratio:.2f}" if ratio is not None else "-",
            str(s.scale_actions),
            format_duration(s.ttft_p95_s),
            format_duration(s.ttft_p99_s),
            "yes" if t.meets(target) else "no",
        )
    o = oracle.scores
    table.add_section()
    table.add_row(
        "oracle (knows the future)",
        f"{100 * o.slo_attainment:.2f}%",
        gpu_hours_text(o.gpu_hours),
        "1.00",
        str(o.scale_actions),
        format_duration(o.ttft_p95_s),
        format_duration(o.ttft_p99_s),
        "",
    )
    return table


def _answer(
    prepared: Prepared | FluidPrepared, trials: list[Trial], oracle: RunResult, target: float, chosen: Trial | None
) -> str:
    goal = f"{100 * target:.2f}%"
    if chosen is not None:
        s, ratio = chosen.scores, _ratio(chosen.scores.gpu_hours, oracle)
        cost = f"{gpu_hours_text(s.gpu_hours)} GPU-h" + (f", {ratio:.2f}× the oracle's" if ratio is not None else "")
        return (
            f"capacityUtilization {chosen.capacity_utilization:g} is the cheapest value tried that reaches {goal}: "
            f"{100 * s.slo_attainment:.2f}% at {cost}.\nIn the InferenceService:\n"
            f"  spec:\n    targets:\n      capacityUtilization: {chosen.capacity_utilization:g}"
        )
    best = best_attainment(trials)
    lines = [
        f"no capacityUtilization tried reaches {goal}; the most is {100 * best.scores.slo_attainment:.2f}% at "
        f"{best.capacity_utilization:g} ({gpu_hours_text(best.scores.gpu_hours)} GPU-h)."
    ]
    if best.capacity_utilization == trials[0].capacity_utilization:
        lines.append("Attainment still rises at the lowest value tried: try lower ones with --capacity-utilization.")
    else:
        lines.append(
            "Lower values do not raise it: the misses are not for want of standing headroom but come while new "
            "replicas start, which a shorter time-to-ready or a schedule floor (spec.warmup.schedules) covers."
        )
    step = _prefill_step(prepared)
    if step is not None and step.within_slo is False:
        # the misses no replica count fixes: say so, or the user lowers the headroom for nothing
        lines.append(f"The engine's token budget caps it too: {advice(step, prepared.scenario.slo_itl)}.")
    return "\n".join(lines)


def _prefill_step(prepared: Prepared | FluidPrepared) -> PrefillStep | None:
    ctx, s = prepared.context, prepared.scenario
    try:
        return prefill_step(prepared.profile, ctx.mean_input_tokens, ctx.mean_output_tokens, s.slo_ttft, s.slo_itl)
    except PerfError:
        return None  # no operating point at these lengths: the replay's own scores already say so


def _doc(
    prepared: Prepared | FluidPrepared,
    trials: list[Trial],
    results: dict[str, RunResult],
    target: float,
    chosen: Trial | None,
) -> dict[str, Any]:
    oracle = results[REFERENCE]
    return {
        "scenario": scenario_json(prepared),
        "target_attainment": target,
        "trials": [
            {
                "capacity_utilization": t.capacity_utilization,
                **scores_json(results[_label(t.capacity_utilization)]),
                "oracle_ratio": _ratio(t.scores.gpu_hours, oracle),
                "meets_target": t.meets(target),
            }
            for t in trials
        ],
        "oracle": scores_json(oracle),
        "recommended": None if chosen is None else chosen.capacity_utilization,
    }


def tune(
    trace: TraceOpt,
    fmt: FormatOpt = None,
    rate_scale: RateScaleOpt = 1.0,
    time_scale: TimeScaleOpt = 1.0,
    duration: DurationOpt = None,
    model: ModelOpt = "llama-3.1-8b",
    gpu: GpuOpt = "h100-80gb",
    tp: TpOpt = 1,
    slo_ttft: SloTtftOpt = "500ms",
    slo_itl: SloItlOpt = "50ms",
    slo_tpot: SloTpotOpt = None,
    candidates: Annotated[
        list[float] | None,
        typer.Option(
            "--capacity-utilization",
            help="A spec.targets.capacityUtilization value to try (repeatable); "
            f"{DEFAULT_CANDIDATES[0]:g} to {DEFAULT_CANDIDATES[-1]:g} by 0.05 when omitted.",
        ),
    ] = None,
    target_attainment: Annotated[
        float,
        typer.Option("--target-attainment", help="Share of requests that must meet the SLO, e.g. 0.99."),
    ] = 0.99,
    scale_down_release: ReleaseOpt = None,
    time_to_ready: TimeToReadyOpt = DEFAULT_TIME_TO_READY,
    interval: IntervalOpt = "10s",
    seed: SeedOpt = 0,
    max_num_seqs: MaxNumSeqsOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    json_out: JsonOpt = None,
    workers: WorkersOpt = 0,
    mode: ModeOpt = "auto",
) -> None:
    """Replay a trace with inferscale at several capacityUtilization values and recommend the cheapest that
    meets the attainment target. Exits 1 when none does."""
    try:
        values = _candidates(candidates)
        checks.fraction("--target-attainment", target_attainment)
        workers_count(workers)
        if json_out is not None:
            if json_out.resolve() == trace.resolve():
                raise checks.InputError(f"--json {json_out} is the trace itself; write the results to another file")
            checks.output_file("--json", json_out)
        scenario = build_scenario(
            trace,
            fmt,
            rate_scale,
            time_scale,
            duration,
            model,
            gpu,
            tp,
            slo_ttft,
            slo_itl,
            time_to_ready,
            interval,
            seed,
            slo_tpot,
            max_num_seqs,
            max_num_batched_tokens,
            None,
            scale_down_release,
        )
        prepared = load(scenario, mode)
    except LOAD_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(2) from None

    note_limits(prepared)
    policies = {REFERENCE: partial(prepared.policy, REFERENCE)}
    policies |= {_label(cu): partial(inferscale_at, prepared.context, cu) for cu in values}
    results = replay(prepared, policies, workers)
    trials = [Trial(cu, results[_label(cu)].scores) for cu in values]
    oracle, chosen = results[REFERENCE], cheapest_meeting(trials, target_attainment)
    out = result_console()
    out.print(_table(trials, oracle, target_attainment, chosen))
    print(_answer(prepared, trials, oracle, target_attainment, chosen))
    written = json_out is None or write_json(json_out, _doc(prepared, trials, results, target_attainment, chosen))
    if chosen is None or not written:
        raise typer.Exit(1)
