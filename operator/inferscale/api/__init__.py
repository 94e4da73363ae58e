"""The InferenceService API: pydantic models (the CRD's source of truth), CRD and docs rendering, conversion."""

from inferscale.api.convert import capacity_prior, policy_from_spec
from inferscale.api.models import (
    API_VERSION,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    InferenceService,
    InvalidSpec,
    parse_spec,
)
from inferscale.api.spec import InferenceServiceSpec
from inferscale.api.status import CONDITION_TYPES, HISTORY_LIMIT, InferenceServiceStatus

__all__ = [
    "API_VERSION",
    "CONDITION_TYPES",
    "GROUP",
    "HISTORY_LIMIT",
    "KIND",
    "PLURAL",
    "VERSION",
    "InferenceService",
    "InferenceServiceSpec",
    "InferenceServiceStatus",
    "InvalidSpec",
    "capacity_prior",
    "parse_spec",
    "policy_from_spec",
]
