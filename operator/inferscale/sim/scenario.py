"""A replay scenario: trace + scaling, replica profile, SLO and cold start, turned into what the runner needs.

Shared by `inferscale simulate` and the benchmark so both size fleets the same way:
- every fleet starts warm with the replicas the perf model says the busiest minute of the start-up
  window needs (the first max(10 min, 2 × the longest time-to-ready)): no policy can add a replica
  before one becomes Ready, so a colder start would only score the cold start, the same for all;
- `max_replicas` defaults to 3 × the replicas the trace's 1-minute peak needs (so a runaway policy
  shows up as cost instead of being capped at the peak), `min_replicas` to 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from inferscale.perf import ReplicaProfile, replica_profile
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.outage import Outage
from inferscale.sim.policies import PolicyContext, make_policy
from inferscale.sim.policy import ScalingPolicy
from inferscale.sim.requests import Trace
from inferscale.sim.run import RunConfig, Workload
from inferscale.sim.traces import (
    RatePoint,
    load_rate_curve,
    load_request_arrays,
    load_request_curve,
    resolve_format,
)

DEFAULT_TIME_TO_READY = "210s-270s"  # BLIS: 240 ± 30 s from replica creation to serving
MAX_OVER_PEAK = 3
STARTUP_WINDOW = 600.0
_DEFAULT_TTR = TimeToReady.parse(DEFAULT_TIME_TO_READY)


@dataclass(frozen=True)
class Scenario:
    trace: Path
    fmt: str | None = None
    rate_scale: float = 1.0
    time_scale: float = 1.0
    duration: float | None = None
    start: float = 0.0  # seconds on the scaled axis: the trace before it is skipped
    model: str = "llama-3.1-8b"
    gpu: str = "h100-80gb"
    tp: int = 1
    slo_ttft: float = 0.5
    slo_itl: float = 0.05
    slo_tpot: float | None = None  # inferscale's spec.slo.tpotP95 (scores still use slo_itl per request)
    time_to_ready: TimeToReady = _DEFAULT_TTR
    interval: float = 10.0
    seed: int = 0
    min_replicas: int = 1
    max_replicas: int | None = None
    max_num_seqs: int | None = None  # vLLM's batch limits; None: vLLM's defaults for the GPU
    max_num_batched_tokens: int | None = None
    capacity_utilization: float | None = None  # inferscale's spec.targets.capacityUtilization; None: its default
    scale_down_release: str | None = None  # inferscale's spec.behavior.scaleDown.release; None: its default
    # inferscale's spec.behavior.scaleDown.stabilizationWindow, as the spec spells it; None: unset (the time-to-ready
    # + 1m)
    scale_down_window: str | None = None
    outage: Outage | None = None  # a metrics outage on the replay's axis (`sim.outage`)
    # (baseline, target) the user set for a peer, as its own config would (`policies.context.BASELINE_TARGETS`)
    baseline_targets: tuple[tuple[str, float], ...] = ()
    reads_pods: bool = False  # inferscale's spec.metrics.podPort set (`sim.outage`, PODS)

    def describe(self) -> dict[str, object]:
        return {
            "trace": str(self.trace),
            "format": self.fmt,
            "rate_scale": self.rate_scale,
            "time_scale": self.time_scale,
            "start_s": self.start,
            "duration_s": self.duration,
            "model": self.model,
            "gpu": self.gpu,
            "tp": self.tp,
            "slo_ttft_s": self.slo_ttft,
            "slo_itl_s": self.slo_itl,
            "slo_tpot_p95_s": self.slo_tpot,
            "time_to_ready": str(self.time_to_ready),
            "interval_s": self.interval,
            "seed": self.seed,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "capacity_utilization": self.capacity_utilization,
            "scale_down_release": self.scale_down_release,
            "scale_down_window": self.scale_down_window,
            "metrics_outage": self.outage.describe() if self.outage is not None else None,
            "baseline_targets": dict(self.baseline_targets),
            "reads_pods": self.reads_pods,
        }


@dataclass(frozen=True)
class Prepared:
    scenario: Scenario
    profile: ReplicaProfile
    workload: Workload
    context: PolicyContext
    run_config: RunConfig

    def policy(self, name: str) -> ScalingPolicy:
        return make_policy(name, self.context)


def prepare(s: Scenario) -> Prepared:
    """Load and scale the trace, build the profile, size the fleet bounds. Raises TraceError, PerfError
    or ValueError with a message fit for the user."""
    profile = _profile(s)
    arrays, span = load_request_arrays(s.trace, s.fmt, s.rate_scale, s.time_scale, s.duration, s.seed, start=s.start)
    if len(arrays) == 0:
        raise ValueError(f"{s.trace}: no request in the selected window; nothing to simulate")
    workload = Workload.from_arrays(s.trace.stem, arrays, span)
    trace = Trace(workload.name, arrays.to_requests(), workload.duration)
    ctx, cfg = _sized(s, profile, _context(s, profile, trace, None))
    return Prepared(s, profile, workload, ctx, cfg)


@dataclass(frozen=True)
class FluidPrepared:
    """A scenario for the fluid mode: the rate curve stands in for the requests."""

    scenario: Scenario
    profile: ReplicaProfile
    curve: list[RatePoint]
    duration: float
    expected_requests: float
    context: PolicyContext
    run_config: RunConfig

    def policy(self, name: str) -> ScalingPolicy:
        return make_policy(name, self.context)


def expected_requests(s: Scenario) -> tuple[list[RatePoint], float, float]:
    """The scaled rate curve (ServeGen's own windows, request traces in minutes, each over the time it
    covers: `load_request_curve`), its duration and the number of requests it stands for, without
    generating them."""
    if resolve_format(s.trace, s.fmt) != "servegen":
        curve, duration = load_request_curve(
            s.trace, s.fmt, s.rate_scale, s.time_scale, s.duration, window=60.0, start=s.start
        )
        ends = [p.t for p in curve[1:]] + [duration]
        return curve, duration, sum(p.rate * (end - p.t) for p, end in zip(curve, ends, strict=True))
    # The whole curve, then the cut: a duration inside the first window leaves one point, which does not
    # tell the window's length.
    whole = load_rate_curve(s.trace, s.fmt, s.rate_scale, s.time_scale, None, window=60.0, start=s.start)
    # one window left: as long as the file's windows
    step = whole[1].t - whole[0].t if len(whole) > 1 else _servegen_step(s)
    end = whole[-1].t + step if whole else 0.0
    duration = end if s.duration is None else min(s.duration, end)
    curve = [p for p in whole if p.t < duration]
    if not curve:
        raise ValueError(f"{s.trace}: no traffic in the selected window; nothing to simulate")
    # a window the duration cuts counts only up to the cut
    return curve, duration, sum(p.rate * (min(p.t + step, duration) - p.t) for p in curve)


def _servegen_step(s: Scenario) -> float:
    """A ServeGen window's length on the scaled axis: the file's spacing, or the loader's 10 minutes for a file of
    one window."""
    whole = load_rate_curve(s.trace, s.fmt, s.rate_scale, s.time_scale, None, window=60.0) if s.start else []
    return whole[1].t - whole[0].t if len(whole) > 1 else 600.0 / s.time_scale


def _profile(s: Scenario) -> ReplicaProfile:
    return replica_profile(
        s.model, s.gpu, s.tp, max_num_seqs=s.max_num_seqs, max_num_batched_tokens=s.max_num_batched_tokens
    )


def prepare_fluid(s: Scenario) -> FluidPrepared:
    profile = _profile(s)
    curve, duration, total = expected_requests(s)
    if total < 1:  # a score over no request (100%) would read as a result
        raise ValueError(
            f"{s.trace}: the selected window stands for {total:.3g} requests at --rate-scale {s.rate_scale:g}; "
            "nothing to simulate"
        )
    ctx, cfg = _sized(s, profile, _context(s, profile, Trace(s.trace.stem, (), duration), tuple(curve)))
    return FluidPrepared(s, profile, curve, duration, total, ctx, cfg)


def _context(s: Scenario, profile: ReplicaProfile, trace: Trace, curve: tuple[RatePoint, ...] | None) -> PolicyContext:
    return PolicyContext(
        profile=profile,
        slo_ttft=s.slo_ttft,
        slo_itl=s.slo_itl,
        slo_tpot=s.slo_tpot,
        capacity_utilization=s.capacity_utilization,
        scale_down_release=s.scale_down_release,
        scale_down_window=s.scale_down_window,
        baseline_targets=s.baseline_targets,
        reads_pods=s.reads_pods,
        time_to_ready=s.time_to_ready.mean,
        time_to_ready_max=s.time_to_ready.high,
        min_replicas=s.min_replicas,
        max_replicas=max(s.min_replicas, 1),
        trace=trace,
        interval=s.interval,
        initial_replicas=s.min_replicas,
        curve=curve,
    )


def _sized(s: Scenario, profile: ReplicaProfile, ctx: PolicyContext) -> tuple[PolicyContext, RunConfig]:
    curve = ctx.load_curve(60.0)
    mean_in, mean_out = ctx.mean_input_tokens, ctx.mean_output_tokens
    peak = ctx.replicas_for(max(p.rate for p in curve), mean_in, mean_out)
    max_replicas = s.max_replicas if s.max_replicas is not None else max(4, MAX_OVER_PEAK * peak, s.min_replicas)
    startup = max(STARTUP_WINDOW, 2 * s.time_to_ready.high)
    need0 = max(
        ctx.replicas_for(p.rate, p.mean_input or mean_in, p.mean_output or mean_out) for p in curve if p.t < startup
    )
    initial = min(max(need0, s.min_replicas, 1), max_replicas)
    ctx = replace(ctx, max_replicas=max_replicas, initial_replicas=initial)
    cfg = RunConfig(
        engine=EngineConfig.from_profile(profile),
        gpus_per_replica=profile.gpus,
        slo_ttft=s.slo_ttft,
        slo_itl=s.slo_itl,
        time_to_ready=s.time_to_ready,
        initial_replicas=initial,
        seed=s.seed,
        outage=s.outage,
    )
    return ctx, cfg
