"""The InferenceService status: what the operator writes.

kopf merge-patches status and the API server prunes every field the schema does not declare, with a
"successful" PATCH. So every field the operator writes is declared here, and the models forbid extra
fields: a status dict the operator builds can be checked with `InferenceServiceStatus.model_validate`
in its tests, which is exactly the check pruning would fail silently.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from inferscale.api.fields import STATUS_CONFIG

HISTORY_LIMIT = 20
# Pods whose start-up status.timeToReady keeps (each list); a fleet larger than this measures the rest as if
# the operator had not watched them start.
MAX_KEPT_STARTS = 1000
CONDITION_TYPES = (
    "Ready",
    "MetricsAvailable",
    "SLOMet",
    "ScalingLimited",
    "CapacityBlocked",
    "PodsRestarting",
    "PodsStuck",
    "Advisory",
    "Conflict",
    "PrefillStepWithinITL",
)

_RFC3339 = "RFC 3339 time."


class Observed(BaseModel):
    """The last observation of the engine metrics (unknown values are absent, never zero)."""

    model_config = STATUS_CONFIG

    at: str | None = Field(default=None, description=_RFC3339)
    metrics: Literal["Complete", "Partial", "Missing", "Stale"] | None = Field(
        default=None, description="Completeness: Complete, Partial (some pods missing), Missing or Stale."
    )
    pods_reporting: int | None = Field(default=None, description="Pods with fresh engine metrics.")
    ttft_p95: str | None = Field(default=None, description="Observed P95 time to first token (duration).")
    itl_mean: str | None = Field(default=None, description="Observed mean inter-token latency (duration).")
    tpot_p95: str | None = Field(
        default=None,
        description="Observed P95 over requests of each request's mean inter-token latency (duration); "
        "reported when slo.tpotP95 is set.",
    )
    kv_cache_utilization: float | None = Field(default=None, description="Mean KV-cache usage, 0..1.")
    kv_cache_percent: int | None = Field(default=None, description="kvCacheUtilization in percent (printer column).")
    waiting: float | None = Field(default=None, description="Requests waiting, summed over pods.")
    running: float | None = Field(default=None, description="Requests running, summed over pods.")
    request_rate: float | None = Field(default=None, description="Finished requests per second.")
    prompt_token_rate: float | None = Field(
        default=None, description="Prompt tokens per second, those served from the prefix cache included."
    )
    cached_prompt_token_rate: float | None = Field(
        default=None,
        description="Prompt tokens per second served from the prefix cache (vLLM's prompt_tokens_cached_total, "
        "SGLang's cached_tokens_total); absent where the engine does not count them. The capacity prior sizes "
        "a replica at the prompt tokens the engine computes.",
    )
    generation_token_rate: float | None = Field(default=None, description="Generated tokens per second.")


class StatusRecommendation(BaseModel):
    """One signal's replica count and the quantity behind it."""

    model_config = STATUS_CONFIG

    signal: str | None = Field(default=None, description="The signal (a Reason such as KVCacheSaturation).")
    replicas: int | None = Field(default=None, description="Replicas this signal asks for.")
    value: float | None = Field(default=None, description="The observed or forecast quantity.")
    target: float | None = Field(default=None, description="Its set-point.")
    message: str | None = Field(default=None, description="One human sentence.")


class Forecast(BaseModel):
    """Demand expected one time-to-ready ahead."""

    model_config = STATUS_CONFIG

    request_rate: float | None = Field(default=None, description="Forecast requests per second.")
    horizon: str | None = Field(default=None, description="How far ahead (duration).")
    method: str | None = Field(
        default=None,
        description=(
            "How requestRate was made: seasonal (the level plus the same hour's change on past days), holt"
            " (the recent trend), peak (the recent peak: short history, or a projection below it); unset with"
            " no forecast."
        ),
    )


class PodStart(BaseModel):
    """One pod's first creation-to-Ready, as the operator saw it."""

    model_config = STATUS_CONFIG

    pod: str = Field(description="Pod name.")
    seconds: float = Field(ge=0, description="Creation to its first Ready, seconds.")


