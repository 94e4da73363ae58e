"""The simulator benchmark's report: `docs/benchmarks.md` from the results `bench` gathered."""

from __future__ import annotations

import argparse
import math
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path

from inferscale.perf.calibration import calibration_rows
from inferscale.scaling.durations import format_duration
from inferscale.sim import lean_oracle
from inferscale.sim.bench_outage import section as outage_section
from inferscale.sim.bench_setup import (
    GOAL_ATTAINMENT,
    GOAL_GPU_RATIO,
    GOAL_SPEED,
    GPU,
    INFERSCALE,
    MODEL,
    ORACLE,
    REFERENCES,
    SLO_ITL,
    SLO_TTFT,
    SLO_TTFT_IDLE_FACTOR,
    SLO_TTFT_QUANTILE,
    SLO_TTFT_STEP,
    TraceRun,
)
from inferscale.sim.bounds import CAPPED_SHARE, Bounds, time_at_max
from inferscale.sim.policies import POLICY_NAMES
from inferscale.sim.reactive_reference import AtBudget
from inferscale.sim.run import RunResult
from inferscale.sim.scenario import DEFAULT_TIME_TO_READY, MAX_OVER_PEAK
from inferscale.sim.scores import share_text as _pct


def _times(x: float) -> str:
    """A GPU-hour ratio, rounded up to thousandths: one above the goal never prints as it."""
    return "–" if math.isnan(x) else f"{math.ceil(1000 * x - 1e-9) / 1000:.3f}"


def _variants(runs: list[TraceRun]) -> list[TraceRun]:
    return [run.at_budget for run in runs if run.at_budget is not None]


def _by_seed(run: TraceRun) -> dict[int, dict[str, RunResult]]:
    """Seed 0 (the tables above) and the other seeds, when inferscale ran under them."""
    if INFERSCALE not in run.request_level or not run.seeds:
        return {}
    return {0: run.request_level, **run.seeds}


def _seed_goal(run: TraceRun, mode: str) -> str:
    by_seed = _by_seed(run)
    att = [r[INFERSCALE].scores.slo_attainment for r in by_seed.values()]
    ratio = [_ratio(r[INFERSCALE], r) for r in by_seed.values()]
    met = sum(a >= GOAL_ATTAINMENT and x <= GOAL_GPU_RATIO for a, x in zip(att, ratio, strict=True))
    return (
        f"| inferscale across seeds {', '.join(map(str, sorted(by_seed)))} — {run.name} ({mode}) "
        f"| {_pct(min(att))} to {_pct(max(att))} at {_times(min(ratio))}× to {_times(max(ratio))}×; "
        f"≥ 99% at ≤ 1.15× on {met} of {len(by_seed)} seeds |"
    )


