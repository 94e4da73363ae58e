"""The simulator benchmark: every policy on every trace, the simulator's speed, the perf calibration.

    python -m inferscale.sim.bench [--traces DIR] [--out docs/benchmarks.md] [--img docs/img] [--workers N]
        [--seeds 1,2,3,4] [--cold-starts 0.5,0.25] [--no-outages]

Scaling rule, the same for every trace: the rate is multiplied so that the trace's busiest minute
needs `--peak-replicas` replicas (default 24) of the profile at the SLO, by the perf model's capacity
at the trace's mean lengths. Request traces (Azure, Mooncake) are replayed request by request.
ServeGen curves are replayed for their whole 14 days in the fluid mode (`sim/fluid.py`), and a
`--slice` at their start, `--slice-time-scale` times faster (hours of ramps in minutes), request by
request; the fluid mode is validated against the request-level engine on every request-level replay
(same policies, same load). inferscale and the oracle replay each request-level scenario again under
`--seeds`, so that a goal met on one seed's start-up times can be told from one met with margin, and
every scenario at `--cold-starts` of the time-to-ready (`cold_start`), so that the misses a faster start
removes can be told from the policy's; the reactive oracle is searched to inferscale's GPU-hours and to the
goal's (`reactive_reference`), so that the misses any policy without foresight shares can be told apart
too; and every request-level replay again through a metrics outage of each kind (`bench_outage`). The
settings and goals are in `bench_setup`, the report in `bench_report`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from inferscale.perf import EngineLimits, ReplicaProfile, prefill_step, replica_capacity_rps, replica_profile
from inferscale.perf.calibration import NIM_8B, NIM_8B_LENGTHS, fp8_profile
from inferscale.scaling.durations import format_duration
from inferscale.sim.bench_outage import replay as replay_outages
from inferscale.sim.bench_report import write_report
from inferscale.sim.bench_setup import (
    GOAL_ATTAINMENT,
    GOAL_GPU_RATIO,
    GPU,
    INFERSCALE,
    MODEL,
    ORACLE,
    REACTIVE,
    SLO_ITL,
    SLO_TTFT,
    SLO_TTFT_IDLE_FACTOR,
    SLO_TTFT_QUANTILE,
    SLO_TTFT_STEP,
    ProgressLog,
    TraceRun,
)
from inferscale.sim.bounds import Bounds, replay_bounds
from inferscale.sim.cold_start import FACTORS as COLD_START_FACTORS
from inferscale.sim.cold_start import ColdStart
from inferscale.sim.cold_start import replay as replay_cold_starts
from inferscale.sim.engine import EngineConfig, Outcomes, ReplicaEngine
from inferscale.sim.fluid import curve_tables, run_fluid
from inferscale.sim.lean_oracle import Lean, leanest
from inferscale.sim.plots import plot_timelines
from inferscale.sim.policies import POLICY_NAMES
from inferscale.sim.policies.oracle import Oracle
from inferscale.sim.policies.reactive_oracle import ReactiveOracle
from inferscale.sim.reactive_reference import AtBudget, at_budget
from inferscale.sim.run import RunResult, parallel, run_policy
from inferscale.sim.scenario import (
    FluidPrepared,
    Prepared,
    Scenario,
    prepare,
    prepare_fluid,
)
from inferscale.sim.traces import (
    RatePoint,
    TraceError,
    detect_format,
    load_rate_curve,
    load_request_arrays,
    rate_curve,
)


def _lengths(curve: list[RatePoint]) -> tuple[float, float]:
    known = [p for p in curve if p.rate > 0 and p.mean_input is not None and p.mean_output is not None]
    weight = sum(p.rate for p in known)
    return (
        sum(p.rate * (p.mean_input or 0.0) for p in known) / weight,
        sum(p.rate * (p.mean_output or 0.0) for p in known) / weight,
    )


def idle_ttft(cfg: EngineConfig, input_tokens: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Each prompt's TTFT alone on an idle replica: its chunked-prefill steps, no queue."""
    inputs = input_tokens.astype(np.float64)
    return np.asarray(np.ceil(inputs / cfg.max_num_batched_tokens) * cfg.c0 + inputs * cfg.c_prefill)