class TimeToReady(BaseModel):
    """Measured pod creation to Ready."""

    model_config = STATUS_CONFIG

    measured: str | None = Field(
        default=None,
        description="Slowest start-up among the target's current pods (the lead, duration): creation to first "
        "Ready for a pod the operator watched start; for one that became Ready unwatched (the operator down, "
        "the target just adopted), its Ready time if within twice the median (a later one is a readiness "
        "flap's). Time over 15 minutes waiting for a node is a capacity problem and not counted; pods "
        "restarted before they were measured, and starts over an hour, are left out.",
    )
    samples: int | None = Field(default=None, description="Pods measured.")
    watching: list[str] | None = Field(
        default=None,
        max_length=MAX_KEPT_STARTS,
        description="Pods not Ready yet that have not been Ready: their starts are watched.",
    )
    starts: list[PodStart] | None = Field(
        default=None,
        max_length=MAX_KEPT_STARTS,
        description="The first creation-to-Ready of each current pod the operator watched start; a readiness "
        "flap does not move it.",
    )


class StatusDecision(BaseModel):
    """The last decision and what bounded it."""

    model_config = STATUS_CONFIG

    at: str | None = Field(default=None, description=_RFC3339)
    replicas: int | None = Field(default=None, description="Decided replica count.")
    reason: str | None = Field(default=None, description="The reason that determined the count.")
    message: str | None = Field(default=None, description="One human sentence.")
    limits: list[str] | None = Field(default=None, description="Clamps that changed the count, in order.")


class Condition(BaseModel):
    """A Kubernetes-style condition."""

    model_config = STATUS_CONFIG

    type: str | None = Field(default=None, description="One of " + ", ".join(CONDITION_TYPES) + ".")
    status: Literal["True", "False", "Unknown"] | None = Field(default=None, description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="CamelCase reason.")
    message: str | None = Field(default=None, description="Human explanation.")
    last_transition_time: str | None = Field(default=None, description=_RFC3339)
    observed_generation: int | None = Field(default=None, description="Spec generation the condition reflects.")


class HistoryEntry(BaseModel):
    """One scale action."""

    model_config = STATUS_CONFIG

    at: str | None = Field(default=None, description=_RFC3339)
    from_: int | None = Field(default=None, alias="from", description="Replicas before.")
    to: int | None = Field(default=None, description="Replicas after.")
    reason: str | None = Field(default=None, description="Why.")
    message: str | None = Field(default=None, description="One human sentence.")


class InferenceServiceStatus(BaseModel):
    """Observed state, the last decision and its explanation."""

    model_config = STATUS_CONFIG

    replicas: int | None = Field(default=None, description="The target's current spec.replicas.")
    ready_replicas: int | None = Field(default=None, description="Ready pods of the target.")
    pending_replicas: int | None = Field(default=None, description="Pods created but not Ready.")
    restarting_replicas: int | None = Field(
        default=None,
        description="Of the pending pods, those not Ready after a container restart (see condition PodsRestarting).",
    )
    desired_replicas: int | None = Field(
        default=None,
        description=(
            "The last decision's replica count. This field, observed, recommendations, forecast and decision are"
            " removed while Ready is False for a problem (Conflict, InvalidSpec, TargetNotFound, ...): nothing is"
            " decided then."
        ),
    )
    last_scale_time: str | None = Field(default=None, description="When the operator last scaled (RFC 3339).")
    observed_generation: int | None = Field(default=None, description="Spec generation last acted upon.")
    target_name: str | None = Field(default=None, description="Name of the Deployment scaled.")
    target_uid: str | None = Field(
        default=None,
        alias="targetUID",
        description="UID of the Deployment scaled: the decision state in `scaler` is that Deployment's.",
    )
    observed: Observed | None = Field(default=None, description="Last observation.")
    recommendations: list[StatusRecommendation] | None = Field(default=None, description="Per-signal counts.")
    forecast: Forecast | None = Field(default=None, description="Demand forecast.")
    time_to_ready: TimeToReady | None = Field(default=None, description="Measured time-to-ready.")
    decision: StatusDecision | None = Field(default=None, description="Last decision.")
    conditions: list[Condition] | None = Field(default=None, description="Conditions.")
    history: list[HistoryEntry] | None = Field(
        default=None, max_length=HISTORY_LIMIT, description=f"The last {HISTORY_LIMIT} scale actions, oldest first."
    )
    scaler: dict[str, Any] | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
        description="Decision state (stabilization windows, rate-limit history) round-tripped by scaling.state.",
    )