def _seed_table(run: TraceRun) -> list[str]:
    lines = [
        "| seed | inferscale attainment | inferscale GPU-h | × oracle | oracle attainment | oracle GPU-h |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for seed, results in sorted(_by_seed(run).items()):
        me, oracle = results[INFERSCALE], results.get(ORACLE)
        lines.append(
            f"| {seed} | {_pct(me.scores.slo_attainment)} | {me.scores.gpu_hours:,.2f} | {_times(_ratio(me, results))} "
            f"| {_oracle_cells(oracle)} |"
        )
    return lines


def _oracle_cells(oracle: RunResult | None) -> str:
    """The oracle's attainment and GPU-hours, two cells of a row."""
    if oracle is None:
        return "– | –"
    return f"{_pct(oracle.scores.slo_attainment)} | {oracle.scores.gpu_hours:,.2f}"


def _labels(run: TraceRun) -> list[tuple[str, bool]]:
    """(label, whether it is the 14-day fluid replay) of each replay of `run` that a goal is read on."""
    level = "request-level slice" if run.fluid_full else "request-level"
    return [(f"{run.name} (fluid, 14 days)", True), (f"{run.name} ({level})", False)]


def _cold_start_rows(run: TraceRun) -> list[tuple[str, str, dict[str, RunResult]]]:
    """(replay, time-to-ready, results) of `run` at the benchmark's time-to-ready and the shorter ones."""
    rows = []
    for label, full in _labels(run):
        default = run.fluid_full if full else run.request_level
        shorter = run.cold_starts_full if full else run.cold_starts
        if shorter and INFERSCALE in default:
            rows.append((label, DEFAULT_TIME_TO_READY, default))
            rows += [(label, str(c.time_to_ready), c.results) for c in shorter]
    return rows


def _reactive_rows(run: TraceRun) -> list[tuple[str, RunResult, dict[str, RunResult], dict[str, AtBudget]]]:
    """(replay, inferscale's result, the replay's results, the reactive oracle at each budget)."""
    rows = []
    for label, full in _labels(run):
        results = run.fluid_full if full else run.request_level
        reactive = run.reactive_full if full else run.reactive
        if reactive and INFERSCALE in results:
            rows.append((label, results[INFERSCALE], results, reactive))
    return rows


def _lean_rows(runs: list[TraceRun]) -> list[lean_oracle.LeanRow]:
    rows = []
    for run in runs:
        for label, full in _labels(run):
            results, lean = (run.fluid_full, run.lean_full) if full else (run.request_level, run.lean)
            if lean is not None and INFERSCALE in results and ORACLE in results:
                rows.append(lean_oracle.LeanRow(label, results[INFERSCALE], results[ORACLE], lean))
    return rows


def _at_budget_cell(a: AtBudget) -> str:
    s = a.result.scores
    return f"{_pct(s.slo_attainment)} (margin {a.margin:.2f}; {s.gpu_hours:,.2f} GPU-h, {100 * a.off_budget:+.1f}%)"


def _reactive_goals(runs: list[TraceRun]) -> list[str]:
    cells = []
    for run in runs:
        for label, _, _, reactive in _reactive_rows(run):
            goal = reactive["goal"].result.scores.slo_attainment
            cells.append(f"{label} {_pct(goal)}{'' if goal >= GOAL_ATTAINMENT else ' (no)'}")
    if not cells:
        return []
    return [
        "| without foresight: the reactive oracle (each window's need known when the window starts, nothing later) "
        f"at {GOAL_GPU_RATIO}× the oracle's GPU-h reaches ≥ 99% | " + "; ".join(cells) + " |"
    ]


def _reactive_section(runs: list[TraceRun]) -> list[str]:
    rows = [row for run in runs for row in _reactive_rows(run)]
    if not rows:
        return []
    lines = [
        "## Foresight: the most a policy that only reacts reaches",
        "",
        "The reactive oracle knows the need of the window it is in the moment the window starts (the oracle's "
        "count for that window's requests) and nothing after it; it pays every cold start, since what it asks "
        "for is Ready a time-to-ready later. Replayed with its count times a margin, it is asked at two budgets "
        "(`sim/reactive_reference.py`): inferscale's GPU-hours, where more attainment than inferscale's is "
        "what inferscale's policy leaves (late observation, holds) and less is what its forecast bought; and the "
        f"goal's {GOAL_GPU_RATIO}× the oracle's GPU-hours, where a miss of 99% means no policy without foresight "
        "of the traffic meets the goal on that replay. The margin is searched; each cell gives its GPU-hours "
        "and how far they are from the budget.",
        "",
        f"| replay | inferscale | reactive oracle at inferscale's GPU-h | reactive oracle at {GOAL_GPU_RATIO}× the "
        "oracle's GPU-h |",
        "|---|---|---|---|",
    ]
    for label, me, results, reactive in rows:
        s = me.scores
        lines.append(
            f"| {label} | {_pct(s.slo_attainment)} at {s.gpu_hours:,.2f} GPU-h ({_times(_ratio(me, results))}×) "
            f"| {_at_budget_cell(reactive[INFERSCALE])} | {_at_budget_cell(reactive['goal'])} |"
        )
    return [*lines, ""]


def _goals_met(results: dict[str, RunResult]) -> bool:
    me = results[INFERSCALE]
    return me.scores.slo_attainment >= GOAL_ATTAINMENT and _ratio(me, results) <= GOAL_GPU_RATIO


def _cold_start_goals(runs: list[TraceRun]) -> list[str]:
    """One Goals line per shorter time-to-ready: on how many replays inferscale meets both goals there."""
    by_ttr: dict[str, list[tuple[str, bool]]] = {}
    for run in runs:
        for label, ttr, results in _cold_start_rows(run):
            by_ttr.setdefault(ttr, []).append((label, _goals_met(results)))
    lines = []
    for ttr, outcomes in by_ttr.items():
        met = [label for label, ok in outcomes if ok]
        missed = [label for label, ok in outcomes if not ok]
        where = f"missed on {'; '.join(missed)}" if missed else "met on every replay"
        lines.append(
            f"| inferscale ≥ 99% attainment at ≤ 1.15× oracle GPU-h with a time-to-ready of {ttr} "
            f"| {len(met)} of {len(outcomes)} replays; {where} |"
        )
    return lines


def _cold_start_section(runs: list[TraceRun]) -> list[str]:
    rows = [row for run in runs for row in _cold_start_rows(run)]
    if not rows:
        return []
    lines = [
        "## What a faster cold start buys",
        "",
        "inferscale and the oracle replayed again with every new replica Ready sooner than the "
        f"{DEFAULT_TIME_TO_READY} of a cold vLLM pod: same requests, warm start, seed and TTFT target; only "
        "the start-up times differ (`sim/cold_start.py`). About a minute is what a pod with its caches kept "
        "takes (weights on node-local disk, the torch.compile cache persisted, the image pre-pulled: 59-82 s "
        "measured for Llama-3.1-8B). "
        "The misses a shorter start removes are the ones the cold start caused; those left are the policy's.",
        "",
        "| replay | time-to-ready | inferscale attainment | inferscale GPU-h | × oracle | both goals | "
        "oracle attainment | oracle GPU-h |",
        "|---|---|---:|---:|---:|---|---:|---:|",
    ]
    for label, ttr, results in rows:
        me, oracle = results[INFERSCALE], results.get(ORACLE)
        lines.append(
            f"| {label} | {ttr} | {_pct(me.scores.slo_attainment)} | {me.scores.gpu_hours:,.2f} "
            f"| {_times(_ratio(me, results))} | {'met' if _goals_met(results) else 'missed'} "
            f"| {_oracle_cells(oracle)} |"
        )
    return [*lines, ""]


def _ratio(r: RunResult, results: dict[str, RunResult]) -> float:
    oracle = results.get(ORACLE)
    if oracle is None or oracle.scores.gpu_hours <= 0:
        return math.nan
    return r.scores.gpu_hours / oracle.scores.gpu_hours


def _policy_table(results: dict[str, RunResult], bounds: Bounds | None = None) -> list[str]:
    """One row per policy; with `bounds`, the share of the run each spent at max replicas, and a mark on
    the × oracle of those whose GPU-hours the cap set."""
    lines = [
        "| policy | SLO attainment | GPU-hours | × oracle | at max replicas | scale actions | TTFT P95 | TTFT P99 "
        "| ITL mean | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    capped = False
    for name, r in results.items():
        s = r.scores
        ratio = _ratio(r, results)
        at_max = time_at_max(r.timeline, bounds.max_replicas) if bounds is not None else math.nan
        mark = "†" if at_max >= CAPPED_SHARE else ""
        capped = capped or bool(mark)
        itl = format_duration(s.itl_mean_s) if s.itl_mean_s is not None else "–"
        p95 = format_duration(s.ttft_p95_s) if math.isfinite(s.ttft_p95_s) else "∞"
        p99 = format_duration(s.ttft_p99_s) if math.isfinite(s.ttft_p99_s) else "∞"
        lines.append(
            f"| {'**' + name + '**' if name == INFERSCALE else name} | {_pct(s.slo_attainment)} | {s.gpu_hours:,.1f} | "
            f"{'–' if math.isnan(ratio) else f'{ratio:.2f}{mark}'} | {'–' if math.isnan(at_max) else _pct(at_max)} | "
            f"{s.scale_actions} | {p95} | {p99} | {itl} | {r.wall_seconds:.1f} |"
        )
    if capped and bounds is not None:
        lines += [
            "",
            f"† at max replicas ({bounds.max_replicas}, {MAX_OVER_PEAK}× the peak need) for {CAPPED_SHARE:.0%} of the "
            "run or more: its GPU-hours are bounded by the benchmark's cap, not chosen by the peer it models.",
        ]
    return lines


def _targets_table(runs: list[TraceRun], names: list[str]) -> list[str]:
    """Each baseline's configured target on the replays where the baselines ran, and the cap."""
    rows = [(f"{r.name} (14 days, fluid)", r.full_bounds) if r.fluid_full else (r.name, r.bounds) for r in runs]
    rows += [(v.name, v.bounds) for v in _variants(runs)]
    known = [(label, b) for label, b in rows if b is not None]
    shown = [n for n in names if any(n in b.targets for _, b in known)]
    if not shown:
        return []
    lines = [
        "",
        "| replay | max replicas | " + " | ".join(shown) + " |",
        "|---|---:|" + "---|" * len(shown),
    ]
    for label, b in known:
        lines.append(f"| {label} | {b.max_replicas} | " + " | ".join(b.targets.get(n, "–") for n in shown) + " |")
    return lines


def _fluid_summary(runs: Sequence[TraceRun]) -> str:
    """What the validation tables below say, in numbers: which way the fluid mode errs, and by how much."""
    errors = [e for run in runs for e in fluid_error(run.request_level, run.fluid_same).values()]
    lower = [e for e in errors if e > 0.01]
    higher = [e for e in errors if e < -0.01]
    if not errors:
        return "No replay ran in both modes."
    text = f"Of {len(errors)} policy runs, the fluid mode read"
    if lower:
        text += f" a lower attainment for {len(lower)} (by up to {100 * max(lower):.1f} points)"
    if higher:
        text += f"{',' if lower else ''} a higher one for {len(higher)} (by up to {100 * -min(higher):.1f} points)"
    text += f"{',' if lower or higher else ''} and within a point for {len(errors) - len(lower) - len(higher)}."
    return text + (
        " It reads lower where a fleet runs near its saturation rate: its steady-state queue turns a few percent "
        "over a replica's saturation rate into a growing backlog, which the engine's batching absorbs; it reads "
        "higher where burstiness inside a minute or the tail of token lengths decide, which it does not see. The "
        "14-day figures above carry this error; their verdicts name a baseline it could put ahead of inferscale."
    )


def _validation_table(level: dict[str, RunResult], fluid: dict[str, RunResult]) -> list[str]:
    lines = [
        "| policy | attainment: request-level | fluid | GPU-h: request-level | fluid | Δ GPU-h |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in level.items():
        f = fluid.get(name)
        if f is None:
            continue
        a, b = r.scores, f.scores
        delta = (b.gpu_hours - a.gpu_hours) / a.gpu_hours if a.gpu_hours else math.nan
        lines.append(
            f"| {name} | {_pct(a.slo_attainment)} | {_pct(b.slo_attainment)} | {a.gpu_hours:,.1f} | "
            f"{b.gpu_hours:,.1f} | {100 * delta:+.1f}% |"
        )
    return lines


def fluid_error(level: dict[str, RunResult], fluid: dict[str, RunResult]) -> dict[str, float]:
    """Per policy, request-level attainment minus the fluid mode's on the same load."""
    return {
        name: r.scores.slo_attainment - fluid[name].scores.slo_attainment for name, r in level.items() if name in fluid
    }


def _unsettled(results: dict[str, RunResult], error: Mapping[str, float]) -> list[str]:
    """Baselines the fluid mode's measured error could put ahead of inferscale: at most its GPU-hours, and at
    or above its attainment once each policy's attainment is corrected by its own error on the slice."""
    me = results[INFERSCALE].scores
    mine = me.slo_attainment + error.get(INFERSCALE, 0.0)
    out = []
    for name, r in results.items():
        if name == INFERSCALE or name in REFERENCES or name not in error:
            continue
        b = r.scores
        corrected = b.slo_attainment + error[name]
        if b.gpu_hours <= me.gpu_hours and corrected >= mine and b.slo_attainment < me.slo_attainment:
            out.append(
                f"{name} ({_pct(b.slo_attainment)} in the fluid mode at {b.gpu_hours:,.1f} GPU-h, read "
                f"{100 * error[name]:+.1f} points by the request-level engine on the slice, inferscale "
                f"{100 * error.get(INFERSCALE, 0.0):+.1f})"
            )
    return out


def _verdict(results: dict[str, RunResult], slo_ttft: float, error: Mapping[str, float] | None = None) -> list[str]:
    """Goals for inferscale on one replay, measured; where it loses, the numbers that say why. `error`: for a
    fluid replay, each policy's fluid-mode error on the request-level slice of the same trace."""
    me = results.get(INFERSCALE)
    if me is None:
        return ["inferscale did not run on this trace."]
    s = me.scores
    ratio = _ratio(me, results)
    out = [
        f"- attainment {_pct(s.slo_attainment)} (goal ≥ {100 * GOAL_ATTAINMENT:.0f}%): "
        f"{'met' if s.slo_attainment >= GOAL_ATTAINMENT else '**missed**'}",
        f"- GPU-hours {_times(ratio)}× the oracle (goal ≤ {GOAL_GPU_RATIO}×): "
        f"{'met' if ratio <= GOAL_GPU_RATIO else '**missed**'}",
    ]
    # Behind a baseline that dominates (attainment >= at GPU-h <=) or that reaches the attainment goal
    # with fewer GPU-hours; one that buys more attainment with more GPUs is a different trade, listed.
    beaten, costlier = [], []
    for name, r in results.items():
        if name == INFERSCALE or name in REFERENCES:
            continue
        b = r.scores
        if b.slo_attainment >= s.slo_attainment and b.gpu_hours <= s.gpu_hours:
            beaten.append(f"{name} (dominates: {_pct(b.slo_attainment)} at {b.gpu_hours:,.1f} GPU-h)")
        elif b.slo_attainment >= GOAL_ATTAINMENT and b.gpu_hours < s.gpu_hours:
            beaten.append(
                f"{name} (meets the goal with fewer GPU-hours: {_pct(b.slo_attainment)} at {b.gpu_hours:,.1f})"
            )
        elif b.slo_attainment > s.slo_attainment:
            costlier.append(f"{name} ({_pct(b.slo_attainment)} at {b.gpu_hours:,.1f} GPU-h)")
    out.append(
        "- ahead of every baseline (none dominates it or meets the attainment goal with fewer GPU-hours): "
        + ("met" if not beaten else "**missed** — behind " + "; ".join(beaten))
    )
    unsettled = _unsettled(results, error) if error else []
    if unsettled:
        out.append(
            "- **not settled by the fluid mode**: corrected by each policy's own fluid-mode error on the request-level "
            "slice of this trace, these would reach inferscale's attainment with no more GPU-hours: "
            + "; ".join(unsettled)
        )
    if costlier:
        out.append("- higher attainment at more GPU-hours: " + "; ".join(costlier))
    tl = me.timeline
    bad = [i for i, v in enumerate(tl.ttft_p95) if v is not None and v > slo_ttft]
    if bad:
        cold = sum(1 for i in bad if tl.ready[i] < tl.provisioned[i])
        out.append(
            f"- observed TTFT P95 was above the SLO in {len(bad)} of {len(tl.at)} minutes; in {cold} of them "
            f"replicas were provisioned but not yet Ready (the policy scaled, the cold start had not finished)"
        )
    return out


def write_report(
    runs: list[TraceRun],
    args: argparse.Namespace,
    speed: tuple[float, str],
    nim: list[tuple[str, float, float, str]],
    wall: float,
) -> str:
    cpu = _cpu_model()
    lines = [
        "# Benchmarks: policies on the traces, simulator speed, perf calibration",
        "",
        "Generated by `python -m inferscale.sim.bench"
        + (f" --workers {args.workers}" if args.workers != 2 else "")
        + "` (wired to `make bench-sim`); do not edit by hand.",
        f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"whole run {wall / 60:.1f} min with {args.workers} worker processes.",
        "",
        "## Setup",
        "",
        f"- Replica: {MODEL} on {GPU} (TP1), the perf model's profile; SLO per request: TTFT ≤ the trace's "
        f"target and mean ITL ≤ {format_duration(SLO_ITL)}.",
        f"- TTFT target, the same rule for every trace: {format_duration(SLO_TTFT)}, or "
        f"{SLO_TTFT_IDLE_FACTOR:g}× the idle-replica TTFT (chunked prefill alone, no queue) of the "
        f"P{100 * SLO_TTFT_QUANTILE:g} input length of the request-level replay, rounded up to "
        f"{format_duration(SLO_TTFT_STEP)}, whichever is larger, so that nearly every request can meet it; "
        "the rate scaling, every policy and the oracle use that target. Targets: "
        + ", ".join(f"{r.name} {format_duration(r.slo_ttft)}" for r in runs)
        + ".",
        f"- Time-to-ready of a new replica: uniform {DEFAULT_TIME_TO_READY} (BLIS: 240 ± 30 s); every fleet "
        "starts warm with what the busiest minute of the first 10 minutes needs; max replicas = "
        f"{MAX_OVER_PEAK}× the peak need.",
        f"- Scaling rule for every trace: the rate is multiplied so that the busiest minute needs "
        f"{args.peak_replicas} replicas at the SLO (perf-model capacity at the trace's mean lengths).",
        "- Scores: SLO attainment = share of requests with TTFT ≤ target and mean ITL ≤ target (unfinished "
        "after a 2-minute grace = miss); GPU-hours = Σ replica lifetime from creation to deletion (drained) × GPUs; "
        "× oracle = GPU-hours over the oracle's. TTFT percentiles over all requests.",
        "- Request-level = the event-to-event vLLM engine per replica (continuous batching, chunked prefill, "
        "KV preemption) behind a least-outstanding-requests router, observed through a 5-s scrape model. "
        "Fluid = the aggregate mode (`sim/fluid.py`) used for the 14-day ServeGen replays.",
        "- ServeGen curves are piecewise constant per 10-minute window (as published and as the loader generates "
        "them), so the rate can jump several-fold at a window boundary: a policy that reacts to load instead of "
        "forecasting it is late by a full time-to-ready at every such jump.",
        "- Policies run from the working tree at the time of the run; the baselines are implemented from their "
        "documented formulas and defaults (`sim/policies/`).",
        "- The baselines' targets on each replay they ran on, and the max replicas that caps every fleet there. "
        "Where a peer's default means nothing for a vLLM pod (Knative's 100 concurrent requests, AIBrix's sample KV "
        "0.5, out of reach of short requests), the target is what a user who load-tested would set: one replica's "
        "SLO operating point at the trace's mean lengths (perf model), with Knative's 70% target utilization on "
        "top. aibrix-apa is AIBrix since PR #2671 (APA on the 180-s window mean, with the pending-replica guard "
        "both ways). wva-saturation scales through the HPA its Helm chart installs (External metric "
        "`wva_desired_replicas`, AverageValue 1, 240-s windows): above 10 replicas its +1 and -1 are inside the "
        "HPA's 0.1 tolerance, and the fleet stays where it is.",
        *_targets_table(runs, [n for n in POLICY_NAMES if n in args.policies]),
        "",
        "## Goals",
        "",
        "| goal | measured |",
        "|---|---|",
    ]
    for run in runs:
        res = run.fluid_full or run.request_level
        me = res.get(INFERSCALE)
        if me is None:
            continue
        mode = "fluid, 14 days" if run.fluid_full else "request-level"
        lines.append(
            f"| inferscale ≥ 99% attainment at ≤ 1.15× oracle GPU-h, ahead of every baseline — {run.name} ({mode}) "
            f"| {_pct(me.scores.slo_attainment)} at {_times(_ratio(me, res))}× |"
        )
    for variant in _variants(runs):
        me = variant.request_level.get(INFERSCALE)
        if me is not None:
            lines.append(
                f"| inferscale ≥ 99% attainment at ≤ 1.15× oracle GPU-h, ahead of every baseline — {variant.name}, "
                f"the planner's budget (request-level) | {_pct(me.scores.slo_attainment)} at "
                f"{_times(_ratio(me, variant.request_level))}× |"
            )
    for run in [*runs, *_variants(runs)]:
        if _by_seed(run):
            lines.append(_seed_goal(run, "request-level slice" if run.fluid_full else "request-level"))
    lines += _cold_start_goals([*runs, *_variants(runs)])
    lines += _reactive_goals([*runs, *_variants(runs)])
    lines += lean_oracle.goal_row(_lean_rows([*runs, *_variants(runs)]), GOAL_GPU_RATIO)
    lines.append(f"| simulator ≥ {GOAL_SPEED:,.0f} requests/s on one core | {speed[0]:,.0f} requests/s ({speed[1]}) |")
    for run in runs:
        if run.fluid_full:
            walls = {n: r.wall_seconds for n, r in run.fluid_full.items()}
            slowest = max(walls, key=lambda n: walls[n])
            sim_only = min(walls.values())
            lines.append(
                f"| 14-day ServeGen replay < 1 min — {run.name} ({run.full_requests / 1e6:,.0f} M requests) | fluid: "
                f"{sim_only:.1f} s (cheapest policy) to {walls[slowest]:.1f} s ({slowest}) per policy; request-level "
                f"would take ≈ {run.full_requests / speed[0] / 3600:,.1f} h at the measured speed |"
            )
    lines.append("")
    for run in runs:
        lines += _trace_section(run, args)
    seeded = [run for run in [*runs, *_variants(runs)] if _by_seed(run)]
    if seeded:
        lines += [
            "## Seed spread (request level)",
            "",
            "inferscale and the oracle replayed again under other seeds: the replicas' start-up times are "
            "drawn anew (and ServeGen's requests are generated anew from the same curve). A goal met on "
            "one seed and missed on another is met by luck, not by margin.",
            "",
        ]
        for run in seeded:
            lines += [f"### {run.name}", "", *_seed_table(run), ""]
    lines += _reactive_section([*runs, *_variants(runs)])
    lines += lean_oracle.section(_lean_rows([*runs, *_variants(runs)]))
    lines += _cold_start_section([*runs, *_variants(runs)])
    lines += outage_section([(run.name, run.request_level, run.outages) for run in [*runs, *_variants(runs)]])
    lines += [
        "## Fluid mode against the request-level engine",
        "",
        "Same policies, same load (the request-level replay's arrivals binned per minute). " + _fluid_summary(runs),
        "",
    ]
    for run in runs:
        lines += [f"### {run.name}", "", *_validation_table(run.request_level, run.fluid_same), ""]
    lines += [
        "## Simulator speed",
        "",
        f"{speed[0]:,.0f} simulated requests per wall-second on one core ({speed[1]}). Per-policy wall times are in "
        "the tables above (each policy runs in its own process; a slow policy's own decision code counts in its time).",
        "",
        "## The engine against NIM's closed-loop measurement (Llama-3.1-8B, H100, ISL/OSL 200/200)",
        "",
        "| concurrency | metric | NIM measured | simulated engine | error |",
        "|---:|---|---:|---:|---:|",
    ]
    for case, measured, simulated, unit in nim:
        c, metric = case.split(" ", 1)
        lines.append(
            f"| {c} | {metric} | {measured:,.2f} {unit} | {simulated:,.2f} {unit} | "
            f"{100 * (simulated - measured) / measured:+.1f}% |"
        )
    lines += [
        "",
        "NIM ran FP8 engines, so the simulated replica here has FP8 weights and an FP8 KV cache, as in the "
        "calibration below (the replays above run BF16). TTFT is the engine's: NIM's client also times HTTP and "
        "tokenising.",
        "",
        "## Perf-model calibration (`inferscale.perf.calibration`)",
        "",
        "| case | measured | model | unit | error |",
        "|---|---:|---:|---|---:|",
    ]
    for row in calibration_rows():
        lines.append(
            f"| {row.case} | {row.measured:,.2f} | {row.model:,.2f} | {row.unit} | {row.error_percent:+.1f}% |"
        )
    lines.append("")
    return "\n".join(lines)


def _trace_section(run: TraceRun, args: argparse.Namespace) -> list[str]:
    lines = [f"## {run.name}", ""]
    mi, mo = run.mean_lengths
    line = (
        f"Format {run.fmt}; rate ×{run.rate_scale:.3g}; mean input {mi:,.0f} / output {mo:,.0f} tokens; "
        f"TTFT target {format_duration(run.slo_ttft)}."
    )
    if run.hopeless > 0:
        line += (
            f" {_pct(run.hopeless)} of the request-level replay's requests miss the TTFT target even alone on an "
            f"idle replica (prompt too long to prefill in time): no policy can exceed {_pct(1 - run.hopeless)} "
            "attainment here."
        )
    lines.append(line)
    if run.fluid_full:
        lines += [
            "",
            f"### 14 days, fluid ({run.full_requests:,.0f} requests over {run.full_duration / 86400:.1f} days)",
            "",
            *_policy_table(run.fluid_full, run.full_bounds),
            "",
            "inferscale against the goals (fluid):",
            "",
            *_verdict(run.fluid_full, run.slo_ttft, fluid_error(run.request_level, run.fluid_same)),
            "",
            f"![{run.name} 14 days](img/sim-{run.name}-14d.png)",
            "",
            f"### First {format_duration(run.duration * args.slice_time_scale)} of the curve, "
            f"{args.slice_time_scale:g}× faster (so {format_duration(run.duration)}), request-level "
            f"({run.requests:,} requests)",
        ]
    else:
        lines += ["", f"{run.requests:,} requests over {format_duration(run.duration)}, request-level."]
    lines += [
        "",
        *_policy_table(run.request_level, run.bounds),
        "",
        "inferscale against the goals:",
        "",
        *_verdict(run.request_level, run.slo_ttft),
        "",
        f"![{run.name}](img/sim-{run.name}.png)",
        "",
    ]
    if run.at_budget is not None:
        lines += [
            "### The same replay at the token budget `inferscale plan` suggests: "
            f"--max-num-batched-tokens {run.budget}",
            "",
            "At this trace's mean lengths, `inferscale plan` reports that one engine step carrying a prompt's "
            f"prefill chunk (up to {run.default_budget:,} tokens, vLLM's default budget on this GPU) takes longer "
            f"than the {format_duration(SLO_ITL)} ITL target on its own, so requests with few output tokens that "
            "share such a step miss their per-request ITL at any replica count. It suggests the largest budget "
            "that keeps such a step within the target. Every replica (and every policy's capacity model) runs at "
            "that budget here; "
            "the rate, the TTFT target and the seed are those of the table above.",
            "",
            *_policy_table(run.at_budget.request_level, run.at_budget.bounds),
            "",
            "inferscale against the goals:",
            "",
            *_verdict(run.at_budget.request_level, run.slo_ttft),
            "",
        ]
    return lines


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
