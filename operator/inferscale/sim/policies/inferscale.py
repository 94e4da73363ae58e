"""inferscale's own policy, exactly as the operator runs it.

- The Policy comes from an InferenceServiceSpec through `api.convert.policy_from_spec`, the operator's
  conversion: the context's model profile, GPU and TP, SLOs, replica bounds and time-to-ready (as
  `warmup.timeToReady`), every other field at the CRD's defaults (targets KV 0.8 and 4 waiting per
  replica, tolerance 0.1, scale-down window 300 s ...), and the context's interval as the
  operator's --interval.
- Capacity prior: the spec's prior is the perf model at typical lengths (1000 in / 200 out). Here it
  is replaced, each tick, by the perf model at the mean lengths observed so far (prompt and
  generation token rates over the request rate, accumulated over the ticks seen), never from the
  trace's future; before any completion it stays at the typical-length prior. NOTE: the operator
  itself keeps the typical-length prior (a difference to close there, not here).
- The ScalerState is written to and read back from its status form (`state_to_status` /
  `state_from_status`) between ticks, as the operator keeps it in the CR status, so every tick
  proves the state survives a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from inferscale.api.convert import policy_from_spec
from inferscale.api.spec import InferenceServiceSpec
from inferscale.scaling import Decision, Observation, Policy, RateSample, decide, state_from_status, state_to_status
from inferscale.sim.policies.context import PolicyContext


def _duration(seconds: float) -> str:
    return f"{seconds:.3f}s"


def spec_for(ctx: PolicyContext) -> InferenceServiceSpec:
    p = ctx.profile
    return InferenceServiceSpec.model_validate(
        {
            "model": {"name": p.model, "profile": p.model, "gpu": p.gpu, "tensorParallel": p.tp},
            "scaleTargetRef": {"name": "simulated"},
            "replicas": {"min": max(ctx.min_replicas, 1), "max": ctx.max_replicas},
            "slo": {"ttftP95": _duration(ctx.slo_ttft), "itlMean": _duration(ctx.slo_itl)},
            "warmup": {"timeToReady": _duration(ctx.time_to_ready)},
        }
    )


class Inferscale:
    name = "inferscale"

    def __init__(self, ctx: PolicyContext) -> None:
        self.ctx = ctx
        self.policy: Policy = policy_from_spec(spec_for(ctx), ctx.interval)
        self.interval = self.policy.interval
        self.status: dict[str, Any] = state_to_status(state_from_status(None))
        self.last_decision: Decision | None = None
        self._requests = 0.0
        self._prompt_tokens = 0.0
        self._generation_tokens = 0.0

    def observed_lengths(self) -> tuple[float, float] | None:
        """Mean input and output tokens of the requests completed so far, or None before any."""
        if self._requests <= 0:
            return None
        return self._prompt_tokens / self._requests, max(self._generation_tokens / self._requests, 1.0)

    def _policy_now(self, obs: Observation) -> Policy:
        if obs.request_rate and obs.prompt_token_rate is not None and obs.generation_token_rate is not None:
            self._requests += obs.request_rate
            self._prompt_tokens += obs.prompt_token_rate
            self._generation_tokens += obs.generation_token_rate
        lengths = self.observed_lengths()
        if lengths is None:
            return self.policy
        capacity = self.ctx.capacity_rps(*lengths)
        return replace(self.policy, capacity_prior_rps=capacity if capacity > 0 else None)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        policy = self._policy_now(obs)
        state = state_from_status(self.status)
        decision = decide(obs, policy, state, now, rate_history)
        self.status = state_to_status(decision.state)
        self.last_decision = decision
        return decision.replicas
