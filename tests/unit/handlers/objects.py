"""An InferenceService as the API server holds it, and the merge patch it applies to its status."""

from __future__ import annotations

from typing import Any


def svc(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "inferscale.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {
            "name": "llm",
            "namespace": "ns",
            "uid": "u1",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": status or {},
    }


def merged(old: Any, patch: Any) -> Any:
    """RFC 7386 merge patch, as the API server applies the status patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(old) if isinstance(old, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merged(out.get(k), v)
    return out
