from __future__ import annotations

import copy
from typing import Any

import pytest


@pytest.fixture
def minimal_spec() -> dict[str, Any]:
    return {
        "model": {"name": "meta-llama/Llama-3.1-8B-Instruct"},
        "scaleTargetRef": {"name": "llama-8b"},
        "replicas": {"max": 16},
    }


@pytest.fixture
def full_spec() -> dict[str, Any]:
    """DESIGN §3's example, every field written out."""
    return copy.deepcopy(
        {
            "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "profile": "llama-3.1-8b"},
            "engine": "vllm",
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama-8b"},
            "replicas": {"min": 1, "max": 16},
            "slo": {"ttftP95": "500ms", "itlMean": "50ms"},
            "targets": {"kvCacheUtilization": 0.8, "waitingPerReplica": 4},
            "behavior": {
                "interval": "10s",
                "tolerance": 0.1,
                "scaleUp": {"stabilizationWindow": "0s", "maxIncrease": "100%"},
                "scaleDown": {"stabilizationWindow": "300s", "maxDecrease": "50%"},
            },
            "warmup": {
                "timeToReady": "180s",
                "predictive": True,
                "schedules": [{"cron": "0 9 * * 1-5", "duration": "9h", "minReplicas": 4}],
            },
            "metrics": {"selector": {}, "staleAfter": "60s"},
            "mode": "Active",
        }
    )
