"""Render the InferenceService CRD from the pydantic models: a structural apiextensions.k8s.io/v1 schema.

Pydantic emits JSON Schema (draft 2020-12: `$ref`, `anyOf` with null, `additionalProperties`); the API
server wants a structural OpenAPI v3 subset. The translation is mechanical and fails loudly on any
construct it does not know, so a new model field cannot silently produce a non-structural CRD.
"""

from __future__ import annotations

from typing import Any

import yaml

from inferscale.api.fields import DEFAULT_KEY, KIND_KEY
from inferscale.api.models import (
    CATEGORIES,
    GROUP,
    KIND,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
)
from inferscale.api.rules import MANAGED_NAME
from inferscale.api.spec import InferenceServiceSpec
from inferscale.api.status import InferenceServiceStatus

_KEPT = {
    "type",
    "description",
    "required",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "pattern",
    "x-kubernetes-validations",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
}
_DROPPED = {"title", "default", KIND_KEY, DEFAULT_KEY}

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Model", "type": "string", "jsonPath": ".spec.model.name"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".status.replicas"},
    {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas"},
    {"name": "TTFT-P95", "type": "string", "jsonPath": ".status.observed.ttftP95"},
    {"name": "KV%", "type": "integer", "jsonPath": ".status.observed.kvCachePercent"},
    {"name": "Waiting", "type": "number", "jsonPath": ".status.observed.waiting"},
    {"name": "SLO", "type": "string", "jsonPath": '.status.conditions[?(@.type=="SLOMet")].status'},
    {"name": "Reason", "type": "string", "jsonPath": ".status.decision.reason", "priority": 1},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class SchemaError(ValueError):
    """The models produced JSON Schema that has no structural CRD equivalent."""


def _default_text(value: Any) -> str | None:
    if value is None or value == {} or value == []:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _Translator:
    def __init__(self, defs: dict[str, Any], nullable: bool) -> None:
        self.defs = defs
        # Spec: the server prunes nulls, so an explicit null equals "absent", as in Python (None == unset).
        # Status: nullable, so "unknown" written as null inside a list item (recommendations[].value) is kept.
        self.nullable = nullable

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        schema = dict(schema)
        if "$ref" in schema:
            target = self.defs[schema.pop("$ref").removeprefix("#/$defs/")]
            schema = {**target, **schema}
        return schema

    def node(self, schema: dict[str, Any], path: str) -> dict[str, Any]:
        schema = self._resolve(schema)
        is_nullable = False
        if {"type": "null"} in schema.get("anyOf", []):
            options = [o for o in schema.pop("anyOf") if o != {"type": "null"}]
            if len(options) != 1:
                raise SchemaError(f"{path}: a union of several non-null types has no structural form")
            is_nullable = True
            # The field's own keys (description, default) win over the referenced model's.
            schema = {**self._resolve(options[0]), **schema}
        if "const" in schema:
            schema["enum"] = [schema.pop("const")]
        out: dict[str, Any] = {}
        default = schema.get(DEFAULT_KEY) or _default_text(schema.get("default"))
        for key, value in schema.items():
            if key in _DROPPED:
                continue
            if key == "properties":
                out["properties"] = {name: self.node(sub, f"{path}.{name}") for name, sub in value.items()}
            elif key == "items":
                out["items"] = self.node(value, f"{path}[]")
            elif key == "additionalProperties":
                if value is True:
                    out["x-kubernetes-preserve-unknown-fields"] = True
                elif isinstance(value, dict):
                    out["additionalProperties"] = self.node(value, f"{path}.*")
            elif key == "anyOf" and schema.get("x-kubernetes-int-or-string"):
                out["anyOf"] = value  # the canonical structural form of int-or-string, as controller-gen writes it
            elif key in _KEPT:
                out[key] = value
            else:
                raise SchemaError(f"{path}: JSON Schema keyword {key!r} has no CRD translation")
        if "type" not in out and "x-kubernetes-int-or-string" not in out:
            out["type"] = "object"
        if default is not None:
            out["description"] = f"{out.get('description', '').rstrip()} Default: {default}.".lstrip()
        if is_nullable and self.nullable:
            out["nullable"] = True
            # A null fails an enum check, and one bad field rejects the whole status patch; the values are in
            # the description and the Python model still enforces them.
            out.pop("enum", None)
        return _ordered(out)


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    # A stable, readable key order: description and type first, nested structure last.
    first = ["description", "type", "nullable"]
    last = ["anyOf", "properties", "additionalProperties", "items", "required", "x-kubernetes-validations"]
    middle = sorted(k for k in node if k not in first and k not in last)
    return {k: node[k] for k in [*first, *middle, *last] if k in node}


def _schema_of(model: type[InferenceServiceSpec] | type[InferenceServiceStatus], nullable: bool) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return _Translator(defs, nullable).node(raw, model.__name__)


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition as a dict (deterministic)."""
    schema = {
        "description": "An LLM inference server scaled by its latency SLOs (TTFT, ITL) and saturation signals.",
        "type": "object",
        "properties": {
            "apiVersion": {"description": "API version: inferscale.dev/v1alpha1.", "type": "string"},
            "kind": {"description": "InferenceService.", "type": "string"},
            "metadata": {"type": "object"},
            "spec": _schema_of(InferenceServiceSpec, nullable=False),
            "status": _schema_of(InferenceServiceStatus, nullable=True),
        },
        "required": ["spec"],
        "x-kubernetes-validations": [MANAGED_NAME.schema()],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
                "categories": list(CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    # Status only: the InferenceService is not itself scaled, its target is.
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def crd_yaml() -> str:
    """The CRD as the YAML committed under crds/ (regenerate with `inferscale crd > crds/...`)."""
    header = "# Generated by `inferscale crd` from operator/inferscale/api. Do not edit.\n"
    return header + yaml.safe_dump(crd(), sort_keys=False, width=120, allow_unicode=True)
