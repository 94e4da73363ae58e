"""`inferscale tune`: replay a trace with inferscale at several `capacityUtilization` values and say the
cheapest that meets an SLO-attainment target, with the oracle's GPU-hours for scale."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from statistics import mean
from typing import Annotated, Any, NamedTuple

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
)
from inferscale.commands.simulate import (
    check_outputs,
    gpu_hours_text,
    idle_floor,
    input_errors,
    load,
    note_limits,
    replay,
    result_console,
    scenario_from_flags,
    scenario_json,
    scores_json,
    too_short,
    workers_count,
    write_json,
)
from inferscale.perf import PerfError, PrefillStep, advice, prefill_step
from inferscale.scaling.durations import format_duration
from inferscale.sim.policies.oracle import Oracle
from inferscale.sim.run import RunResult
from inferscale.sim.scenario import DEFAULT_TIME_TO_READY, FluidPrepared, Prepared
from inferscale.sim.scores import Scores, share_text
from inferscale.sim.tune import (
    DEFAULT_CANDIDATES,
    Trial,
    best_attainment,
    cheapest_meeting,
    inferscale_at,
    lowest_attainment,
    still_rising,
)

REFERENCE = Oracle.name


def _candidates(given: list[float] | None) -> list[float]:
    values = list(given or DEFAULT_CANDIDATES)
    for v in values:
        checks.fraction("--capacity-utilization", v)
    checks.given_once("--capacity-utilization", values)
    return sorted(values)


def _seeds(given: list[int] | None) -> list[int]:
    seeds = list(given or [0])
    for seed in seeds:
        checks.seed(seed)
    checks.given_once("--seed", seeds)
    return seeds


def _label(cu: float) -> str:
    return f"capacityUtilization {cu!r}"  # exact: 0.7 and 0.7000001 are two replays


def _value_text(cu: float) -> str:
    return f"{cu:.2f}" if round(cu, 2) == cu else repr(cu)


def _goal_text(target: float) -> str:
    return f"{100 * target:.6g}%"  # as given: 99.9999% is not 100.00%


class Reference(NamedTuple):
    """The oracle over the same seeds: its lowest attainment and mean GPU-hours, as the trials are read."""

    attainment: float
    gpu_hours: float

    @classmethod
    def of(cls, runs: list[Scores]) -> Reference:
        return cls(lowest_attainment(runs), mean(r.gpu_hours for r in runs))

    def ratio(self, gpu_hours: float) -> float | None:
        return gpu_hours / self.gpu_hours if self.gpu_hours > 0 else None


def _count(value: float) -> str:
    """A mean count over seeds: 3708, 54.7 (not 54.6667)."""
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _row(scores: list[Scores] | tuple[Scores, ...]) -> list[str]:
    """Actions, TTFT P95 and P99 over the seeds: the mean count, the worst percentiles."""
    return [
        _count(mean(r.scale_actions for r in scores)),
        format_duration(max(r.ttft_p95_s for r in scores)),
        format_duration(max(r.ttft_p99_s for r in scores)),
    ]


def _table(trials: list[Trial], oracle: list[Scores], target: float, chosen: Trial | None) -> Table:
    seeds = len(oracle)
    over = f" (over {seeds} seeds: the lowest attainment, highest TTFT, mean GPU-h and actions)" if seeds > 1 else ""
    table = Table(title=f"inferscale by capacityUtilization{over}; target: {_goal_text(target)} SLO attainment")
    for col in ("capacityUtilization", "attainment", "GPU-h", "× oracle", "actions", "TTFT P95", "TTFT P99", "meets"):
        table.add_column(col, justify="right")
    ref = Reference.of(oracle)
    for t in trials:
        ratio = ref.ratio(t.gpu_hours)
        table.add_row(
            _value_text(t.capacity_utilization) + (" ←" if t is chosen else ""),
            share_text(t.attainment),
            gpu_hours_text(t.gpu_hours),
            f"{ratio:.2f}" if ratio is not None else "-",
            *_row(t.runs),
            "yes" if t.meets(target) else "no",
        )
    table.add_section()
    table.add_row(
        "oracle (knows the future)",
        share_text(ref.attainment),
        gpu_hours_text(ref.gpu_hours),
        "1.00",
        *_row(oracle),
        "",
    )
    return table


def _answer(
    prepared: Prepared | FluidPrepared, trials: list[Trial], oracle: list[Scores], target: float, chosen: Trial | None
) -> str:
    goal = _goal_text(target) + (f" on each of the {len(oracle)} seeds" if len(oracle) > 1 else "")
    if chosen is not None:
        ratio = Reference.of(oracle).ratio(chosen.gpu_hours)
        cost = f"{gpu_hours_text(chosen.gpu_hours)} GPU-h" + (f", {ratio:.2f}× the oracle's" if ratio else "")
        return (
            f"capacityUtilization {chosen.capacity_utilization:g} is the cheapest value tried that reaches {goal}: "
            f"{share_text(chosen.attainment)} at {cost}.{_tie(trials, target, chosen)}\nIn the InferenceService:\n"
            f"  spec:\n    targets:\n      capacityUtilization: {chosen.capacity_utilization:g}"
        )
    best = best_attainment(trials)
    if best is None:
        return f"no capacityUtilization tried reaches {goal}: no replay scored a request."
    lines = [
        f"no capacityUtilization tried reaches {goal}; the most is {share_text(best.attainment)} at "
        f"{best.capacity_utilization:g} ({gpu_hours_text(best.gpu_hours)} GPU-h)."
    ]
    floor = _idle_floor(prepared)
    if floor is not None:
        lines.append(floor)
    elif still_rising(trials):
        lines.append("Attainment still rises at the lowest value tried: try lower ones with --capacity-utilization.")
    elif len(trials) > 1:
        lines.append(
            "Lower values do not raise it: more standing headroom does not help. If the misses come while new "
            "replicas start (`inferscale simulate --plot` shows when they fall), a shorter time-to-ready or a "
            "schedule floor (spec.warmup.schedules) covers them."
        )
    step = _prefill_step(prepared)
    if step is not None and step.within_slo is False:
        # the misses no replica count fixes: say so, or the user lowers the headroom for nothing
        lines.append(f"The engine's token budget caps it too: {advice(step, prepared.scenario.slo_itl)}.")
    return "\n".join(lines)


def _tie(trials: list[Trial], target: float, chosen: Trial) -> str:
    """Said when values tie with the chosen one: the replay did not tell them apart, so the choice among them is
    the rule's (the least headroom), not evidence, and a user should not read it as a measured optimum."""
    tied = [t for t in trials if t.meets(target) and t.gpu_hours == chosen.gpu_hours]
    if len(tied) < 2:
        return ""
    scaled = any(r.scale_actions for t in tied for r in t.runs)
    how = "the same GPU-hours" if scaled else "the same GPU-hours and no scale action"
    values = ", ".join(f"{t.capacity_utilization:g}" for t in tied)
    return (
        f"\nThe values {values} tie ({how}): this replay does not tell them apart, and the highest is given as "
        "the one holding the least headroom; check it on a longer or busier replay (--duration, --start)."
    )


