"""Replay one trace against one policy: arrivals, scrapes, decisions and replicas becoming Ready, in time order.

Every policy sees the same requests on its own fleet, which starts warm with `initial_replicas`.
Policies decide every `policy.interval` seconds from the observer's last scrape, from `warmup` on. GPU time is billed
over [0, duration]; after the last arrival the fleet is frozen for `grace` seconds so in-flight
requests can finish (unbilled, the same for every policy); what is still unfinished then is a miss.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from inferscale.sim.decisions import DecisionLog, DecisionRecord
from inferscale.sim.engine import EngineConfig, Outcomes
from inferscale.sim.fleet import Fleet, TimeToReady
from inferscale.sim.observe import Observer
from inferscale.sim.outage import Outage, OutageView
from inferscale.sim.policy import ScalingPolicy, steers_deletion
from inferscale.sim.requests import Trace
from inferscale.sim.scores import Scores, score
from inferscale.sim.traces import RequestArrays

_INF = math.inf


@dataclass(frozen=True)
class Workload:
    """Requests as columns (sorted by arrival) and the span they cover, seconds."""

    name: str
    arrival: npt.NDArray[np.float64]
    input_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]
    duration: float

    def __post_init__(self) -> None:
        n = self.arrival.size
        if self.input_tokens.size != n or self.output_tokens.size != n:
            raise ValueError("workload columns differ in length")
        if n and (np.any(np.diff(self.arrival) < 0) or self.arrival[-1] > self.duration):
            raise ValueError("arrivals must be sorted and within the duration")

    @classmethod
    def from_arrays(cls, name: str, arrays: RequestArrays, span: float) -> Workload:
        """From a trace loader's columns; the span is widened to the last arrival if a replicated
        request landed past the loader's reported end."""
        last = float(arrays.arrival[-1]) if len(arrays) else 0.0
        return cls(name, arrays.arrival, arrays.input_tokens, arrays.output_tokens, max(span, last))

    @classmethod
    def from_trace(cls, trace: Trace) -> Workload:
        reqs = trace.requests
        n = len(reqs)
        return cls(
            trace.name,
            np.fromiter((r.arrival for r in reqs), np.float64, n),
            np.fromiter((r.input_tokens for r in reqs), np.int64, n),
            np.fromiter((r.output_tokens for r in reqs), np.int64, n),
            max(trace.duration, reqs[-1].arrival if n else 0.0),
        )

    def __len__(self) -> int:
        return int(self.arrival.size)


@dataclass(frozen=True)
class RunConfig:
    engine: EngineConfig
    gpus_per_replica: int
    slo_ttft: float  # seconds, per-request target for the score
    slo_itl: float
    time_to_ready: TimeToReady
    initial_replicas: int
    seed: int = 0
    scrape_interval: float = 5.0
    timeline_step: float = 60.0
    grace: float = 120.0
    # The warm fleet holds until the observer has one full latency window: at t = 0 the scrapes would
    # show an idle fleet that is in fact carrying the trace's traffic, and policies would act on it.
    warmup: float = 120.0
    outage: Outage | None = None  # a metrics outage every policy lives through (`sim.outage`)

    def first_decision(self, interval: float) -> float:
        return max(1, math.ceil(self.warmup / interval)) * interval


@dataclass
class Timeline:
    at: list[float] = field(default_factory=list)
    load_rps: list[float] = field(default_factory=list)  # arrivals over the previous step
    provisioned: list[int] = field(default_factory=list)  # replicas holding GPUs (pending, ready, draining)
    ready: list[int] = field(default_factory=list)
    ttft_p95: list[float | None] = field(default_factory=list)  # as the operator observes it


@dataclass
class RunResult:
    policy: str
    scores: Scores
    timeline: Timeline
    wall_seconds: float
    outcomes: Outcomes | None = None  # per request; dropped when results cross a process boundary
    decisions: list[DecisionRecord] = field(default_factory=list)  # empty for a policy that does not explain


Progress = Callable[[float], None]  # fraction of the trace replayed, 0..1


