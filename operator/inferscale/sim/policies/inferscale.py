"""inferscale's own policy, exactly as the operator runs it.

- The Policy comes from an InferenceServiceSpec through `api.convert.policy_from_spec`, the operator's
  conversion: the context's model profile, GPU and TP, SLOs, replica bounds, time-to-ready (as
  `warmup.timeToReady`) and, when given, `targets.capacityUtilization` and `behavior.scaleDown.release`;
  every other field at the CRD's defaults (targets KV 0.8, 4 waiting per replica and capacity 0.8,
  tolerance 0.1, scale-down window 300 s released linearly ...), and the context's interval as the
  operator's --interval.
- Capacity prior: the perf model at the request lengths the engines report this tick (token rates over
  the request rate), through `api.convert.with_observed_prior`, the function the operator calls; before
  any completion it is the spec's prior at typical lengths (1000 in / 200 out). Never the trace's future.
- The ScalerState is written to and read back from its status form (`state_to_status` /
  `state_from_status`) between ticks, as the operator keeps it in the CR status, so every tick
  proves the state survives a restart. (The operator skips status writes that carry no news; then its
  next tick reads an older `lastTick` and measures the queue's growth over a longer span. The record,
  events and learned capacity are news and always written, so they match this adapter's.)
- The rate history is the last `forecast.HISTORY_KEPT` seconds of the replay's, what the operator keeps: the
  seasonal forecast reads the past days it would have (two), not every day of a 14-day replay (up to seven).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from inferscale.api.convert import observed_lengths, policy_from_spec, with_observed_prior
from inferscale.api.rules import MAX_DURATION_SECONDS
from inferscale.api.spec import InferenceServiceSpec
from inferscale.scaling import Decision, Observation, Policy, RateSample, decide, state_from_status, state_to_status
from inferscale.scaling.forecast import HISTORY_KEPT
from inferscale.sim.policies.context import PolicyContext


class KeptHistory:
    """What the operator would hold of a replay's history at each tick, its last `HISTORY_KEPT` seconds, as a
    list trimmed in place: the replay only appends to its history, so each tick adds the new samples and drops
    the expired ones instead of searching the whole history through a view (a third of a 14-day replay's wall
    time went there). Any other history, or time going back, starts over."""

    def __init__(self) -> None:
        self._source: Sequence[RateSample] | None = None
        self._seen = 0
        self._now = -math.inf
        self._samples: list[RateSample] = []

    def update(self, history: Sequence[RateSample], now: float) -> list[RateSample]:
        if history is not self._source or len(history) < self._seen or now < self._now:
            self._source, self._seen, self._samples = history, 0, []
        self._samples.extend(history[self._seen :])
        self._seen, self._now = len(history), now
        cut = bisect_left(self._samples, now - HISTORY_KEPT, key=lambda s: s.at)
        if cut:
            del self._samples[:cut]
        return self._samples


def _duration(seconds: float) -> str:
    text = f"{seconds:.3f}s"
    # Only where the millisecond form is refused by the spec does it change, so that every other duration reads
    # as before: under half a millisecond it reads 0s, no SLO (given to the nanosecond, the spec's resolution),
    # and rounded up it can pass the spec's longest duration, which the CLI lets through.
    if seconds > 0 and float(text[:-1]) == 0:
        return f"{seconds:.9f}s"
    if float(text[:-1]) > MAX_DURATION_SECONDS:
        return f"{math.floor(seconds * 1000) / 1000:.3f}s"
    return text


def spec_for(ctx: PolicyContext) -> InferenceServiceSpec:
    p = ctx.profile
    slo = {"ttftP95": _duration(ctx.slo_ttft), "itlMean": _duration(ctx.slo_itl)}
    if ctx.slo_tpot is not None:
        slo["tpotP95"] = _duration(ctx.slo_tpot)
    targets = {} if ctx.capacity_utilization is None else {"capacityUtilization": ctx.capacity_utilization}
    scale_down = {
        key: value
        for key, value in (("release", ctx.scale_down_release), ("stabilizationWindow", ctx.scale_down_window))
        if value is not None
    }
    return InferenceServiceSpec.model_validate(
        {
            # the engine's batch limits too, so the prior is the capacity of the replicas it runs on
            "model": {
                "name": p.model,
                "profile": p.model,
                "gpu": p.gpu,
                "tensorParallel": p.tp,
                "maxNumSeqs": p.max_num_seqs,
                "maxNumBatchedTokens": p.max_num_batched_tokens,
            },
            "scaleTargetRef": {"name": "simulated"},
            "replicas": {"min": max(ctx.min_replicas, 1), "max": ctx.max_replicas},
            "slo": slo,
            "targets": targets,
            "warmup": {"timeToReady": _duration(ctx.time_to_ready_max or ctx.time_to_ready)},
            "behavior": {"scaleDown": scale_down} if scale_down else {},
        }
    )


class Inferscale:
    name = "inferscale"
    steers_deletion = True  # the operator sets pod-deletion-cost before a scale-down

    def __init__(self, ctx: PolicyContext) -> None:
        self.ctx = ctx
        self.reads_pods = ctx.reads_pods  # how it lives through a metrics outage (`sim.outage`)
        self.spec = spec_for(ctx)
        self.policy: Policy = policy_from_spec(self.spec, ctx.interval)
        self.interval = self.policy.interval
        self.status: dict[str, Any] = state_to_status(state_from_status(None))
        self.last_decision: Decision | None = None
        self.history = KeptHistory()
        self.lengths: tuple[float, float] | None = None  # the last the engines reported, as the operator keeps

    def _policy_now(self, obs: Observation) -> Policy:
        self.lengths = observed_lengths(obs) or self.lengths
        return with_observed_prior(self.policy, self.spec.model, obs, self.lengths)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        policy = self._policy_now(obs)
        state = state_from_status(self.status)
        decision = decide(obs, policy, state, now, self.history.update(rate_history, now))
        self.status = state_to_status(decision.state)
        self.last_decision = decision
        return decision.replicas
