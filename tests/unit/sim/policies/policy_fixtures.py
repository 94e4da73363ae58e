"""Hand-made timelines for the policy tests: a context, steady traces, observations."""

from __future__ import annotations

from typing import Any

from inferscale.perf import ReplicaProfile, replica_profile
from inferscale.scaling.types import MetricsState, Observation
from inferscale.sim.policies import PolicyContext
from inferscale.sim.requests import Request, Trace

PROFILE: ReplicaProfile = replica_profile("llama-3.1-8b", "h100")


def steady_trace(
    segments: list[tuple[float, float, float]], input_tokens: int = 1000, output_tokens: int = 200
) -> Trace:
    """Evenly spaced arrivals: (start, end, rate) per segment."""
    requests = []
    for start, end, rate in segments:
        n = round((end - start) * rate)
        requests += [Request(start + i / rate, input_tokens, output_tokens) for i in range(n)]
    return Trace("steady", tuple(requests), max(end for _, end, _ in segments))


def make_obs(current: int, ready: int | None = None, pending: int = 0, **fields: Any) -> Observation:
    ready = current if ready is None else ready
    return Observation(
        at=fields.pop("at", 0.0),
        current_replicas=current,
        ready_replicas=ready,
        pending_replicas=pending,
        pods_reporting=fields.pop("pods_reporting", ready),
        state=MetricsState.COMPLETE,
        **fields,
    )


def make_ctx(**overrides: Any) -> PolicyContext:
    args: dict[str, Any] = {
        "profile": PROFILE,
        "slo_ttft": 0.5,
        "slo_itl": 0.05,
        "time_to_ready": 180.0,
        "min_replicas": 1,
        "max_replicas": 100,
        "trace": steady_trace([(0.0, 1200.0, 5.0)]),
        "interval": 10.0,
    }
    args.update(overrides)
    return PolicyContext(**args)
