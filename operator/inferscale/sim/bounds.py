"""What bounds a benchmark figure besides the policy itself: the target each baseline is configured
with on a replay, and how much of the run a policy spent at the fleet's max replicas (where its
GPU-hours are the benchmark's cap, not the peer's own cost)."""

from __future__ import annotations

from dataclasses import dataclass

from inferscale.sim.policies import PolicyContext
from inferscale.sim.policies.aibrix import AIBrixAPA
from inferscale.sim.policies.dynamo import DynamoSLA
from inferscale.sim.policies.hpa import HPAGpuUtil
from inferscale.sim.policies.keda import KedaQueue
from inferscale.sim.policies.knative import TARGET_UTILIZATION, KnativeKPA
from inferscale.sim.policies.wva import KV_SPARE_TRIGGER, KV_THRESHOLD, QUEUE_SPARE_TRIGGER, QUEUE_THRESHOLD
from inferscale.sim.run import Timeline

# At max replicas for this share of the run or more, a policy's GPU-hours are mostly the cap's.
CAPPED_SHARE = 0.10


@dataclass(frozen=True)
class Bounds:
    max_replicas: int
    targets: dict[str, str]  # baseline -> its configured target on this replay, as the report prints it


def replay_bounds(ctx: PolicyContext) -> Bounds:
    """Read off the baselines as `make_policy` builds them for this context, so the report cannot drift
    from what ran."""
    keda, hpa, kpa, apa, dynamo = KedaQueue(ctx), HPAGpuUtil(ctx), KnativeKPA(ctx), AIBrixAPA(ctx), DynamoSLA(ctx)
    engine_rps = ctx.capacity_rps(ctx.mean_input_tokens, ctx.mean_output_tokens)
    return Bounds(
        ctx.max_replicas,
        {
            "keda-queue": f"{keda.threshold:g} waiting per replica",
            "hpa-gpu-util": f"GPU busy {hpa.target:.0%}",
            "knative-kpa": (
                f"{kpa.target_value:.0f} in flight per pod ({kpa.target:.0f} "
                f"{'given' if ctx.given_target(kpa.name) else 'at the SLO'} × {TARGET_UTILIZATION:.0%})"
            ),
            "aibrix-apa": (
                f"KV {apa.target:.2f} (given)"
                if ctx.given_target(apa.name)
                else f"KV {apa.target:.2f} ({ctx.slo_kv_usage:.2f} at the SLO × {TARGET_UTILIZATION:.0%})"
            ),
            "wva-saturation": (
                f"KV {KV_THRESHOLD:.2f} / queue {QUEUE_THRESHOLD:g} (spare {KV_SPARE_TRIGGER:.2f} / "
                f"{QUEUE_SPARE_TRIGGER:g})"
            ),
            "dynamo-sla": f"every {dynamo.adjustment_interval:g} s; {engine_rps:.1f} rps per engine at the SLA",
        },
    )


def time_at_max(timeline: Timeline, max_replicas: int) -> float:
    """Share of the timeline's samples with the provisioned count at the cap (or above it, while
    removed replicas drain)."""
    if not timeline.provisioned:
        return 0.0
    return sum(p >= max_replicas for p in timeline.provisioned) / len(timeline.provisioned)
