"""The decision contract shared by the operator and the simulator.

The operator builds an `Observation` from Prometheus and the Kubernetes API, the simulator builds
the same object from its own scrape model; both hand it to `scaling.decide` with a `Policy`
(the spec, converted) and the `ScalerState` read back from status. Time is always an argument
(seconds since the Unix epoch in the operator, seconds since trace start in the simulator).
Every value that can be unknown is `None`, never zero: "no data" and "idle" are different facts.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class MetricsState(enum.StrEnum):
    COMPLETE = "Complete"  # every ready pod reported fresh samples
    PARTIAL = "Partial"  # some ready pods reported; missing pods are treated conservatively
    MISSING = "Missing"  # nothing usable: hold the current count
    STALE = "Stale"  # samples exist but are older than staleAfter: hold


class Reason(enum.StrEnum):
    """Why a recommendation or a clamp produced its number. Shown in status, Events and metrics."""

    KV_CACHE = "KVCacheSaturation"
    QUEUE = "QueueBacklog"
    SLO_TTFT = "TTFTAboveSLO"
    SLO_ITL = "ITLAboveSLO"
    SLO_TPOT = "TPOTAboveSLO"
    CAPACITY = "CapacityForecast"
    SCHEDULE = "ScheduleFloor"
    CURRENT = "Current"
    WITHIN_TOLERANCE = "WithinTolerance"
    STABILIZING = "ScaleDownStabilizing"
    # no scale-down in the first minute of watching a service (its one-minute rates may not cover its traffic):
    # a reason of its own, so that the log tells its end from the scale-down window that may follow
    NEWLY_WATCHED = "NewlyWatched"
    UP_STABILIZING = "ScaleUpStabilizing"
    RATE_LIMITED = "RateLimited"
    MIN_REPLICAS = "MinReplicas"
    MAX_REPLICAS = "MaxReplicas"
    CONSOLIDATION_REFUSED = "ConsolidationRefused"
    METRICS_MISSING = "MetricsMissing"
    METRICS_STALE = "MetricsStale"
    SCALE_UP_PENDING = "ScaleUpInProgress"


# the rate families the engines' counters give, as the Prometheus adapter names its queries
REQUESTS, PROMPT_TOKENS, GENERATION_TOKENS = "requests", "prompt_tokens", "generation_tokens"
RATE_FAMILIES = (REQUESTS, PROMPT_TOKENS, GENERATION_TOKENS)
# prompt tokens served from the prefix cache, counted where the prompt's are (per request, at its prefill): not a
# rate family of its own, an engine without the counter leaves the prompts whole, as they were before
CACHED_PROMPT_TOKENS = "cached_prompt_tokens"
# the failed query an Observation read from the pods themselves names (spec.metrics.podPort): Prometheus did not
# give the metrics, so no scale-down rests on what the pods show
PROMETHEUS = "prometheus"


@dataclass(frozen=True)
class Observation:
    """One tick's view of one InferenceService. Sums are over the target's pods."""

    at: float
    current_replicas: int  # the target's spec.replicas (what the operator last wrote or a human set)
    ready_replicas: int  # pods Ready
    pending_replicas: int = 0  # pods created but not Ready (they count as supply on the way)
    pods_reporting: int = 0  # pods with fresh engine metrics
    state: MetricsState = MetricsState.MISSING
    kv_cache_utilization: float | None = None  # mean over reporting pods, 0..1
    kv_cache_utilization_max: float | None = None  # peak over reporting pods (max_over_time)
    waiting: float | None = None  # sum of vllm:num_requests_waiting
    running: float | None = None  # sum of vllm:num_requests_running
    ttft_p95: float | None = None  # seconds, from the TTFT histogram
    itl_mean: float | None = None  # seconds, rate(_sum)/rate(_count)
    tpot_p95: float | None = None  # seconds, P95 over requests of each one's mean ITL (per-request TPOT)
    request_rate: float | None = None  # requests/s finishing (vllm:request_success_total)
    prompt_token_rate: float | None = None  # tokens/s, the prefix cache's hits included
    cached_prompt_token_rate: float | None = None  # tokens/s of those served from the prefix cache
    generation_token_rate: float | None = None  # tokens/s
    newest_sample_at: float | None = None  # timestamp of the freshest sample, for staleness
    capacity_blocked_replicas: int = 0  # pods Pending for lack of GPUs beyond the timeout
    gpu_utilization: float | None = None  # mean DCGM-style busy fraction (only baselines use it)
    # requests/s arriving at a frontend or router (Dynamo's dynamo_frontend_requests_started_total): offered
    # load, which completions hide when the fleet is saturated. vLLM exports no such counter, so the operator
    # leaves it None and inferscale's policy must not read it; only the simulator's baselines do.
    arrival_rate: float | None = None
    # metric families whose query failed this tick, or answered in part (a Thanos querier's partial response),
    # not those that answered empty, which is idle: what they would have recommended is unknown, so they hold a
    # scale-down as a missing KV or queue gauge does
    failed_queries: frozenset[str] = frozenset()
    # rate families ("requests", "prompt_tokens", "generation_tokens") that some busy pod did not report while
    # others did: their sum covers the reporting pods only, a lower bound, so a low request rate must not
    # shrink the fleet or teach the learned capacity
    partial_rates: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RateSample:
    at: float
    value: float


@dataclass(frozen=True)
class Schedule:
    """A known peak: a floor of `min_replicas` during `duration` seconds after each cron match."""

    cron: str
    duration: float
    min_replicas: int


class Release(enum.StrEnum):
    """How a past recommendation holds a scale-down within the scale-down window."""

    LINEAR = "Linear"  # falling evenly to the current recommendation by the window's end (inferscale's default)
    HOLD = "Hold"  # whole for the whole window, then gone (HPA's stabilization)


@dataclass(frozen=True)
class ScaleRule:
    stabilization_window: float  # seconds
    max_change_percent: float | None  # 100.0 means at most double (up) / remove all-but-min (down)
    max_change_pods: int | None  # absolute pods per period; the larger of the two limits applies
    period: float = 60.0  # seconds over which the change limit is counted
    release: Release = Release.HOLD  # scale-down rules only


@dataclass(frozen=True)
class Policy:
    min_replicas: int
    max_replicas: int
    interval: float = 10.0
    tolerance: float = 0.1
    slo_ttft_p95: float | None = 0.5  # seconds; None disables the signal
    slo_itl_mean: float | None = 0.05
    slo_tpot_p95: float | None = None  # seconds; opt-in, None disables the signal
    target_kv_cache: float = 0.8
    target_waiting_per_replica: float = 4.0
    # share of a replica's capacity at the SLO the capacity signal plans the forecast demand to use
    target_capacity_utilization: float = 0.8
    scale_up: ScaleRule = field(default_factory=lambda: ScaleRule(0.0, 100.0, 4, 15.0))
    scale_down: ScaleRule = field(default_factory=lambda: ScaleRule(300.0, 50.0, None, 60.0, Release.LINEAR))
    stale_after: float = 60.0
    time_to_ready_prior: float = 180.0  # seconds; replaced by the measured value in state
    predictive: bool = True
    schedules: tuple[Schedule, ...] = ()
    # Requests/s one replica sustains at the SLO, from the perf model; learned online replaces it.
    capacity_prior_rps: float | None = None
    # The mean (prompt, output) tokens the prior was computed at, said with it; None where not known.
    capacity_prior_at: tuple[float, float] | None = None
    # Why a prior the spec asked for (a model profile) is absent, said in the decision while nothing is learned.
    capacity_note: str | None = None
    # The spec left the scale-down window unset: it is the time-to-ready (measured, else the prior) plus
    # `capacity.RATE_WINDOW`, resolved each tick by `decide`; `scale_down.stabilization_window` holds it at the prior.
    down_window_follows_ttr: bool = False


@dataclass(frozen=True)
class TimedReplicas:
    at: float
    replicas: int


@dataclass(frozen=True)
class ScaleEvent:
    at: float
    from_replicas: int
    to_replicas: int
    reason: str


@dataclass(frozen=True)
class LastTick:
    """What the previous decision saw, for quantities that are changes between ticks."""

    at: float
    ready: int  # ready replicas
    ready_since: float  # when the ready count became `ready` (a rate over a window that began earlier mixes sizes)
    waiting: float | None  # sum of waiting requests; None when unknown
    backlog_since: float | None = None  # when the current backlog began; None without one
    # when the ticks that hold a scale-down for want of data began; None while the data supports a decision
    blind_since: float | None = None
    # the count the capacity signal asked for when it was above the current count (None when it asked for no more,
    # or had nothing to go on): a capacity scale-up waits until two ticks in a row ask for it (`capacity.confirm`)
    capacity_ask: int | None = None
    # when the scaler first decided for this service (None: it did before this was kept, long ago): a scale-down
    # waits until its one-minute rates can cover the traffic it sees (`decide`, traffic that began with the watch)
    watched_since: float | None = None


@dataclass(frozen=True)
class CapacityLow:
    """The lowest per-replica capacity sized with recently, in two consecutive buckets (see
    `capacity.remember_low`): the window's low without a record per tick."""

    since: float  # when the current bucket began
    low: float  # the lowest capacity since `since`
    before: float | None = None  # the lowest of the bucket just before; None when there was none


