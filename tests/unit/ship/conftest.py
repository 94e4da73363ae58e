from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from tests.unit.ship.helpers import CHART, KUBE_VERSION, run_helm, tool

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> str:
    return os.environ.get("HELM") or tool("helm", "make tools")


@pytest.fixture(scope="session")
def render(helm: str) -> Render:
    """`helm template` with values given as keyword arguments (`a__b=1` sets a.b), parsed into documents."""

    def _render(**values: Any) -> list[dict[str, Any]]:
        sets = [a for k, v in values.items() for a in ("--set-json", f"{k.replace('__', '.')}={json.dumps(v)}")]
        args = ["template", "inferscale", str(CHART), "--namespace", "inferscale", "--kube-version", KUBE_VERSION]
        result = run_helm(helm, *args, *sets)
        assert result.returncode == 0, result.stderr
        return [d for d in yaml.safe_load_all(result.stdout) if d]

    return _render
