from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from tests.unit.ship.helpers import CHART, KUBE_VERSION, generator, run_helm

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm() -> str:
    path = generator.find_helm()
    if path is None:
        print("helm binary not found (PATH, $HELM, ~/.cache/inferscale-e2e/*/bin/helm): chart tests skipped")
        pytest.skip("helm binary not found; the integrator's CI provides it")
    return str(path)


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