def _idle_floor(prepared: Prepared | FluidPrepared) -> str | None:
    """The SLO's miss no replica count fixes: an idle replica already over it at the trace's mean lengths."""
    floor, s = idle_floor(prepared), prepared.scenario
    if floor is None:
        return None
    ttft, itl = floor
    return (
        f"An idle replica's TTFT P95 ({format_duration(ttft)}) and mean ITL ({format_duration(itl)}) at the trace's "
        f"mean lengths are already over the SLO ({format_duration(s.slo_ttft)}, {format_duration(s.slo_itl)}): "
        "no replica count meets it; `inferscale plan` gives the floor for other lengths."
    )


def _prefill_step(prepared: Prepared | FluidPrepared) -> PrefillStep | None:
    ctx, s = prepared.context, prepared.scenario
    try:
        return prefill_step(prepared.profile, ctx.mean_input_tokens, ctx.mean_output_tokens, s.slo_ttft, s.slo_itl)
    except PerfError:
        return None  # no operating point at these lengths: the replay's own scores already say so


def _doc(
    prepared: Prepared | FluidPrepared,
    seeds: list[int],
    trials: list[Trial],
    results: list[dict[str, RunResult]],
    target: float,
    chosen: Trial | None,
) -> dict[str, Any]:
    scenario = scenario_json(prepared)
    del scenario["seed"]  # one per replay: "seeds" below
    del scenario["capacity_utilization"]  # one per trial: "trials" below
    oracle = [r[REFERENCE] for r in results]
    ref = Reference.of([r.scores for r in oracle])

    def per_seed(name: str) -> list[dict[str, Any]]:
        return [{"seed": seed, **scores_json(r[name])} for seed, r in zip(seeds, results, strict=True)]

    return {
        "scenario": scenario,
        "seeds": seeds,
        "target_attainment": target,
        "trials": [
            {
                "capacity_utilization": t.capacity_utilization,
                "slo_attainment": t.attainment,
                "gpu_hours": t.gpu_hours,
                "oracle_ratio": ref.ratio(t.gpu_hours),
                "meets_target": t.meets(target),
                "per_seed": per_seed(_label(t.capacity_utilization)),
            }
            for t in trials
        ],
        "oracle": {"slo_attainment": ref.attainment, "gpu_hours": ref.gpu_hours, "per_seed": per_seed(REFERENCE)},
        "recommended": None if chosen is None else chosen.capacity_utilization,
    }