def slo_ttft_for(input_tokens: npt.NDArray[np.int64], output_tokens: npt.NDArray[np.int64], cfg: EngineConfig) -> float:
    """The trace's TTFT target (see `SLO_TTFT_IDLE_FACTOR`), from the requests an engine accepts: a prompt
    beyond the model's context is refused, and its prefill time would set a target no served prompt needs."""
    input_tokens = input_tokens[~cfg.refuses(input_tokens, output_tokens)]
    if input_tokens.size == 0:
        return SLO_TTFT
    idle = float(np.quantile(idle_ttft(cfg, input_tokens), SLO_TTFT_QUANTILE))
    return max(SLO_TTFT, math.ceil(SLO_TTFT_IDLE_FACTOR * idle / SLO_TTFT_STEP - 1e-9) * SLO_TTFT_STEP)


def scale_for(
    path: Path, fmt: str, profile: ReplicaProfile, peak_replicas: int, slo_ttft: float = SLO_TTFT
) -> tuple[float, tuple[float, float]]:
    """Rate multiplier that makes the busiest minute need `peak_replicas` replicas at the SLO."""
    curve = load_rate_curve(path, fmt, window=60.0)
    mean_in, mean_out = _lengths(curve)
    capacity = replica_capacity_rps(profile, mean_in, mean_out, slo_ttft, SLO_ITL)
    return peak_replicas * capacity / max(p.rate for p in curve), (mean_in, mean_out)


def bench_trace(path: Path, profile: ReplicaProfile, args: argparse.Namespace, log: ProgressLog) -> TraceRun:
    fmt = detect_format(path)
    servegen = fmt == "servegen"
    window = args.slice if servegen else None
    # The slice's curve runs `slice_time_scale` times faster, so that a short request-level replay still
    # spans ramps and jumps (hours of the trace), the case where the fluid mode is most likely wrong.
    time_scale = args.slice_time_scale if servegen else 1.0
    # the prompts of the request-level replay (lengths do not depend on the rate) set the TTFT target
    unscaled, _ = load_request_arrays(path, fmt, time_scale=time_scale, duration=window)
    slo_ttft = slo_ttft_for(unscaled.input_tokens, unscaled.output_tokens, EngineConfig.from_profile(profile))
    scale, lengths = scale_for(path, fmt, profile, args.peak_replicas, slo_ttft)
    run = TraceRun(path.stem, path, fmt, scale, lengths, slo_ttft=slo_ttft)
    names = args.policies
    scenario = Scenario(
        path,
        fmt,
        rate_scale=scale,
        time_scale=time_scale,
        duration=window,
        model=MODEL,
        gpu=GPU,
        slo_ttft=slo_ttft,
        slo_itl=SLO_ITL,
    )
    prepared = prepare(scenario)
    run.requests, run.duration = len(prepared.workload), prepared.workload.duration
    run.bounds = replay_bounds(prepared.context)
    run.hopeless = unloaded_ttft_misses(prepared)
    run.prepared = prepared
    # every policy on the ServeGen slices too: the fluid mode's error, measured per policy on the trace's own
    # traffic, is what says whether a 14-day comparison could reverse (bench_report._verdict)
    level_names = names
    log(
        f"{run.name}: ×{scale:.2f}, TTFT target {format_duration(slo_ttft)}, {run.requests:,} requests request-level, "
        f"policies {', '.join(level_names)}"
    )
    _replay(run, scenario, prepared, level_names, args, log)
    run.default_budget = profile.max_num_batched_tokens
    limits = suggested_limits(profile, lengths, slo_ttft)
    if limits is not None:
        run.budget = limits.max_num_batched_tokens
        run.at_budget = _at_budget(run, scenario, limits, level_names, args, log)
    curve = rate_curve(prepared.context.trace, 60.0)
    run.fluid_same = _fluid_all(level_names, curve, prepared.workload.duration, prepared, args.workers)
    if servegen:
        full = Scenario(path, fmt, rate_scale=scale, model=MODEL, gpu=GPU, slo_ttft=slo_ttft, slo_itl=SLO_ITL)
        fp = prepare_fluid(full)
        run.fluid_full, run.full_requests, run.full_duration, run.full_bounds = _fluid_14_days(fp, args, log)
        run.cold_starts_full = _cold_starts(full, args, log, fluid=True)
        run.reactive_full = _reactive(fp, run.fluid_full, args, log)
        run.lean_full = _lean(fp, log) if ORACLE in run.fluid_full else None
    return run


