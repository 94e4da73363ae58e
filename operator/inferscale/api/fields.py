"""Field types shared by the spec models: each carries its Python check and its CRD schema together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, WithJsonSchema
from pydantic.alias_generators import to_camel

from inferscale.api.rules import (
    CHANGE_LIMIT,
    DURATION,
    DURATION_MAX_LENGTH,
    FRACTION,
    OPEN_FRACTION,
    POSITIVE,
    POSITIVE_DURATION,
    TIME_TO_READY,
    Rule,
    check_change_limit,
    check_duration,
    check_positive_duration,
    check_time_to_ready,
)

# Marks a schema node for docs.py (rendered as type "duration"); crd.py drops keys starting with "x-inferscale".
KIND_KEY = "x-inferscale-kind"
# What an unset field means, for the docs and the CRD's description, where it is not the Python default.
DEFAULT_KEY = "x-inferscale-default"

# Strict: the API server would reject "0.5" for a number or "true" for a boolean, so Python does too.
SPEC_CONFIG = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True)
STATUS_CONFIG = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


def _bounded(rule: Rule, test: Callable[[float], bool]) -> Callable[[float], float]:
    def check(value: float) -> float:
        if not test(value):
            raise ValueError(f"{value!r} {rule.message}")
        return value

    return check


Duration = Annotated[
    str,
    AfterValidator(check_duration),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": DURATION_MAX_LENGTH,
            "x-kubernetes-validations": [DURATION.schema()],
            KIND_KEY: "duration",
        }
    ),
]
TimeToReady = Annotated[
    str,
    AfterValidator(check_time_to_ready),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": DURATION_MAX_LENGTH,
            "x-kubernetes-validations": [DURATION.schema(), TIME_TO_READY.schema()],
            KIND_KEY: "duration",
        }
    ),
]
PositiveDuration = Annotated[
    str,
    AfterValidator(check_positive_duration),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": DURATION_MAX_LENGTH,
            "x-kubernetes-validations": [POSITIVE_DURATION.schema()],
            KIND_KEY: "duration",
        }
    ),
]
Fraction = Annotated[
    float,
    AfterValidator(_bounded(FRACTION, lambda v: 0.0 < v <= 1.0)),
    WithJsonSchema({"type": "number", "x-kubernetes-validations": [FRACTION.schema()]}),
]
OpenFraction = Annotated[
    float,
    AfterValidator(_bounded(OPEN_FRACTION, lambda v: 0.0 < v < 1.0)),
    WithJsonSchema({"type": "number", "x-kubernetes-validations": [OPEN_FRACTION.schema()]}),
]
PositiveNumber = Annotated[
    float,
    AfterValidator(_bounded(POSITIVE, lambda v: v > 0.0)),
    WithJsonSchema({"type": "number", "x-kubernetes-validations": [POSITIVE.schema()]}),
]
ChangeLimit = Annotated[
    int | str,
    BeforeValidator(check_change_limit),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "x-kubernetes-validations": [CHANGE_LIMIT.schema()],
            KIND_KEY: "int-or-percent",
        }
    ),
]


def one_of(*values: str) -> Callable[[Any], Any]:
    """The API server's own wording for an enum miss, so Python and kubectl say the same thing."""
    supported = ", ".join(f'"{v}"' for v in values)

    def check(value: Any) -> Any:
        if value not in values:
            raise ValueError(f"unsupported value {value!r}: supported values: {supported}")
        return value

    return check


Engine = Annotated[Literal["vllm", "sglang"], BeforeValidator(one_of("vllm", "sglang"))]
Mode = Annotated[Literal["Active", "Advisory"], BeforeValidator(one_of("Active", "Advisory"))]
Release = Annotated[Literal["Linear", "Hold"], BeforeValidator(one_of("Linear", "Hold"))]
