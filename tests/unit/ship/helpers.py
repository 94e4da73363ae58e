"""Shared by the shipping tests: paths, the deploy generator, helm invocation, the tools they run."""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

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


def tool(name: str, installed_by: str) -> str:
    """A binary the project installs (`installed_by` says how): PATH, the venv, or the e2e tool cache. Skipped
    when missing, except under `make test` (INFERSCALE_REQUIRE_TOOLS): there a missing tool fails, so that
    CI never passes a check it did not run."""
    candidates = [shutil.which(name), str(ROOT / ".venv" / "bin" / name)]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.cache/inferscale-e2e/*/bin/{name}")))
    found = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
    if found is not None:
        return found
    message = f"{name} not found (PATH, .venv/bin, ~/.cache/inferscale-e2e/*/bin): {installed_by} installs it"
    if os.environ.get("INFERSCALE_REQUIRE_TOOLS", "") not in ("", "0"):
        pytest.fail(message)
    pytest.skip(message)


def run_helm(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm, *args], capture_output=True, text=True, check=False)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]
