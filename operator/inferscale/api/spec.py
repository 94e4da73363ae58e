"""The InferenceService spec: what a user declares (DESIGN §3). The CRD is rendered from these models."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)

from inferscale.api.fields import (
    DEFAULT_KEY,
    SPEC_CONFIG,
    ChangeLimit,
    Duration,
    Engine,
    Fraction,
    Mode,
    OpenFraction,
    PositiveDuration,
    PositiveNumber,
    Release,
    TimeToReady,
    one_of,
)
from inferscale.api.rules import (
    BATCH_LIMITS,
    CATALOG_NAME_MAX_LENGTH,
    CRON,
    CRON_FIXED,
    CRON_MAX_LENGTH,
    GPU,
    ONE_TARGET,
    PROFILE,
    REPLICA_BOUNDS,
    SCHEDULE_WITHIN_MAX,
    SELECTOR_KEYS,
    SELECTOR_RESERVED,
    TENSOR_PARALLEL,
    TPOT_NEEDS_VLLM,
    Rule,
    check_catalog_name,
    check_cron,
    check_selector,
)
from inferscale.perf.catalog import gpu_names, model_names, model_spec
from inferscale.perf.memory import valid_tp

# What a Deployment's name can be (a DNS-1123 subdomain): anything else can never be found.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# spec.replicas of a Deployment is an int32: a larger bound could never be written.
MAX_REPLICAS = 2**31 - 1

# The capacity prior assumes these request lengths when only a model profile is known.
TYPICAL_INPUT_TOKENS = 1000
TYPICAL_OUTPUT_TOKENS = 200


Cron = Annotated[
    str,
    AfterValidator(check_cron),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": CRON_MAX_LENGTH,
            "x-kubernetes-validations": [CRON.schema(), CRON_FIXED.schema()],
        }
    ),
]


def _catalog_name(rule: Rule, names: list[str]) -> object:
    schema = {"type": "string", "minLength": 1, "maxLength": CATALOG_NAME_MAX_LENGTH}
    return Annotated[
        str,
        StringConstraints(min_length=1, max_length=CATALOG_NAME_MAX_LENGTH),
        AfterValidator(check_catalog_name(rule, names)),
        WithJsonSchema({**schema, "x-kubernetes-validations": [rule.schema()]}),
    ]


Profile = _catalog_name(PROFILE, model_names())
Gpu = _catalog_name(GPU, gpu_names())


class ModelRef(BaseModel):
    """The served model: the name the engine reports and, optionally, a catalog entry for a capacity prior."""

    model_config = ConfigDict(
        **SPEC_CONFIG,
        json_schema_extra={"x-kubernetes-validations": [BATCH_LIMITS.schema(), TENSOR_PARALLEL.schema()]},
    )

    name: str = Field(min_length=1, description="The engine's model name: the `model_name` label of its metrics.")
    profile: Profile | None = Field(  # type: ignore[valid-type]
        default=None,
        description="Model catalog entry in inferscale.perf (e.g. llama-3.1-8b). When set, a per-replica "
        "capacity at the SLO is the prior for the capacity signal until one is learned from SLO-compliant "
        "periods: at the mean request lengths the engines report (their token and request counters), "
        f"{TYPICAL_INPUT_TOKENS} input / {TYPICAL_OUTPUT_TOKENS} output tokens until they do.",
    )
    gpu: Gpu = Field(  # type: ignore[valid-type]
        default="h100-80gb", description="GPU catalog entry of one replica; used with profile."
    )
    tensor_parallel: int = Field(
        default=1,
        ge=1,
        description="GPUs per replica (tensor parallel size), for the prior. Unset: the flag in the target "
        "Deployment's container args (vLLM --tensor-parallel-size or -tp, SGLang --tp-size), else 1.",
    )
    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        description="The engine's vLLM --max-num-seqs, for the prior. Unset: the flag in the target "
        "Deployment's container args (vLLM --max-num-seqs, SGLang --max-running-requests), else vLLM's default "
        "for the GPU.",
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        ge=1,
        description="The engine's vLLM --max-num-batched-tokens (the chunked-prefill budget), for the prior. "
        "Unset: the flag in the target Deployment's container args (vLLM --max-num-batched-tokens, SGLang "
        "--chunked-prefill-size, whose -1 turns chunking off: the model's context length), else vLLM's default "
        "for the GPU.",
    )

    @model_validator(mode="after")
    def _batch_limits(self) -> Self:
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        if seqs is not None and tokens is not None and tokens < seqs:
            raise ValueError(f"{BATCH_LIMITS.message} ({tokens} < {seqs})")
        return self

    @model_validator(mode="after")
    def _tensor_parallel(self) -> Self:
        if self.profile is not None and self.tensor_parallel not in valid_tp(model_spec(self.profile)):
            raise ValueError(f"{TENSOR_PARALLEL.message} (got {self.tensor_parallel} for {self.profile.strip()})")
        return self


class ScaleTargetRef(BaseModel):
    """An existing workload to scale through its /scale subresource."""

    model_config = SPEC_CONFIG

    api_version: Annotated[Literal["apps/v1"], BeforeValidator(one_of("apps/v1"))] = Field(
        default="apps/v1", description="API version of the target."
    )
    kind: Annotated[Literal["Deployment"], BeforeValidator(one_of("Deployment"))] = Field(
        default="Deployment", description="Kind of the target; only Deployments are supported."
    )
    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="Name of the target in the InferenceService's namespace.",
    )


class ObjectMeta(BaseModel):
    """Labels and annotations copied onto the managed Deployment's pods."""

    model_config = SPEC_CONFIG

    labels: dict[str, str] = Field(default_factory=dict, description="Pod labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Pod annotations.")