@dataclass(frozen=True)
class ScalerState:
    """Everything a decision needs from the past. Round-trips through status (see to_status/from_status
    in scaling.state), so an operator restart neither forgets a window nor shortens it."""

    recommendations: tuple[TimedReplicas, ...] = ()  # raw recommendations within the longest window
    scale_events: tuple[ScaleEvent, ...] = ()  # recent actions, for rate limits and history
    time_to_ready: float | None = None  # measured seconds from pod creation to Ready
    capacity_rps: float | None = None  # learned per-replica request rate at the SLO
    # the learned rate over the prior's at the same tick's request lengths: sizing uses prior x factor,
    # so a change of lengths (which the prior follows) is not mistaken for a change of capacity
    capacity_factor: float | None = None
    last_tick: LastTick | None = None  # the previous tick's ready count and queue
    capacity_low: CapacityLow | None = None  # the lowest capacity of the scale-down window, for scale-downs


@dataclass(frozen=True)
class Recommendation:
    signal: Reason
    replicas: int
    value: float | None  # the observed or forecast quantity behind it
    target: float | None  # its set-point
    message: str
    # what holds it below its own ask, besides a dead-band: replicas not Ready yet (SCALE_UP_PENDING), a capacity
    # scale-up waiting for its second reading (UP_STABILIZING)
    held: Reason | None = None
    # its count was cut to `signals.MAX_STEP` times the Ready replicas, which the decision says beside it
    capped: bool = False


@dataclass(frozen=True)
class Decision:
    replicas: int  # what to write to /scale (== current when holding)
    current: int
    reason: Reason  # the reason that determined `replicas` (the winning signal or the last clamp)
    message: str  # one human sentence: "KV cache 95% > 80% target on 2 replicas -> 3"
    recommendations: tuple[Recommendation, ...]
    limits: tuple[Reason, ...]  # clamps that changed the number, in the order applied
    metrics_available: bool
    slo_met: bool | None  # None when latency is unknown
    forecast_rps: float | None
    horizon: float  # the lead time used, seconds
    state: ScalerState
    forecast_method: str | None = None  # how forecast_rps was made: seasonal | holt | peak

    @property
    def changed(self) -> bool:
        return self.replicas != self.current
