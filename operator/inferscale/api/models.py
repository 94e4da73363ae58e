"""The InferenceService resource and the one way to read a spec from an untrusted body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferscale.api.spec import InferenceServiceSpec
from inferscale.api.status import InferenceServiceStatus

GROUP = "inferscale.dev"
VERSION = "v1alpha1"
KIND: Final = "InferenceService"
PLURAL = "inferenceservices"
SINGULAR = "inferenceservice"
SHORT_NAMES = ("infsvc",)  # KServe owns "isvc"
CATEGORIES = ("inferscale", "all")
API_VERSION: Final = "inferscale.dev/v1alpha1"


class InferenceService(BaseModel):
    """An SLO-scaled LLM inference server."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    api_version: Literal["inferscale.dev/v1alpha1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["InferenceService"] = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: InferenceServiceSpec
    status: InferenceServiceStatus | None = None


class InvalidSpec(ValueError):
    """A spec the API server would have rejected; `problems` are "path: message" lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("invalid InferenceService spec: " + "; ".join(problems))


def _plain(value: Any) -> Any:
    # kopf hands out Mapping views; strict models accept plain dicts only.
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def problems_of(error: ValidationError, prefix: str = "") -> list[str]:
    """`spec.replicas: replicas.min must be ...` lines, in the API server's style, without pydantic noise."""
    lines = []
    for item in error.errors(include_url=False):
        path = ".".join(str(p) for p in (prefix, *item["loc"]) if p != "")
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {message}" if path else message)
    return lines


def parse_spec(spec: Mapping[str, Any]) -> InferenceServiceSpec:
    """Validate a spec as the CRD would; raises InvalidSpec listing every problem."""
    try:
        return InferenceServiceSpec.model_validate(_plain(spec))
    except ValidationError as e:
        raise InvalidSpec(problems_of(e, "spec")) from None