def run_policy(
    workload: Workload, policy: ScalingPolicy, cfg: RunConfig, progress: Progress | None = None
) -> RunResult:
    started = time.perf_counter()
    n = len(workload)
    outcomes = Outcomes(n)
    fleet = Fleet(cfg.engine, cfg.gpus_per_replica, cfg.time_to_ready, cfg.seed, outcomes, steers_deletion(policy))
    fleet.start(cfg.initial_replicas)
    observer = Observer(cfg.scrape_interval)
    timeline = Timeline()
    log = DecisionLog(policy)
    view = OutageView(cfg.outage, policy.name, getattr(policy, "reads_pods", False))
    interval = policy.interval
    if not (interval > 0 and math.isfinite(interval)):
        raise ValueError(f"policy {policy.name!r} has an invalid interval {interval!r}")

    next_scrape = 0.0
    next_decide = cfg.first_decision(interval)
    next_sample = cfg.timeline_step
    arrived_since_sample = 0

    def until(t: float, arrived: int) -> None:
        """Every event up to `t`; `arrived` requests have reached the router by then."""
        nonlocal next_scrape, next_decide, next_sample, arrived_since_sample
        while True:
            ready_at = fleet.next_ready_at
            tau = min(ready_at, next_scrape, next_decide, next_sample)
            if tau > t:
                return
            if ready_at <= tau:
                fleet.promote(tau)
            if next_scrape <= tau:
                fleet.reap(tau)
                observer.scrape(tau, fleet, arrived, view.keeps(tau))
                next_scrape += cfg.scrape_interval
            # sampled before this instant's decision: a row's counts are those of the step it closes, as its load is
            if next_sample <= tau:
                obs = observer.observe(tau, fleet)
                timeline.at.append(tau)
                timeline.load_rps.append(arrived_since_sample / cfg.timeline_step)
                timeline.provisioned.append(fleet.provisioned)
                timeline.ready.append(len(fleet.ready))
                timeline.ttft_p95.append(obs.ttft_p95 if view.keeps(tau) else None)  # nothing seen inside an outage
                arrived_since_sample = 0
                next_sample += cfg.timeline_step
            # none at the end of the arrivals: the fleet is frozen there, and a scale no one pays for is no action
            if next_decide <= tau and tau < workload.duration:
                obs = observer.observe(tau, fleet)
                asked = view.replicas(policy.decide, obs, tau, observer.rate_history)
                if asked is not None:
                    fleet.scale_to(asked, tau)
                    log.after_decide(obs, tau)
            if next_decide <= tau:
                next_decide += interval

    arrivals = workload.arrival.tolist()
    inputs = workload.input_tokens.tolist()
    outputs = workload.output_tokens.tolist()
    route = fleet.route
    next_event = 0.0
    report_every = max(1, n // 200)
    for i in range(n):
        t = arrivals[i]
        if t >= next_event:
            until(t, i)
            next_event = min(fleet.next_ready_at, next_scrape, next_decide, next_sample)
        route(t, inputs[i], outputs[i], i, t)
        arrived_since_sample += 1
        if progress is not None and i % report_every == 0:
            progress(i / n)
    until(workload.duration, n)
    end = workload.duration + cfg.grace
    # a replica that becomes Ready within the grace takes the router's queue then, not at the grace's end, where
    # no request could finish any more
    while (ready_at := fleet.next_ready_at) <= end:
        fleet.promote(ready_at)
    fleet.advance_all(end)
    fleet.reap(end)
    result = score(
        outcomes,
        workload.arrival,
        end,
        cfg.slo_ttft,
        cfg.slo_itl,
        fleet.gpu_seconds(workload.duration),
        fleet.scale_actions,
        refused=cfg.engine.refuses(workload.input_tokens, workload.output_tokens),
    )
    if progress is not None:
        progress(1.0)
    return RunResult(policy.name, result, timeline, time.perf_counter() - started, outcomes, log.records)


# -- several policies side by side ----------------------------------------------------------------------

PolicyFactory = Callable[[str], ScalingPolicy]
T = TypeVar("T")
_JOB: Callable[[str], Any] | None = None


def _light(result: T) -> T:
    """The result without its per-request arrays: they stay in the process that made them."""
    if isinstance(result, RunResult):
        result.outcomes = None
    return result


def _run_job(name: str) -> Any:
    assert _JOB is not None, "worker started without a job"
    return _light(_JOB(name))


def parallel(
    names: Sequence[str], job: Callable[[str], T], workers: int = 1, on_done: Callable[[T], None] | None = None
) -> dict[str, T]:
    """`job(name)` for every name, in a forked process pool when `workers` > 1 (the job's closure, with
    its workload, is inherited rather than pickled). Results keep the order of `names`; a RunResult comes
    back without its per-request outcomes."""
    global _JOB
    results: dict[str, T] = {}
    if workers <= 1 or len(names) <= 1:
        for name in names:
            r = results[name] = _light(job(name))
            if on_done is not None:
                on_done(r)
        return results
    _JOB = job
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
            futures = {name: pool.submit(_run_job, name) for name in names}
            for name in names:
                results[name] = futures[name].result()
                if on_done is not None:
                    on_done(results[name])
    finally:
        _JOB = None
    return results


def run_policies(
    workload: Workload,
    names: Sequence[str],
    factory: PolicyFactory,
    cfg: RunConfig,
    workers: int = 1,
    on_done: Callable[[RunResult], None] | None = None,
) -> dict[str, RunResult]:
    """Each named policy on its own fleet over the same requests."""
    return parallel(names, lambda name: run_policy(workload, factory(name), cfg), workers, on_done)
