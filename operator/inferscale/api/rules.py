"""Validation rules stated once: the CEL the API server runs and the message both it and Python report.

The CRD carries each rule as an `x-kubernetes-validations` entry; the pydantic models raise
`ValueError(rule.message)` for the same condition, so a spec that slipped past an older CRD is
rejected by the operator with the words the API server would have used.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic.config import JsonDict

from inferscale.perf.catalog import gpu_names, known_gpus, known_models, model_names, model_spec
from inferscale.perf.memory import valid_tp
from inferscale.scaling.durations import DURATION_PATTERN, parse_duration
from inferscale.scaling.schedule import cron_problem

# Longest accepted duration string; bounds the CEL cost estimate of `matches`.
DURATION_MAX_LENGTH = 32
CRON_MAX_LENGTH = 128


def _cron_field(value: str, low: str | None = None, any_day: bool = False) -> str:
    """One cron field: a list of * (or ?, where `any_day`) or a value or range of values in the field's
    range, each with a step; `low` is a range's lowest end where it is not a value (croniter reads day 15-0
    as 15-31). An item with a letter or # (jan, mon-fri, L, 15W, 1#2, R for random) is left to croniter: the
    pattern refuses out-of-range numbers at `kubectl apply`, never an expression croniter reads (but day or
    month 0-0, which croniter takes for a range)."""
    end = f"{value}|{low}" if low else value
    wildcard = r"\*|\?" if any_day else r"\*"
    number = rf"({wildcard}|0*({value})(-0*({end}))?)(/0*[1-9][0-9]*)?"
    word = r"[0-9A-Za-z?*/-]*[A-Za-z#][0-9A-Za-z#?*/-]*"
    item = rf"({number}|{word})"
    return rf"{item}(,{item})*"


# Five cron fields, each within its range, or one of the standard macros. croniter also checks them in
# Python, and whether the expression ever matches (February 30th passes the pattern).
CRON_PATTERN = (
    r"^(@(yearly|annually|monthly|weekly|daily|hourly)|"
    + " +".join(
        (
            _cron_field("[1-5]?[0-9]"),
            _cron_field("1?[0-9]|2[0-3]"),
            _cron_field("[1-9]|[12][0-9]|3[01]", low="0", any_day=True),
            _cron_field("[1-9]|1[0-2]", low="0"),
            _cron_field("[0-7]", any_day=True),
        )
    )
    + ")$"
)
# up to 999999%: a longer one (a percent of 310 digits) is infinite as a float, which no limit can be
PERCENT_PATTERN = r"^[1-9][0-9]{0,5}%$"
LABEL_NAME_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]*$"


@dataclass(frozen=True)
class Rule:
    cel: str
    message: str

    def schema(self) -> JsonDict:
        return {"rule": self.cel, "message": self.message}


def _cel_string(pattern: str) -> str:
    """A CEL single-quoted literal for a regex (CEL rejects unknown escapes such as `\\d`)."""
    return "'" + pattern.replace("\\", "\\\\").replace("'", "\\'") + "'"


# Go's time.Duration, which CEL's duration() is: int64 nanoseconds. A longer duration fails CEL's conversion, so
# Python refuses it too; the `>=` makes the API server convert (and so bound) every duration, not only positive ones.
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
NANOSECOND = 1e-9
DURATION = Rule(
    f"self.matches({_cel_string(DURATION_PATTERN)}) && duration(self) >= duration('0s')",
    "must be a duration: a number with a unit ms, s, m or h, such as 500ms, 30s, 5m or 1h30m",
)
TOO_LONG = "must be a duration shorter than about 2562047h (Kubernetes durations are int64 nanoseconds)"


class DurationTooLong(ValueError):
    """Kept apart from the other duration errors: its message is not the positive-duration one."""


# The left side guards the right: a string that is not a duration never reaches duration(), whose parse
# error would otherwise replace this message. Go's duration syntax accepts everything the pattern does.
POSITIVE_DURATION = Rule(
    f"self.matches({_cel_string(DURATION_PATTERN)}) && duration(self) > duration('0s')",
    "must be a positive duration: a number with a unit ms, s, m or h, such as 500ms, 30s, 5m or 1h30m",
)
# The operator measures no start above an hour (scaling.state.MAX_TIME_TO_READY): a prior above it (a typo of 180m
# for 180s) led every forecast and schedule floor by hours until a start was measured.
MAX_TIME_TO_READY = "1h"
TIME_TO_READY = Rule(
    f"self.matches({_cel_string(DURATION_PATTERN)}) && duration(self) <= duration('{MAX_TIME_TO_READY}')",
    f"must be a duration of at most {MAX_TIME_TO_READY}, such as 180s or 5m: no model load takes an hour, and the "
    "operator measures none above it",
)
FRACTION = Rule("self > 0.0 && self <= 1.0", "must be a fraction in (0, 1]")
OPEN_FRACTION = Rule("self > 0.0 && self < 1.0", "must be a fraction in (0, 1)")
POSITIVE = Rule("self > 0.0", "must be greater than 0")
CHANGE_LIMIT = Rule(
    f"type(self) == int ? self >= 1 : self.matches({_cel_string(PERCENT_PATTERN)})",
    "must be a positive number of pods such as 4 or a percentage up to 999999% such as '100%'",
)
REPLICA_BOUNDS = Rule(
    "!has(self.min) || self.min <= self.max", "replicas.min must be less than or equal to replicas.max"
)
ONE_TARGET = Rule(
    "has(self.scaleTargetRef) != has(self.template)",
    "exactly one of scaleTargetRef (scale an existing Deployment) or template (the operator creates it) must be set",
)
# On the object, not the spec: the name is the value of the label that selects a managed Deployment's pods.
MANAGED_NAME = Rule(
    "!has(self.spec.template) || size(self.metadata.name) <= 63",
    "an InferenceService with spec.template must have a name of at most 63 characters: it is the value of the "
    "label inferscale.dev/inferenceservice on the pods of the Deployment it creates",
)
SCHEDULE_WITHIN_MAX = Rule(
    "!has(self.warmup) || !has(self.warmup.schedules) || "
    "self.warmup.schedules.all(s, s.minReplicas <= self.replicas.max)",
    "warmup.schedules[].minReplicas must not exceed replicas.max",
)
# SGLang has no per-request TPOT histogram (its time_per_output_token is a per-chunk running mean).
TPOT_NEEDS_VLLM = Rule(
    "!(has(self.engine) && self.engine == 'sglang' && has(self.slo) && has(self.slo.tpotP95))",
    "slo.tpotP95 reads vLLM's per-request histogram vllm:request_time_per_output_token_seconds, which SGLang "
    "does not export: unset slo.tpotP95 for engine sglang",
)
CRON = Rule(
    f"self.matches({_cel_string(CRON_PATTERN)})",
    "must be a cron expression with five fields within their ranges (minute 0-59, hour 0-23, day 1-31, "
    "month 1-12, weekday 0-7) such as '0 9 * * 1-5', or a macro such as @daily",
)
# croniter's R (a random time, drawn again at each reading) and H (hashed from an id this API has no field for):
# a floor must start when it was announced to, and replicas ordered a time-to-ready ahead of it be on time
CRON_CHANCE_PATTERN = r"(^|[ ,])[RrHh]($|[ ,(/])"
CRON_FIXED = Rule(
    f"!self.matches({_cel_string(CRON_CHANCE_PATTERN)})",
    "must name fixed times: croniter's random (R) and hashed (H) items are not supported",
)


def _in(names: list[str], subject: str = "self") -> str:
    return f"{subject}.trim().lowerAscii() in [" + ", ".join(_cel_string(n) for n in names) + "]"


# The catalog takes a name in any case, trimmed, and its aliases (a Hugging Face id, a short GPU name). Refused by
# the operator alone, a typo froze the service (InvalidSpec) after `kubectl apply` said it was configured.
PROFILE = Rule(
    _in(model_names()),
    f"must be a model of inferscale's catalog: {', '.join(known_models())} (or its Hugging Face name)",
)
GPU = Rule(_in(gpu_names()), f"must be a GPU of inferscale's catalog: {', '.join(known_gpus())} (or a100, h100, ...)")
BATCH_LIMITS = Rule(
    "!has(self.maxNumSeqs) || !has(self.maxNumBatchedTokens) || self.maxNumBatchedTokens >= self.maxNumSeqs",
    "model.maxNumBatchedTokens must be at least model.maxNumSeqs (vLLM refuses a token budget under one token per "
    "sequence)",
)


def _or_list(sizes: tuple[int, ...]) -> str:
    head, last = sizes[:-1], sizes[-1]
    return f"{', '.join(map(str, head))} or {last}" if head else str(last)


def _by_tp(names: list[str]) -> dict[tuple[int, ...], list[str]]:
    """Catalog names grouped by the tensor-parallel sizes their model allows."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for name in names:
        groups.setdefault(tuple(valid_tp(model_spec(name))), []).append(name)
    return groups


