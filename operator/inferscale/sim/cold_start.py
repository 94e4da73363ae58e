"""What a faster cold start buys: a replay again with every new replica Ready sooner.

The benchmark's time-to-ready (BLIS: 240 ± 30 s from replica creation to serving) is a cold vLLM pod:
image pull, weight load, torch.compile, CUDA-graph capture. With the caches the reference lists (weights
on node-local disk, the torch.compile cache persisted, images pre-pulled) the same pod serves in about a
minute: Tensorfuse measured 82 s for Llama-3.1-8B on an L40S with `/root/.cache` persisted, and vLLM issue
#20264 59 s to the first answer with the compile cache kept. A policy that leads demand by the
time-to-ready is late by that much at every jump its history did not foretell, so what a shorter start
removes from the misses is what the cold start caused; what is left is the policy's.

The shorter starts keep the benchmark's spread (± 12.5%) around `FACTORS` of its mean. The fleet's warm
start is the same at every time-to-ready (`scenario._sized` looks at the first 10 minutes whatever the
start-up time below 5 minutes), so only the cold starts differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import curve_tables, run_fluid
from inferscale.sim.run import RunResult, parallel, run_policy
from inferscale.sim.scenario import FluidPrepared, Prepared, Scenario, prepare, prepare_fluid

FACTORS = (0.5, 0.25)  # of the benchmark's time-to-ready: about 2 minutes and 1

Log = Callable[[str], None]


def scaled(ttr: TimeToReady, factor: float) -> TimeToReady:
    """`ttr` with its low and high ends multiplied by `factor` (> 0): the same relative spread."""
    if not factor > 0:
        raise ValueError(f"a time-to-ready factor must be positive, got {factor!r}")
    return TimeToReady(ttr.low * factor, ttr.high * factor)


@dataclass(frozen=True)
class ColdStart:
    """The replay of one scenario at one time-to-ready: policy name -> result."""

    time_to_ready: TimeToReady
    results: dict[str, RunResult]


def replay(
    scenario: Scenario,
    names: Sequence[str],
    factors: Sequence[float],
    *,
    fluid: bool,
    workers: int = 1,
    log: Log | None = None,
) -> list[ColdStart]:
    """`names` on `scenario` again at each of `factors` of its time-to-ready, request by request or in the
    fluid mode, in `factors`' order."""
    if not names or not factors:
        return []
    ttrs = [scaled(scenario.time_to_ready, f) for f in factors]
    runs: list[Prepared | FluidPrepared] = []
    for ttr in ttrs:
        s = replace(scenario, time_to_ready=ttr)
        runs.append(prepare_fluid(s) if fluid else prepare(s))
    keys = [(i, name) for i in range(len(ttrs)) for name in names]
    results = replay_each(runs, keys, workers, log)
    return [ColdStart(ttr, {name: results[i, name] for name in names}) for i, ttr in enumerate(ttrs)]


def replay_each(
    runs: Sequence[Prepared | FluidPrepared], keys: Sequence[tuple[int, str]], workers: int = 1, log: Log | None = None
) -> dict[tuple[int, str], RunResult]:
    """Policy `name` on `runs[i]` for every `(i, name)` of `keys`, request by request or in the fluid mode as
    each was prepared, in parallel."""
    for p in runs:
        if isinstance(p, FluidPrepared):
            curve_tables(p.curve, p.profile)  # solved once here, inherited by the forked workers

    def job(key: str) -> RunResult:
        index, name = key.split(":", 1)
        p = runs[int(index)]
        if isinstance(p, FluidPrepared):
            return run_fluid(p.curve, p.duration, p.policy(name), p.profile, p.run_config)
        return run_policy(p.workload, p.policy(name), p.run_config)

    def done(r: RunResult) -> None:
        if log is not None:
            log(f"  {r.policy}: {r.scores.slo_attainment:.4f}")

    results = parallel([f"{i}:{name}" for i, name in keys], job, workers, done)
    return {(i, name): results[f"{i}:{name}"] for i, name in keys}