class Container(BaseModel):
    """A container of the model server pod; every other Kubernetes container field is passed through."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(min_length=1, description="Container name.")
    image: str = Field(min_length=1, description="Container image, pinned by tag or digest.")


class PodSpec(BaseModel):
    """A Kubernetes PodSpec; fields other than containers are passed through unchecked."""

    model_config = ConfigDict(extra="allow", strict=True)

    containers: list[Container] = Field(min_length=1, description="The model server container(s).")


class PodTemplate(BaseModel):
    """The pod template of the Deployment the operator creates and owns (managed mode)."""

    model_config = SPEC_CONFIG

    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Pod labels and annotations.")
    spec: PodSpec = Field(description="The pod spec (Kubernetes PodSpec).")


class Replicas(BaseModel):
    """Bounds the operator never leaves."""

    model_config = ConfigDict(**SPEC_CONFIG, json_schema_extra={"x-kubernetes-validations": [REPLICA_BOUNDS.schema()]})

    min: int = Field(default=1, ge=1, le=MAX_REPLICAS, description="Fewest replicas, also while metrics are missing.")
    max: int = Field(ge=1, le=MAX_REPLICAS, description="Most replicas.")

    @model_validator(mode="after")
    def _min_le_max(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"{REPLICA_BOUNDS.message} (min {self.min}, max {self.max})")
        return self


class SLO(BaseModel):
    """Latency objectives, with vLLM's definitions: TTFT = queue + prefill; ITL = time between output tokens."""

    model_config = SPEC_CONFIG

    ttft_p95: PositiveDuration = Field(default="500ms", description="95th percentile time to first token.")
    itl_mean: PositiveDuration = Field(default="50ms", description="Mean inter-token latency.")
    tpot_p95: PositiveDuration | None = Field(
        default=None,
        description="95th percentile over requests of each request's mean inter-token latency (TPOT), from "
        "vllm:request_time_per_output_token_seconds. Unset: not checked. itlMean bounds the fleet's "
        "token-weighted mean, which can sit under target while short answers decoded next to long prefills "
        "stream slowly.",
    )


class Targets(BaseModel):
    """Saturation set-points per replica."""

    model_config = SPEC_CONFIG

    kv_cache_utilization: Fraction = Field(default=0.8, description="KV-cache usage per replica to hold, in (0, 1].")
    waiting_per_replica: PositiveNumber = Field(default=4.0, description="Queued requests per replica to hold.")
    capacity_utilization: Fraction = Field(
        default=0.8,
        description="Share of one replica's request rate at the SLO that the forecast demand may use, in (0, 1]: "
        "the capacity signal asks for demand / (capacity x this). Lower keeps standing headroom for traffic "
        "that jumps faster than a replica starts; `inferscale tune` finds the cheapest value that meets an "
        "attainment target on your own trace.",
    )


class ScaleUp(BaseModel):
    """How fast replicas are added."""

    model_config = SPEC_CONFIG

    stabilization_window: Duration = Field(
        default="0s", description="Scale up to the lowest recommendation within this window."
    )
    max_increase: ChangeLimit | None = Field(
        default=None,
        description="Most replicas added per period: pods (4) or a percentage of the current count ('100%'). "
        "Unset: 100% or 4 pods, whichever is larger.",
    )
    period: PositiveDuration = Field(default="15s", description="The window maxIncrease is counted over.")


class ScaleDown(BaseModel):
    """How fast replicas are removed."""

    model_config = SPEC_CONFIG

    stabilization_window: Duration | None = Field(
        default=None,
        description="Scale down only to what the recommendations within this window still hold (see release). "
        "Unset: the time-to-ready (measured, else warmup.timeToReady) plus 1m, so that a scale-down is undone "
        "no sooner than a new pod could be Ready and its load seen (5m with a 4m start-up).",
    )
    release: Release = Field(
        default="Linear",
        description="How a recommendation holds a scale-down within the window. Hold: whole for the whole "
        "window, as HPA's stabilization (the fleet drops all at once when the window ends). Linear: falling "
        "evenly from what it asked for to the current recommendation over the window, so the fleet steps down "
        "through it: a recommendation R made A seconds ago holds ceil(D + (R - D) x (1 - A / window)) above "
        "today's D.",
    )
    max_decrease: ChangeLimit = Field(
        default="50%", description="Most replicas removed per period: pods (2) or a percentage ('50%')."
    )
    period: PositiveDuration = Field(default="60s", description="The window maxDecrease is counted over.")