def _replay(
    run: TraceRun,
    scenario: Scenario,
    prepared: Prepared,
    names: list[str],
    args: argparse.Namespace,
    log: ProgressLog,
) -> None:
    """`run`'s request-level results: `names` on `prepared`, then inferscale and the oracle on the other seeds."""
    run.request_level = parallel(
        names,
        lambda n: run_policy(prepared.workload, prepared.policy(n), prepared.run_config),
        args.workers,
        lambda r: log(f"  {r.policy}: {r.scores.slo_attainment:.4f}, {r.wall_seconds:.1f}s"),
    )
    run.seeds = _other_seeds(scenario, [n for n in (INFERSCALE, ORACLE) if n in names], args, log)
    run.cold_starts = _cold_starts(scenario, args, log, fluid=False)
    run.reactive = _reactive(prepared, run.request_level, args, log)
    if ORACLE in names:
        run.lean = _lean(prepared, log)
    if args.outages:
        run.outages = replay_outages(
            scenario, prepared.workload.duration, run.request_level, workers=args.workers, log=log
        )


def _reactive(
    prepared: Prepared | FluidPrepared, results: dict[str, RunResult], args: argparse.Namespace, log: ProgressLog
) -> dict[str, AtBudget]:
    """The reactive oracle at inferscale's GPU-hours and at the goal's (1.15x the oracle's)."""
    me, oracle, first = results.get(INFERSCALE), results.get(ORACLE), results.get(REACTIVE)
    if me is None or oracle is None or first is None:
        return {}
    budgets = {INFERSCALE: me.scores.gpu_hours, "goal": GOAL_GPU_RATIO * oracle.scores.gpu_hours}

    def replay(margin: float) -> RunResult:
        policy = ReactiveOracle(prepared.context, margin)
        if isinstance(prepared, FluidPrepared):
            return run_fluid(prepared.curve, prepared.duration, policy, prepared.profile, prepared.run_config)
        return run_policy(prepared.workload, policy, prepared.run_config)

    def job(key: str) -> AtBudget:
        return at_budget(replay, budgets[key], first)

    log("  the reactive oracle at inferscale's GPU-hours and at the goal's")
    return parallel(list(budgets), job, args.workers)


def _lean(prepared: Prepared | FluidPrepared, log: ProgressLog) -> Lean:
    """The oracle without its Poisson pad, at the cheapest headroom that still reaches the attainment goal."""

    def replay(headroom: float) -> RunResult:
        policy = Oracle(prepared.context, headroom=headroom, poisson_pad=False)
        if isinstance(prepared, FluidPrepared):
            return run_fluid(prepared.curve, prepared.duration, policy, prepared.profile, prepared.run_config)
        return run_policy(prepared.workload, policy, prepared.run_config)

    lean = leanest(replay, GOAL_ATTAINMENT)
    found = f"headroom {lean.headroom:.0%}" if lean.headroom is not None else "no headroom tried"
    scores = lean.result.scores
    log(f"  the lean oracle: {found}, {scores.slo_attainment:.4f} at {scores.gpu_hours:.2f} GPU-h")
    return lean


