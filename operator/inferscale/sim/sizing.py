"""What a rate curve needs, window by window, at the SLO: the planner's answer for real traffic.

Each window is sized at its own mean lengths, exactly as `plan --rps` sizes one load (a window whose
prompts double needs more replicas at the same rate), with the perf model's capacity. Following that
need exactly, with no cold start and no headroom, is the least any autoscaler can spend; a fleet held at
the most any window needs is what static provisioning spends.

A request trace's curve has one-minute windows, each counted over the time it covers of the replayed
range (`traces.load_request_curve`, as `simulate --mode fluid` replays it), so that a trace compressed
into seconds keeps its rate; a part-minute under half a minute at the end is joined to the minute before:
a tail of a second or two is too short a sample to be taken for a peak.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from inferscale.perf import ReplicaProfile, model_spec, replica_capacity_rps
from inferscale.sim.traces import RatePoint


@dataclass(frozen=True)
class WindowNeed:
    t: float  # seconds from the replay's start
    length: float  # seconds the window lasts
    rate_rps: float
    input_tokens: float | None  # the window's mean lengths; None: no request in it
    output_tokens: float | None
    # None: no replica count serves the window: one replica carries no load at its lengths within the SLO
    # and the engine's limits, or its mean request is longer than the model's context window
    replicas: int | None
    capacity_rps: float | None = None  # one replica's at the window's lengths and the SLO; None: no request in it


@dataclass(frozen=True)
class CurveSizing:
    windows: tuple[WindowNeed, ...]
    span: float  # seconds covered
    requests: float  # expected requests
    mean_input_tokens: float  # request-weighted
    mean_output_tokens: float

    @property
    def peak(self) -> WindowNeed:
        """The window that needs the most replicas (the busier one at equal counts; by rate when none
        can be served)."""
        return max(self.windows, key=lambda w: (w.replicas is not None, w.replicas or 0, w.rate_rps))

    @property
    def unattainable(self) -> tuple[WindowNeed, ...]:
        return tuple(w for w in self.windows if w.replicas is None)

    @property
    def replica_hours_following(self) -> float | None:
        """Replica-hours of a fleet that has each window's need exactly for that window, over the windows
        that can be served (None: none can)."""
        if self.peak.replicas is None:  # the peak is a served window whenever one is
            return None
        return sum((w.replicas or 0) * w.length for w in self.windows) / 3600.0

    @property
    def replica_hours_at_peak(self) -> float | None:
        peak = self.peak.replicas
        return None if peak is None else peak * self.span / 3600.0


def mean_lengths(curve: Sequence[RatePoint], span: float) -> tuple[float, float]:
    """The request-weighted mean input and output lengths (ValueError: no request in the curve)."""
    ends = [p.t for p in curve[1:]] + [span]
    known = [
        (p.rate * (end - p.t), p.mean_input, p.mean_output)
        for p, end in zip(curve, ends, strict=True)
        if p.mean_input is not None and p.mean_output is not None
    ]
    weight = sum(w for w, _, _ in known)
    if weight <= 0:
        raise ValueError("the selected part of the trace holds no request; nothing to size")
    return sum(w * i for w, i, _ in known) / weight, sum(w * o for w, _, o in known) / weight


def size_curve(
    profile: ReplicaProfile,
    curve: Sequence[RatePoint],
    span: float,
    slo_ttft: float | None,
    slo_itl: float | None,
) -> CurveSizing:
    """`curve`: windows in time order (each lasts to the next one's start, the last to `span`)."""
    if not curve:
        raise ValueError("size_curve needs at least one window")
    mean_in, mean_out = mean_lengths(curve, span)
    context = model_spec(profile.model).context_tokens
    capacities: dict[tuple[float, float], float] = {}  # ServeGen's means repeat little; request traces' bins do
    ends = [p.t for p in curve[1:]] + [span]
    windows = []
    for p, end in zip(curve, ends, strict=True):
        lengths = (p.mean_input or mean_in, p.mean_output or mean_out)
        replicas: int | None = 0
        capacity: float | None = None
        if p.rate > 0:
            if lengths not in capacities:
                fits = lengths[0] + lengths[1] <= context
                capacities[lengths] = replica_capacity_rps(profile, *lengths, slo_ttft, slo_itl) if fits else 0.0
            capacity = capacities[lengths]
            replicas = math.ceil(p.rate / capacity - 1e-9) if capacity > 0 else None
        windows.append(WindowNeed(p.t, end - p.t, p.rate, p.mean_input, p.mean_output, replicas, capacity))
    total = sum(w.rate_rps * w.length for w in windows)
    return CurveSizing(tuple(windows), span, total, mean_in, mean_out)
