"""What a simulated policy is told about its service: the replica, the SLOs, the bounds, the trace."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from inferscale.perf import OperatingPoint, ReplicaProfile, operating_point, replica_capacity_rps
from inferscale.sim.requests import Trace
from inferscale.sim.traces import RatePoint, rate_curve

# Token lengths are rounded UP onto a 5 % geometric grid before asking the perf model, so that a
# 14-day curve of per-window means costs a few hundred capacity solves, not tens of thousands.
# Rounding up errs towards less capacity per replica (more replicas), never fewer.
LENGTH_GRID = 1.05


# The peers whose one target a user sets in their own config, and what the number means there. A replay with the
# user's own value compares inferscale with what they run, not with the benchmark's calibration.
BASELINE_TARGETS: dict[str, str] = {
    "hpa-gpu-util": "the GPU busy share HPA keeps each pod at, as a fraction (0.6 is averageUtilization 60)",
    "keda-queue": "waiting requests per replica (the Prometheus trigger's threshold)",
    "knative-kpa": "concurrent requests per pod (autoscaling.knative.dev/target; its 70% utilization applies on top)",
    "aibrix-apa": "the KV-cache usage APA keeps each pod at, as a fraction (its targetValue)",
}
_FRACTIONS = frozenset({"hpa-gpu-util", "aibrix-apa"})


def check_baseline_target(name: str, value: float) -> None:
    """Raises ValueError saying what `name`'s target means when it cannot be one."""
    if name not in BASELINE_TARGETS:
        raise ValueError(f"{name!r} takes no target here; those that do: {', '.join(BASELINE_TARGETS)}")
    if not (math.isfinite(value) and value > 0) or (name in _FRACTIONS and value > 1):
        bound = "a fraction in (0, 1]" if name in _FRACTIONS else "a positive number"
        raise ValueError(f"{name}={value:g}: its target is {BASELINE_TARGETS[name]}, so {bound}")


def _on_grid(tokens: float) -> float:
    if tokens <= 1:
        return 1.0
    return float(LENGTH_GRID ** math.ceil(math.log(tokens) / math.log(LENGTH_GRID) - 1e-9))