def _cold_starts(scenario: Scenario, args: argparse.Namespace, log: ProgressLog, *, fluid: bool) -> list[ColdStart]:
    names = [n for n in (INFERSCALE, ORACLE) if n in args.policies]
    if INFERSCALE not in names or not args.cold_starts:
        return []
    factors = ", ".join(f"{f:g}x" for f in args.cold_starts)
    log(f"  at shorter times-to-ready ({factors} the default), {'fluid' if fluid else 'request-level'}")
    return replay_cold_starts(scenario, names, args.cold_starts, fluid=fluid, workers=args.workers, log=log)


def suggested_limits(profile: ReplicaProfile, lengths: tuple[float, float], slo_ttft: float) -> EngineLimits | None:
    """The engine limits `inferscale plan` suggests at these mean lengths, or None when it flags nothing."""
    return prefill_step(profile, *lengths, slo_ttft, SLO_ITL).fitting


def _at_budget(
    run: TraceRun,
    scenario: Scenario,
    limits: EngineLimits,
    names: list[str],
    args: argparse.Namespace,
    log: ProgressLog,
) -> TraceRun:
    """The request-level replay, and its seeds, with every replica at the planner's limits (same rate,
    target and seeds): what the operator of such a fleet would try first."""
    budget = limits.max_num_batched_tokens
    log(f"  at --max-num-batched-tokens {budget} --max-num-seqs {limits.max_num_seqs} (the planner's suggestion)")
    scenario = replace(scenario, max_num_batched_tokens=budget, max_num_seqs=limits.max_num_seqs)
    prepared = prepare(scenario)
    variant = TraceRun(
        f"{run.name} with --max-num-batched-tokens {budget}",
        run.path,
        run.fmt,
        run.rate_scale,
        run.mean_lengths,
        requests=len(prepared.workload),
        duration=prepared.workload.duration,
        slo_ttft=run.slo_ttft,
        bounds=replay_bounds(prepared.context),
    )
    _replay(variant, scenario, prepared, names, args, log)
    return variant


def _other_seeds(
    scenario: Scenario, names: list[str], args: argparse.Namespace, log: ProgressLog
) -> dict[int, dict[str, RunResult]]:
    """The request-level replay of `names` under each of `args.seeds`: how much of a score is the luck of
    one seed's start-up times (and, for ServeGen, of one draw of its requests)."""
    seeds = [s for s in args.seeds if s != scenario.seed]
    if not seeds or not names:
        return {}
    prepared = {seed: prepare(replace(scenario, seed=seed)) for seed in seeds}
    jobs = [f"{seed}:{name}" for seed in seeds for name in names]

    def job(key: str) -> RunResult:
        seed, name = key.split(":", 1)
        p = prepared[int(seed)]
        return run_policy(p.workload, p.policy(name), p.run_config)

    done = parallel(jobs, job, args.workers, lambda r: log(f"  {r.policy}: {r.scores.slo_attainment:.4f}"))
    out: dict[int, dict[str, RunResult]] = {}
    for key, result in done.items():
        seed, name = key.split(":", 1)
        out.setdefault(int(seed), {})[name] = result
    return out


def unloaded_ttft_misses(prepared: Prepared) -> float:
    """Share of requests no policy can serve within the SLO: refused (longer than the engine accepts), or
    with a TTFT alone on an idle replica (its prompt's chunked prefill steps) already above the target."""
    w, engine = prepared.workload, prepared.run_config.engine
    alone = idle_ttft(engine, w.input_tokens)
    refused = engine.refuses(w.input_tokens, w.output_tokens)
    return float(np.mean((alone > prepared.run_config.slo_ttft) | refused)) if w.input_tokens.size else 0.0


def _fluid_all(
    names: list[str], curve: list[RatePoint], duration: float, prepared: Prepared, workers: int
) -> dict[str, RunResult]:
    curve_tables(curve, prepared.profile)  # solved once here, inherited by the forked workers
    return parallel(
        names,
        lambda n: run_fluid(curve, duration, prepared.policy(n), prepared.profile, prepared.run_config),
        workers,
    )