def _tensor_parallel() -> Rule:
    """The sizes `perf.memory.valid_tp` allows for each catalog model, by every name the catalog takes for it.
    An unknown profile is left to PROFILE, so that it gets one message, not two."""
    allowed = " || ".join(
        f"({_in(names, 'self.profile')} && self.tensorParallel in [{', '.join(map(str, sizes))}])"
        for sizes, names in _by_tp(model_names()).items()
    )
    cel = f"!has(self.profile) || !has(self.tensorParallel) || !({_in(model_names(), 'self.profile')}) || {allowed}"
    listed = "; ".join(f"{_or_list(sizes)} for {', '.join(models)}" for sizes, models in _by_tp(known_models()).items())
    return Rule(cel, f"model.tensorParallel must split the profile's KV and attention heads evenly: {listed}")


# vLLM refuses a size that splits a head across GPUs, and so does the perf model the capacity prior comes from.
TENSOR_PARALLEL = _tensor_parallel()
CATALOG_NAME_MAX_LENGTH = 253  # bounds the CEL cost of trim() and lowerAscii()


def check_catalog_name(rule: Rule, names: list[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value.strip().lower() not in names:
            raise ValueError(f"{value!r} {rule.message}")
        return value

    return check


SELECTOR_KEYS_MESSAGE = "selector keys must be Prometheus label names ([a-zA-Z_][a-zA-Z0-9_]*)"
# The operator sets these matchers itself; Prometheus reserves names starting with "__".
SELECTOR_OWN_KEYS = ("namespace", "model_name")
SELECTOR_RESERVED_MESSAGE = (
    "selector keys must not be namespace or model_name (set from the service's namespace and spec.model.name) "
    "or start with __ (reserved by Prometheus)"
)
SELECTOR_KEYS = Rule(f"self.all(k, k.matches({_cel_string(LABEL_NAME_PATTERN)}))", SELECTOR_KEYS_MESSAGE)
SELECTOR_RESERVED = Rule(
    "self.all(k, !(k in [" + ", ".join(f"'{k}'" for k in SELECTOR_OWN_KEYS) + "]) && !k.startsWith('__'))",
    SELECTOR_RESERVED_MESSAGE,
)


def check_duration(value: str) -> str:
    """Accept exactly what the CRD accepts (no surrounding spaces) and what parse_duration can read."""
    if not isinstance(value, str) or len(value) > DURATION_MAX_LENGTH or not re.fullmatch(DURATION_PATTERN, value):
        raise ValueError(f"{value!r} {DURATION.message}")
    if parse_duration(value) > MAX_DURATION_SECONDS:
        raise DurationTooLong(f"{value!r} {TOO_LONG}")
    return value


def check_time_to_ready(value: str) -> str:
    check_duration(value)
    if parse_duration(value) > parse_duration(MAX_TIME_TO_READY):
        raise ValueError(f"{value!r} {TIME_TO_READY.message}")
    return value


def check_positive_duration(value: str) -> str:
    try:
        check_duration(value)
    except DurationTooLong:
        raise
    except ValueError:
        raise ValueError(f"{value!r} {POSITIVE_DURATION.message}") from None
    # Go keeps whole nanoseconds: "0.0000001ms" is 0 to the API server, so not positive there either
    if parse_duration(value) < NANOSECOND:
        raise ValueError(f"{value!r} {POSITIVE_DURATION.message}")
    return value


def check_change_limit(value: Any) -> int | str:
    """Pods (int >= 1) or a percentage string ('100%'); bool is not a number of pods."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} {CHANGE_LIMIT.message}")
    if isinstance(value, int):
        if value >= 1:
            return value
    elif isinstance(value, str) and re.fullmatch(PERCENT_PATTERN, value):
        return value
    raise ValueError(f"{value!r} {CHANGE_LIMIT.message}")


def check_cron(value: str) -> str:
    """The CRD's shape check, then croniter's field ranges (minute 61 passes the shape, not croniter) and
    whether it ever matches (February 30th passes both)."""
    if len(value) > CRON_MAX_LENGTH or not re.fullmatch(CRON_PATTERN, value):
        raise ValueError(f"{value!r} {CRON.message}")
    if re.search(CRON_CHANCE_PATTERN, value):
        raise ValueError(f"{value!r} {CRON_FIXED.message}")
    problem = cron_problem(value)
    if problem is not None:
        raise ValueError(f"{value!r} is not a usable cron expression: {problem}")
    return value


def check_selector(value: dict[str, str]) -> dict[str, str]:
    bad = sorted(k for k in value if not re.fullmatch(LABEL_NAME_PATTERN, k))
    if bad:
        raise ValueError(f"{SELECTOR_KEYS_MESSAGE}: {', '.join(repr(k) for k in bad)}")
    reserved = sorted(k for k in value if k in SELECTOR_OWN_KEYS or k.startswith("__"))
    if reserved:
        raise ValueError(f"{SELECTOR_RESERVED_MESSAGE}: {', '.join(repr(k) for k in reserved)}")
    return value