@dataclass(frozen=True)
class PolicyContext:
    """`trace` is the future: only the oracle (and static-peak, which is defined by the trace's peak)
    may look at its arrivals; every policy may use its mean input/output lengths, as a user who set up
    the baseline would have benchmarked with their typical request. `curve`, when given, stands in for
    the trace's requests (aggregate simulation of a ServeGen curve whose requests are never built)."""

    profile: ReplicaProfile
    slo_ttft: float  # seconds, TTFT P95 target
    slo_itl: float  # seconds, mean ITL target
    time_to_ready: float  # mean seconds from pod creation to Ready
    min_replicas: int
    max_replicas: int
    trace: Trace
    interval: float = 10.0  # inferscale's decision interval (and the oracle's)
    initial_replicas: int = 1
    curve: tuple[RatePoint, ...] | None = None
    # Longest time-to-ready the fleet draws (a uniform '210s-270s' gives 270): the oracle leads by it so
    # its replicas are Ready in time whatever the draw. None: the mean.
    time_to_ready_max: float | None = None
    # inferscale's opt-in bound on the P95 of per-request TPOT (spec.slo.tpotP95); None: unset
    slo_tpot: float | None = None
    # inferscale's spec.targets.capacityUtilization; None: the CRD's default
    capacity_utilization: float | None = None
    # inferscale's spec.behavior.scaleDown.release ("Linear" or "Hold"); None: the CRD's default
    scale_down_release: str | None = None
    # inferscale's spec.behavior.scaleDown.stabilizationWindow ("300s"); None: unset, the time-to-ready + 1m
    scale_down_window: str | None = None
    # (baseline, target) pairs the user set (`BASELINE_TARGETS`); a baseline not named keeps its calibrated default
    baseline_targets: tuple[tuple[str, float], ...] = ()
    # inferscale's spec.metrics.podPort is set: through a metrics outage it reads the pods' /metrics itself
    reads_pods: bool = False

    def __post_init__(self) -> None:
        for name, value in self.baseline_targets:
            check_baseline_target(name, value)
        for name in ("slo_ttft", "slo_itl", "interval"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"PolicyContext.{name} must be a positive number of seconds, got {value!r}")
        if self.slo_tpot is not None and not (math.isfinite(self.slo_tpot) and self.slo_tpot > 0):
            raise ValueError(f"PolicyContext.slo_tpot must be positive seconds or None, got {self.slo_tpot!r}")
        cu = self.capacity_utilization
        if cu is not None and not (math.isfinite(cu) and 0 < cu <= 1):
            raise ValueError(f"PolicyContext.capacity_utilization must be in (0, 1] or None, got {cu!r}")
        if not (math.isfinite(self.time_to_ready) and self.time_to_ready >= 0):
            raise ValueError(f"PolicyContext.time_to_ready must be >= 0 seconds, got {self.time_to_ready!r}")
        if self.time_to_ready_max is not None and not (
            math.isfinite(self.time_to_ready_max) and self.time_to_ready_max >= self.time_to_ready
        ):
            raise ValueError(
                f"PolicyContext.time_to_ready_max must be >= time_to_ready ({self.time_to_ready}), "
                f"got {self.time_to_ready_max!r}"
            )
        if self.min_replicas < 0 or self.max_replicas < max(self.min_replicas, 1):
            raise ValueError(
                f"PolicyContext needs 0 <= min_replicas <= max_replicas and max_replicas >= 1, "
                f"got min {self.min_replicas}, max {self.max_replicas}"
            )
        if not self.min_replicas <= self.initial_replicas <= self.max_replicas:
            raise ValueError(
                f"PolicyContext.initial_replicas {self.initial_replicas} is outside "
                f"[{self.min_replicas}, {self.max_replicas}]"
            )
        if self.curve is not None and len(self.curve) == 0:
            raise ValueError("PolicyContext.curve is empty; pass None to derive it from the trace")

    def given_target(self, baseline: str) -> float | None:
        """The target the user set for `baseline`, or None (its default)."""
        return next((value for name, value in self.baseline_targets if name == baseline), None)

    def clamp(self, replicas: int) -> int:
        return min(max(replicas, self.min_replicas), self.max_replicas)

    def capacity_rps(self, input_tokens: float, output_tokens: float) -> float:
        """One replica's request rate at the SLO for these mean lengths (0.0: the SLO is unattainable)."""
        return replica_capacity_rps(
            self.profile, _on_grid(input_tokens), _on_grid(output_tokens), self.slo_ttft, self.slo_itl
        )

    def replicas_for(self, rate_rps: float, input_tokens: float, output_tokens: float) -> int:
        """Fewest replicas that carry `rate_rps` at the SLO, before the min/max clamp."""
        if rate_rps <= 0:
            return 0
        capacity = self.capacity_rps(input_tokens, output_tokens)
        if capacity <= 0:
            return self.max_replicas
        return math.ceil(rate_rps / capacity - 1e-9)

    def load_curve(self, window: float = 60.0) -> list[RatePoint]:
        """The future's request rate per window: `curve` if given (its own windows), else the trace binned."""
        if self.curve is not None:
            return list(self.curve)
        return rate_curve(self.trace, window)

    @cached_property
    def slo_point(self) -> OperatingPoint:
        """One replica at the edge of the SLO at the trace's mean lengths: what a user finds by load-testing
        their typical request, and sets a baseline's per-pod target from."""
        lengths = (self.mean_input_tokens, self.mean_output_tokens)
        return operating_point(self.profile, *lengths, self.slo_ttft, self.slo_itl)

    @property
    def slo_kv_usage(self) -> float:
        """The KV-cache usage (0..1) one replica shows at `slo_point`: its batch, each sequence holding its
        prompt and on average half its output (how perf.capacity and the fluid mode count a sequence)."""
        tokens = self.mean_input_tokens + self.mean_output_tokens / 2
        return min(1.0, self.slo_point.batch * tokens / self.profile.kv_capacity_tokens)

    @cached_property
    def mean_input_tokens(self) -> float:
        return self._mean_lengths[0]

    @cached_property
    def mean_output_tokens(self) -> float:
        return self._mean_lengths[1]

    @cached_property
    def _mean_lengths(self) -> tuple[float, float]:
        if self.trace.requests:
            n = len(self.trace.requests)
            return (
                sum(r.input_tokens for r in self.trace.requests) / n,
                sum(r.output_tokens for r in self.trace.requests) / n,
            )
        points = [p for p in self.load_curve() if p.rate > 0 and p.mean_input is not None]
        weight = sum(p.rate for p in points)
        if weight <= 0:
            raise ValueError(f"trace {self.trace.name!r} holds no request: mean lengths are unknown")
        return (
            sum(p.rate * (p.mean_input or 0.0) for p in points) / weight,
            sum(p.rate * (p.mean_output or 0.0) for p in points) / weight,
        )