def _fluid_14_days(
    fp: FluidPrepared, args: argparse.Namespace, log: ProgressLog
) -> tuple[dict[str, RunResult], float, float, Bounds]:
    log(f"{fp.scenario.trace.stem}: fluid, {fp.duration / 86400:.1f} days, {fp.expected_requests:,.0f} requests")
    curve_tables(fp.curve, fp.profile)  # solved once here, inherited by the forked workers
    results = parallel(
        args.policies,
        lambda n: run_fluid(fp.curve, fp.duration, fp.policy(n), fp.profile, fp.run_config),
        args.workers,
        lambda r: log(f"  {r.policy}: {r.scores.slo_attainment:.4f}, {r.wall_seconds:.1f}s"),
    )
    return results, fp.expected_requests, fp.duration, replay_bounds(fp.context)


def closed_loop(
    cfg: EngineConfig, users: int, input_tokens: int, output_tokens: int, rounds: int = 6
) -> tuple[float, float, float]:
    """`users` clients each sending the next request when the last finishes (as NIM's benchmark does).
    Returns (mean TTFT s, mean ITL s, output tokens/s) over the rounds after the first (warm-up)."""
    total = users * rounds
    out = Outcomes(total)
    engine = ReplicaEngine(cfg, out)
    submitted = [0.0] * total
    inflight: set[int] = set()
    # Users start spread over one request's unloaded latency: started together, they would stay in
    # lockstep forever (equal lengths) and every prompt would land in the same step.
    step = cfg.step
    spread = step.step_time(input_tokens, 0, 0) + (output_tokens - 1) * step.step_time(0, 1, input_tokens)
    for rid in range(users):
        t = submitted[rid] = spread * rid / users
        engine.submit_tokens(t, input_tokens, output_tokens, t, rid)
        inflight.add(rid)
    sent = users
    while inflight:
        engine.advance(engine.horizon + 1e-9)
        for rid in [r for r in inflight if not math.isnan(out.finished_at[r])]:
            inflight.discard(rid)
            if sent < total:
                t = submitted[sent] = out.finished_at[rid]
                engine.submit_tokens(t, input_tokens, output_tokens, t, sent)
                inflight.add(sent)
                sent += 1
    warm = slice(users, total)
    ttft, itl = float(np.mean(out.ttft[warm])), float(np.mean(out.itl[warm]))
    # Little's law for a closed loop: N users, each with one request of E2E = TTFT + ITL·(O − 1) in flight.
    return ttft, itl, users * output_tokens / (ttft + itl * (output_tokens - 1))


def _fractions(text: str) -> list[float] | None:
    """Comma-separated numbers strictly between 0 and 1, or None when any is not one."""
    try:
        values = [float(f) for f in text.split(",") if f.strip()]
    except ValueError:
        return None
    return values if all(0 < f < 1 for f in values) else None