def tune(
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
    scale_down_window: WindowOpt = None,
    time_to_ready: TimeToReadyOpt = DEFAULT_TIME_TO_READY,
    interval: IntervalOpt = "10s",
    seeds: Annotated[
        list[int] | None,
        typer.Option(
            "--seed",
            help="Seed for request generation and time-to-ready (repeatable): with several, a value meets the "
            "target only if it does on every seed; 0 when omitted.",
        ),
    ] = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    max_num_batched_tokens: MaxNumBatchedTokensOpt = None,
    json_out: JsonOpt = None,
    workers: WorkersOpt = 0,
    mode: ModeOpt = "auto",
) -> None:
    """Find the cheapest capacityUtilization that meets an SLO-attainment target on a trace.

    Replays the trace with inferscale at each candidate value. Exits 1 when none meets the target (or the JSON
    cannot be written), 2 on bad input."""
    with input_errors():
        values, seed_list = _candidates(candidates), _seeds(seeds)
        checks.fraction("--target-attainment", target_attainment)
        workers_count(workers)
        check_outputs(trace, json_out, None, None)
        flags = locals() | {"seed": seed_list[0]}
        scenario = scenario_from_flags(
            flags,
            unset=frozenset({"capacity_utilization", "metrics_outage", "outage_kind", "baseline_target", "read_pods"}),
        )
        prepared = load(scenario, mode)
        short = too_short(prepared)
        if short is not None:  # every value would tie: a recommendation would be noise
            raise checks.InputError(short)

    note_limits(prepared)
    results = []
    for seed in seed_list:
        # the first replay is loaded already; the others draw their own requests and cold starts, one at a
        # time (a replay of millions of requests holds them in memory)
        with input_errors(f"--seed {seed}: "):
            seeded = prepared if seed == seed_list[0] else load(replace(scenario, seed=seed), mode)
        policies = {REFERENCE: partial(seeded.policy, REFERENCE)}
        policies |= {_label(cu): partial(inferscale_at, seeded.context, cu) for cu in values}
        results.append(replay(seeded, policies, workers))
    trials = [Trial(cu, tuple(r[_label(cu)].scores for r in results)) for cu in values]
    oracle, chosen = [r[REFERENCE].scores for r in results], cheapest_meeting(trials, target_attainment)
    result_console().print(_table(trials, oracle, target_attainment, chosen))
    print(_answer(prepared, trials, oracle, target_attainment, chosen))
    doc = _doc(prepared, seed_list, trials, results, target_attainment, chosen)
    written = json_out is None or write_json(json_out, doc)
    if chosen is None or not written:
        raise typer.Exit(1)
