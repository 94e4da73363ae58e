"""Shared by the shipping tests: paths, the deploy generator, helm invocation."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "inferscale"
KUBE_VERSION = "1.36.0"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_generate", ROOT / "deploy" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generator = _load_generator()


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]