def measure_speed(runs: list[TraceRun]) -> tuple[float, str]:
    """Requests per wall-second of static-peak (whose decision costs nothing, so this is the simulator's
    own cost) on the largest request-level replay, re-run alone in this process: one core."""
    run = max((r for r in runs if r.prepared is not None), key=lambda r: r.requests)
    assert run.prepared is not None
    p = run.prepared
    load = os.getloadavg()[0]
    result = run_policy(p.workload, p.policy("static-peak"), p.run_config)
    rate = result.scores.requests / result.wall_seconds
    return rate, (
        f"{run.name}, {result.scores.requests:,} requests, static-peak, {result.wall_seconds:.1f} s; "
        f"1-min load average {load:.1f} on {os.cpu_count()} cores when it started"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inferscale.sim.bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--traces",
        type=Path,
        default=Path(
            os.environ.get("INFERSCALE_TRACES", str(Path(__file__).resolve().parents[3].parent / "shared" / "traces"))
        ),
    )
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--img", type=Path, default=Path("docs/img"))
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--peak-replicas", type=int, default=24)
    parser.add_argument(
        "--slice", type=float, default=1200.0, help="seconds of each ServeGen curve replayed per request"
    )
    parser.add_argument(
        "--slice-time-scale", type=float, default=12.0, help="how much faster the request-level ServeGen slice runs"
    )
    parser.add_argument("--policy", dest="policies", action="append", help="policy to run (repeatable); default all")
    parser.add_argument(
        "--cold-starts",
        default=",".join(f"{f:g}" for f in COLD_START_FACTORS),
        help="shorter times-to-ready to replay inferscale and the oracle at, as fractions of the default "
        "(comma-separated, '' for none)",
    )
    parser.add_argument(
        "--no-outages",
        dest="outages",
        action="store_false",
        help="skip the request-level replays through a metrics outage",
    )
    parser.add_argument(
        "--seeds",
        default="1,2,3,4",
        help="other seeds for inferscale and the oracle at request level, comma-separated ('' for none)",
    )
    args = parser.parse_args(argv)
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        print(f"error: --seeds must be comma-separated integers, got {args.seeds!r}", file=sys.stderr)
        return 2
    cold_starts = _fractions(args.cold_starts)
    if cold_starts is None:
        print(f"error: --cold-starts must be fractions between 0 and 1, got {args.cold_starts!r}", file=sys.stderr)
        return 2
    args.cold_starts = cold_starts
    args.policies = args.policies or list(POLICY_NAMES)
    unknown = [n for n in args.policies if n not in POLICY_NAMES]
    bad = args.workers < 1 or args.peak_replicas < 1 or args.slice <= 0 or args.slice_time_scale <= 0
    if unknown or bad or any(s < 0 for s in args.seeds):
        print(f"error: bad arguments (unknown policies: {unknown or 'none'})", file=sys.stderr)
        return 2
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f}s] {msg}", file=sys.stderr, flush=True)

    profile = replica_profile(MODEL, GPU)
    paths = sorted(p for p in args.traces.iterdir() if p.is_file() and p.suffix in (".csv", ".jsonl"))
    args.img.mkdir(parents=True, exist_ok=True)
    runs = []
    for path in paths:
        try:
            run = bench_trace(path, profile, args, log)
        except TraceError as e:
            log(f"skipping {path.name}: {e}")
            continue
        runs.append(run)
        largest = max(runs, key=lambda r: r.requests)
        for other in runs:  # only the largest replay is re-run for the speed figure: free the others
            if other is not largest:
                other.prepared = None
        plot_timelines(
            args.img / f"sim-{run.name}.png",
            {n: r.timeline for n, r in run.request_level.items()},
            run.slo_ttft,
            f"{run.name} ×{run.rate_scale:.3g}, request-level: {MODEL} on {GPU}",
        )
        if run.fluid_full:
            plot_timelines(
                args.img / f"sim-{run.name}-14d.png",
                {n: r.timeline for n, r in run.fluid_full.items()},
                run.slo_ttft,
                f"{run.name} ×{run.rate_scale:.3g}, 14 days, fluid: {MODEL} on {GPU}",
            )
    if not runs:
        print(f"error: no trace found in {args.traces}", file=sys.stderr)
        return 2
    speed = measure_speed(runs)
    # at NIM's precision, as the calibration compares; the replays above run BF16
    cfg = EngineConfig.from_profile(fp8_profile(MODEL, 1))
    nim = []
    for users in (1, 25, 100, 200):
        ttft, itl, tps = closed_loop(cfg, users, *NIM_8B_LENGTHS)
        m_ttft, m_itl, m_tps = NIM_8B[users]
        nim += [(f"{users} TTFT", m_ttft, 1000 * ttft, "ms"), (f"{users} ITL", m_itl, 1000 * itl, "ms")]
        nim.append((f"{users} output tok/s", m_tps, tps, "tok/s"))
    text = write_report(runs, args, speed, nim, time.perf_counter() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
