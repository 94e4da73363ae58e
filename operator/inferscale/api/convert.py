"""InferenceService spec -> scaling.Policy: durations to seconds, change limits to ScaleRule, the perf prior."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeGuard

from inferscale.api.models import InvalidSpec
from inferscale.api.spec import TYPICAL_INPUT_TOKENS, TYPICAL_OUTPUT_TOKENS, InferenceServiceSpec, ModelRef
from inferscale.perf import (
    PerfError,
    PrefillStep,
    ReplicaProfile,
    model_spec,
    prefill_step,
    replica_capacity_rps,
    replica_profile,
)
from inferscale.perf.chunking import UNCHUNKED
from inferscale.perf.memory import valid_tp
from inferscale.scaling.capacity import RATE_WINDOW
from inferscale.scaling.durations import format_duration, parse_duration
from inferscale.scaling.types import Observation, Policy, Release, ScaleRule, Schedule

# Unset maxIncrease: HPA's default scale-up policy, double or add 4 pods, whichever is more.
DEFAULT_UP_PERCENT = 100.0
DEFAULT_UP_PODS = 4


def _limit(value: int | str | None) -> tuple[float | None, int | None]:
    """(percent, pods) from '50%' or 3; the spec model has already checked the form."""
    if value is None:
        return DEFAULT_UP_PERCENT, DEFAULT_UP_PODS
    if isinstance(value, str):
        return float(value.removesuffix("%")), None
    return None, value


def _rule(window: float, limit: int | str | None, period: str, release: Release = Release.HOLD) -> ScaleRule:
    percent, pods = _limit(limit)
    return ScaleRule(window, percent, pods, parse_duration(period), release)


# the lengths a prior is computed at until the engines report their own
TYPICAL_LENGTHS = (float(TYPICAL_INPUT_TOKENS), float(TYPICAL_OUTPUT_TOKENS))


def capacity_prior(
    model: ModelRef,
    slo_ttft: float,
    slo_itl: float,
    input_tokens: float = TYPICAL_INPUT_TOKENS,
    output_tokens: float = TYPICAL_OUTPUT_TOKENS,
) -> float | None:
    """Requests/s one replica serves at the SLO per the perf model, at the given mean request lengths
    (typical 1000-in/200-out until the engines report their own token rates).

    None without a profile, and None when the model says no load meets the SLO: a zero would ask for
    infinite replicas, while None lets the other signals decide until a capacity is learned.
    Raises InvalidSpec for a profile, GPU or tensor-parallel size the catalog does not know or that does not fit.
    """
    if model.profile is None:
        return None
    try:
        rps = replica_capacity_rps(_profile(model, model.profile), input_tokens, output_tokens, slo_ttft, slo_itl)
    except PerfError as e:
        raise InvalidSpec([f"spec.model: {in_spec_words(str(e))}"]) from None
    return rps if rps > 0 else None


# the perf model's remedies name the engine's settings; a spec's user sets them as the spec's fields
_SPEC_WORDS = (
    ("lower max_num_batched_tokens or max_num_seqs", "lower model.maxNumBatchedTokens or model.maxNumSeqs"),
    ("raise TP", "raise model.tensorParallel"),
    ("use a larger GPU", "set a larger model.gpu"),
)


def in_spec_words(message: str) -> str:
    for engine, spec in _SPEC_WORDS:
        message = message.replace(engine, spec)
    return message


def _profile(model: ModelRef, profile: str) -> ReplicaProfile:
    return _cached_profile(profile, model.gpu, model.tensor_parallel, model.max_num_seqs, model.max_num_batched_tokens)


# The capacity prior is asked for every decision (at the lengths observed that tick) and the profile behind it
# depends on these five values only: a replay asks hundreds of thousands of times for one profile.
@functools.lru_cache(maxsize=64)
def _cached_profile(profile: str, gpu: str, tp: int, seqs: int | None, tokens: int | None) -> ReplicaProfile:
    return replica_profile(profile, gpu, tp, max_num_seqs=seqs, max_num_batched_tokens=tokens)


def with_engine_limits(model: ModelRef, limits: Mapping[str, int]) -> ModelRef:
    """`model` with the batch limits the engine runs with (read from the Deployment's args) wherever the
    spec leaves them unset: the spec wins, the args beat vLLM's defaults. Limits the perf model refuses
    together (vLLM would not start with them either) leave `model` as it is. A budget `UNCHUNKED` (SGLang
    without chunked prefill) is the model's context length: a prompt prefills whole, however long."""
    unset = _left_to_args(model)
    update = {k: v for k, v in limits.items() if k in unset}
    if not update or model.profile is None:
        return model
    if update.get("max_num_batched_tokens") == UNCHUNKED:
        update["max_num_batched_tokens"] = model_spec(model.profile).context_tokens
    filled = model.model_copy(update=update)
    try:
        _profile(filled, model.profile)
    except PerfError:
        return model
    return filled


def prefill_check(
    model: ModelRef, obs: Observation, slo_ttft: float | None, slo_itl: float | None
) -> PrefillStep | None:
    """The engine step that carries one prompt's prefill chunk, at the request lengths the engines report
    and the batch a replica holds at the SLO (see `perf.chunking`). None without a profile, reported
    lengths or an ITL SLO, or when the perf model refuses the profile or the lengths."""
    lengths = observed_lengths(obs)
    if model.profile is None or lengths is None or slo_itl is None:
        return None
    try:
        return prefill_step(_profile(model, model.profile), *lengths, slo_ttft, slo_itl)
    except PerfError:
        return None


_BATCH_LIMITS = ("max_num_seqs", "max_num_batched_tokens")


def _left_to_args(model: ModelRef) -> set[str]:
    """The engine settings the spec leaves to the target Deployment's args: the batch limits it does not give,
    and the tensor-parallel size where it gives none (1 by default, so unset is not None)."""
    unset = {k for k in _BATCH_LIMITS if getattr(model, k) is None}
    if "tensor_parallel" not in model.model_fields_set:
        unset.add("tensor_parallel")
    return unset


def policy_from_spec(spec: InferenceServiceSpec, default_interval: float) -> Policy:
    """The decision policy for a validated spec. `default_interval` (the operator's --interval) applies
    when the spec leaves behavior.interval unset."""
    behavior = spec.behavior
    interval = parse_duration(behavior.interval) if "interval" in behavior.model_fields_set else default_interval
    slo_ttft, slo_itl = parse_duration(spec.slo.ttft_p95), parse_duration(spec.slo.itl_mean)
    up, down = behavior.scale_up, behavior.scale_down
    prior, note = _spec_prior(spec.model, slo_ttft, slo_itl)
    ttr_prior = parse_duration(spec.warmup.time_to_ready)
    # unset: a time-to-ready and a rate window, resolved each tick by `decide` from the measured time-to-ready
    window = down.stabilization_window
    down_window = ttr_prior + RATE_WINDOW if window is None else parse_duration(window)
    return Policy(
        min_replicas=spec.replicas.min,
        max_replicas=spec.replicas.max,
        interval=interval,
        tolerance=behavior.tolerance,
        slo_ttft_p95=slo_ttft,
        slo_itl_mean=slo_itl,
        slo_tpot_p95=parse_duration(spec.slo.tpot_p95) if spec.slo.tpot_p95 is not None else None,
        target_kv_cache=spec.targets.kv_cache_utilization,
        target_waiting_per_replica=spec.targets.waiting_per_replica,
        target_capacity_utilization=spec.targets.capacity_utilization,
        scale_up=_rule(parse_duration(up.stabilization_window), up.max_increase, up.period),
        scale_down=_rule(down_window, down.max_decrease, down.period, Release(down.release)),
        down_window_follows_ttr=window is None,
        stale_after=parse_duration(spec.metrics.stale_after),
        time_to_ready_prior=ttr_prior,
        predictive=spec.warmup.predictive,
        schedules=tuple(
            Schedule(cron=s.cron, duration=parse_duration(s.duration), min_replicas=s.min_replicas)
            for s in spec.warmup.schedules
        ),
        capacity_prior_rps=prior,
        capacity_prior_at=TYPICAL_LENGTHS if prior is not None else None,
        capacity_note=note,
    )


def _spec_prior(model: ModelRef, slo_ttft: float, slo_itl: float) -> tuple[float | None, str | None]:
    """The capacity prior of the spec's model, or none yet and why. What the spec leaves unset, the operator
    reads from the target Deployment's args each tick (`with_engine_limits`): a batch limit the spec does not
    give, and the tensor-parallel size where it gives none. Until then vLLM's defaults stand in, and against
    them the spec may not hold (512 tokens against an H100's 1,024 seats; a 70B model on one GPU), which is no
    reason to stop deciding when some value of what the args give would make it hold. Every other refusal is
    the spec's own."""
    try:
        return capacity_prior(model, slo_ttft, slo_itl), None
    except InvalidSpec as refused:
        if model.profile is None:
            raise
        args = _left_to_args(model)
        given = [k for k in _BATCH_LIMITS if k not in args]
        limits: list[dict[str, Any]] = [{}]
        if len(given) == 1:
            limits.append({given[0]: None})  # the other limit comes from the args: the given one alone is fine
        sizes = valid_tp(model_spec(model.profile)) if "tensor_parallel" in args else [model.tensor_parallel]
        awaited: list[str] = []
        for update in ({**u, "tensor_parallel": tp} for u in limits for tp in sizes):
            try:
                _profile(model.model_copy(update=update), model.profile)
            except PerfError:
                continue
            if update["tensor_parallel"] != model.tensor_parallel:
                awaited.append("tensor-parallel size (or set spec.model.tensorParallel)")
            if given and given[0] in update:
                (other,) = set(_BATCH_LIMITS) - set(given)
                field = "maxNumSeqs" if other == "max_num_seqs" else "maxNumBatchedTokens"
                awaited.append(f"{other} (or set spec.model.{field} too)")
            break
        if not awaited:
            raise refused from None
        return None, (
            f"capacity: no prior from the spec alone: {refused.problems[0]}; the prior follows once the target "
            f"Deployment's args give the engine's {' and '.join(awaited)}"
        )


def observed_lengths(obs: Observation) -> tuple[float, float] | None:
    """Mean prompt and output tokens per request, from the engines' token and request rates; rounded
    to two significant digits so the perf model's cache serves a steady workload. The prompt is the part
    the engines compute: its prefix-cache hits, where they count them, are left out."""
    if obs.partial_rates:  # a ratio of sums over different pods is no pod's length
        return None
    return _lengths(obs.request_rate, obs.prompt_token_rate, obs.generation_token_rate, obs.cached_prompt_token_rate)


def reported_lengths(observed: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The lengths of the last observation written to status (`status.observed`): what a restarted
    operator sizes a tick without rates at, before its engines report again. Only a complete one: a
    partial observation's rates may be sums over different pods."""
    if not isinstance(observed, Mapping) or observed.get("metrics") != "Complete":
        return None
    rate, prompt, gen, cached = (
        observed.get(k) for k in ("requestRate", "promptTokenRate", "generationTokenRate", "cachedPromptTokenRate")
    )
    if not (_number(rate) and _number(prompt) and _number(gen)) or not (cached is None or _number(cached)):
        return None  # absent, or a status someone edited by hand
    return _lengths(rate, prompt, gen, cached)


def _number(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _lengths(
    rate: float | None, prompt: float | None, gen: float | None, cached: float | None = None
) -> tuple[float, float] | None:
    if not rate or rate <= 0 or prompt is None or gen is None or prompt <= 0 or gen <= 0:
        return None
    computed = prompt - min(max(cached, 0.0), prompt) if cached is not None else prompt
    # Every finished request has a prompt token and a generated one; a ratio below 1 is rate() jitter or
    # aborted requests (or a prompt all cached but its last token, which the engine computes), and the perf
    # model refuses a length below 1.
    return max(float(f"{computed / rate:.2g}"), 1.0), max(float(f"{gen / rate:.2g}"), 1.0)


def noting_a_missing_prior(policy: Policy, model: ModelRef) -> Policy:
    """The policy with a note on why the capacity prior is missing when the spec named a profile: the
    perf model finds no load at which one replica meets the SLO. Without it the capacity signal would
    vanish from the decision unexplained."""
    if model.profile is None or policy.capacity_prior_rps is not None or policy.capacity_note is not None:
        return policy
    return replace(policy, capacity_note=_no_prior_note(policy, model, ""))


def _no_prior_note(policy: Policy, model: ModelRef, lengths: str) -> str:
    slo = " and ".join(
        f"{name} {format_duration(value)}"
        for name, value in (("TTFT P95", policy.slo_ttft_p95), ("mean ITL", policy.slo_itl_mean))
        if value is not None
    )
    return (
        f"capacity: no prior, as one {model.profile} replica on {model.gpu} (TP {model.tensor_parallel}) cannot "
        f"meet {slo}{lengths} at any load per the perf model; the capacity signal waits for a capacity learned "
        "while the SLO holds"
    )


def with_observed_prior(
    policy: Policy, model: ModelRef, obs: Observation, before: tuple[float, float] | None = None
) -> Policy:
    """The policy with the profile's capacity at the request lengths this service actually sees
    (not the typical ones) when the engines report them, else at the lengths they reported `before` (the
    caller's last `observed_lengths`); unchanged without either. The operator and the simulator both call
    this, so they size replicas alike. Without `before`, a tick whose rates are missing while the gauges
    answer (the first scrape after Prometheus restarts) sized at the typical 1000/200 tokens: 8x too few
    requests per replica for 120-token prompts, and the fleet doubled for a scale-down window."""
    lengths = observed_lengths(obs) or before
    if lengths is None or model.profile is None:
        return policy
    try:
        fitted = capacity_prior(model, policy.slo_ttft_p95 or 0.5, policy.slo_itl_mean or 0.05, *lengths)
    except InvalidSpec:
        # The spec's own profile was validated with the typical lengths; lengths the engines report that
        # the model cannot take leave the spec's prior in place rather than stopping this service's tick.
        return policy
    if fitted is None:
        # The prior at the typical lengths would size these requests as if they were short: unknown, not
        # that (30,000-token prompts read 36 req/s per replica where 16,000-token ones read 2).
        at = f" at the {lengths[0]:,.0f}-token prompts and {lengths[1]:,.0f}-token outputs the engines report"
        return replace(
            policy, capacity_prior_rps=None, capacity_prior_at=None, capacity_note=_no_prior_note(policy, model, at)
        )
    return replace(policy, capacity_prior_rps=fitted, capacity_prior_at=lengths)