class Behavior(BaseModel):
    """Decision cadence and guard rails."""

    model_config = SPEC_CONFIG

    interval: PositiveDuration = Field(
        default="10s",
        description="Time between decisions; at least the operator's --interval, which a shorter value is "
        "raised to (the operator ticks every --interval).",
        json_schema_extra={DEFAULT_KEY: "the operator's --interval (10s unless changed)"},
    )
    tolerance: OpenFraction = Field(
        default=0.1, description="Dead band: ignore recommendations within this fraction of the current count."
    )
    scale_up: ScaleUp = Field(default_factory=ScaleUp, description="Scale-up rate limits.")
    scale_down: ScaleDown = Field(default_factory=ScaleDown, description="Scale-down rate limits.")


class Schedule(BaseModel):
    """A known peak: a replica floor for `duration` after each cron match (UTC), ordered one time-to-ready
    (the measured one, else `warmup.timeToReady`) before the match, so that the replicas are Ready when it
    starts."""

    model_config = SPEC_CONFIG

    cron: Cron = Field(description="Start of the window, five-field cron in UTC ('0 9 * * 1-5').")
    duration: PositiveDuration = Field(description="Length of the window.")
    min_replicas: int = Field(ge=1, le=MAX_REPLICAS, description="Replica floor during the window.")


class Warmup(BaseModel):
    """Leading demand: a new replica takes minutes to load weights, so scale-up must start early."""

    model_config = SPEC_CONFIG

    time_to_ready: TimeToReady = Field(
        default="180s", description="Prior for pod creation to Ready; replaced by the measured value."
    )
    predictive: bool = Field(default=True, description="Lead demand by time-to-ready using the forecaster.")
    schedules: list[Schedule] = Field(default_factory=list, max_length=20, description="Known peaks.")


class Metrics(BaseModel):
    """Where the engine metrics come from."""

    model_config = SPEC_CONFIG

    selector: Annotated[dict[str, str], AfterValidator(check_selector)] = Field(
        default_factory=dict,
        max_length=16,
        description="Extra PromQL label matchers (label: value), added to namespace and model_name.",
        json_schema_extra={"x-kubernetes-validations": [SELECTOR_KEYS.schema(), SELECTOR_RESERVED.schema()]},
    )
    stale_after: PositiveDuration = Field(
        default="60s", description="Samples older than this count as missing: hold the current count."
    )
    pod_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="While Prometheus cannot give the engines' metrics (down, or their series gone), read each Ready "
        "pod's /metrics on this port directly (vLLM serves it on its API port, 8000 by default; SGLang with "
        "--enable-metrics on its own): the operator can then scale up through the outage, never down, until "
        "Prometheus answers again. Unset: hold the count. Needs the operator to reach the pods' IPs.",
    )


class InferenceServiceSpec(BaseModel):
    """An SLO-scaled inference server: which model server, its latency objectives, bounds and behaviour."""

    model_config = ConfigDict(
        **SPEC_CONFIG,
        json_schema_extra={
            "x-kubernetes-validations": [ONE_TARGET.schema(), SCHEDULE_WITHIN_MAX.schema(), TPOT_NEEDS_VLLM.schema()]
        },
    )

    model: ModelRef = Field(description="The served model.")
    engine: Engine = Field(
        default="vllm",
        description="Metric dialect of the model server: vllm (vllm:* names) or sglang (sglang:* names, with the "
        "model_name label of current SGLang builds).",
    )
    scale_target_ref: ScaleTargetRef | None = Field(
        default=None, description="The Deployment to scale. Exactly one of scaleTargetRef and template."
    )
    template: PodTemplate | None = Field(
        default=None,
        description="Pod template of a Deployment the operator creates and owns (managed mode). "
        "Exactly one of scaleTargetRef and template.",
    )
    replicas: Replicas = Field(description="Replica bounds.")
    slo: SLO = Field(default_factory=SLO, description="Latency objectives.")
    targets: Targets = Field(default_factory=Targets, description="Saturation set-points per replica.")
    behavior: Behavior = Field(default_factory=Behavior, description="Cadence and rate limits.")
    warmup: Warmup = Field(default_factory=Warmup, description="Time-to-ready, prediction and schedules.")
    metrics: Metrics = Field(default_factory=Metrics, description="Metric selection and staleness.")
    mode: Mode = Field(default="Active", description="Active scales the target; Advisory decides and reports only.")

    @model_validator(mode="after")
    def _cross_field(self) -> Self:
        if (self.scale_target_ref is None) == (self.template is None):
            raise ValueError(ONE_TARGET.message)
        high = [s.min_replicas for s in self.warmup.schedules if s.min_replicas > self.replicas.max]
        if high:
            raise ValueError(f"{SCHEDULE_WITHIN_MAX.message} ({max(high)} > {self.replicas.max})")
        if self.engine == "sglang" and self.slo.tpot_p95 is not None:
            raise ValueError(TPOT_NEEDS_VLLM.message)
        return self
