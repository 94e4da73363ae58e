"""Every scaling policy the simulator compares: inferscale's own, the peers' baselines, the oracle.

`make_policy(name, ctx)` builds a fresh policy (each keeps its own state between decisions, as the
real controller does in memory); the simulator calls `policy.decide(obs, now, rate_history)` every
`policy.interval` seconds and writes the returned count to the simulated /scale.
"""

from __future__ import annotations

from collections.abc import Callable

from inferscale.sim.policies.aibrix import AIBrixAPA
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.dynamo import DynamoSLA
from inferscale.sim.policies.hpa import HPAGpuUtil
from inferscale.sim.policies.inferscale import Inferscale
from inferscale.sim.policies.keda import KedaQueue
from inferscale.sim.policies.knative import KnativeKPA
from inferscale.sim.policies.oracle import Oracle
from inferscale.sim.policies.reactive_oracle import ReactiveOracle
from inferscale.sim.policies.static_peak import StaticPeak
from inferscale.sim.policies.wva import WVASaturation
from inferscale.sim.policy import ScalingPolicy

_FACTORIES: dict[str, Callable[[PolicyContext], ScalingPolicy]] = {
    "inferscale": Inferscale,
    "oracle": Oracle,
    "reactive-oracle": ReactiveOracle,
    "static-peak": StaticPeak,
    "hpa-gpu-util": HPAGpuUtil,
    "keda-queue": KedaQueue,
    "knative-kpa": KnativeKPA,
    "aibrix-apa": AIBrixAPA,
    "wva-saturation": WVASaturation,
    "dynamo-sla": DynamoSLA,
}

POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def make_policy(name: str, ctx: PolicyContext) -> ScalingPolicy:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)}") from None
    return factory(ctx)


__all__ = ["POLICY_NAMES", "PolicyContext", "make_policy"]
