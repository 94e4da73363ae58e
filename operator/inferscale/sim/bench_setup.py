"""What the simulator benchmark runs: its fixed settings, its goals, and one trace's results."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inferscale.sim.bench_outage import OutageRun
from inferscale.sim.bounds import Bounds
from inferscale.sim.cold_start import ColdStart
from inferscale.sim.lean_oracle import Lean
from inferscale.sim.reactive_reference import AtBudget
from inferscale.sim.run import RunResult
from inferscale.sim.scenario import Prepared

MODEL, GPU = "llama-3.1-8b", "h100-80gb"
SLO_TTFT, SLO_ITL = 0.5, 0.05
# The TTFT target of a trace (the same rule for every trace): SLO_TTFT, or, when the trace's prompts are
# too long for it, SLO_TTFT_IDLE_FACTOR x the idle-replica TTFT of its SLO_TTFT_QUANTILE input length
# (chunked prefill alone, no queue), rounded up to SLO_TTFT_STEP: a target that 20% of the requests
# cannot meet even on an idle replica measures the prompts, not the autoscaler.
SLO_TTFT_IDLE_FACTOR = 2.0
SLO_TTFT_QUANTILE = 0.999
SLO_TTFT_STEP = 0.5
GOAL_ATTAINMENT = 0.99
GOAL_GPU_RATIO = 1.15
GOAL_SPEED = 50_000.0
GOAL_REPLAY_S = 60.0
INFERSCALE, ORACLE, REACTIVE = "inferscale", "oracle", "reactive-oracle"
REFERENCES = (ORACLE, REACTIVE)  # not peers: they know what no policy can

ProgressLog = Callable[[str], None]


@dataclass
class TraceRun:
    name: str
    path: Path
    fmt: str
    rate_scale: float
    mean_lengths: tuple[float, float]
    requests: int = 0
    duration: float = 0.0
    request_level: dict[str, RunResult] = field(default_factory=dict)  # full trace or the slice
    fluid_same: dict[str, RunResult] = field(default_factory=dict)  # fluid on the request-level load
    fluid_full: dict[str, RunResult] = field(default_factory=dict)  # ServeGen: 14 days, fluid
    full_requests: float = 0.0
    full_duration: float = 0.0
    prepared: Prepared | None = None  # kept for the speed measurement
    hopeless: float = 0.0  # share of requests that miss the TTFT target even alone on an idle replica
    slo_ttft: float = SLO_TTFT
    # request level again under other seeds (the replicas' start-up draws; ServeGen's generated requests):
    # seed -> policy -> result, for inferscale and the oracle
    seeds: dict[int, dict[str, RunResult]] = field(default_factory=dict)
    # where `inferscale plan` flags the engine's prefill step as over the ITL SLO: its suggested token
    # budget, and the request-level replay (and its seeds) again with every replica at that budget
    budget: int | None = None
    default_budget: int = 0
    at_budget: TraceRun | None = None
    bounds: Bounds | None = None  # the baselines' targets and the cap of the request-level replay
    full_bounds: Bounds | None = None  # of the 14-day fluid replay
    # inferscale and the oracle again at shorter times-to-ready (`sim/cold_start.py`): request level, and
    # the 14-day fluid replay of a ServeGen curve
    cold_starts: list[ColdStart] = field(default_factory=list)
    cold_starts_full: list[ColdStart] = field(default_factory=list)
    # the reactive oracle at inferscale's GPU-hours ("inferscale") and at the goal's ("goal")
    # (`sim/reactive_reference.py`): request level, and the 14-day fluid replay of a ServeGen curve
    reactive: dict[str, AtBudget] = field(default_factory=dict)
    reactive_full: dict[str, AtBudget] = field(default_factory=dict)
    # the oracle without its safety, at the cheapest headroom that reaches the attainment goal
    # (`sim/lean_oracle.py`): request level, and the 14-day fluid replay of a ServeGen curve
    lean: Lean | None = None
    lean_full: Lean | None = None
    # the request-level replay again through each kind of metrics outage (`sim/bench_outage.py`)
    outages: list[OutageRun] = field(default_factory=list)
