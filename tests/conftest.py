"""Session-wide: the header says where the e2e tests run, or that they were skipped on request; no
Hypothesis deadlines; the shared traces, which `make test` requires."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.e2e.cluster import E2E_DIR
from tests.paths import TRACES

# Hypothesis fails an example slower than 200 ms: a timing target in a unit test, which a loaded CI
# machine breaks. Speed is the benchmarks' business. The examples that failed once are kept with the other
# caches, not in the checkout, and replayed first.
set_hypothesis_home_dir(os.path.expanduser("~/.cache/inferscale/hypothesis"))
settings.register_profile("inferscale", deadline=None)
settings.load_profile("inferscale")


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get("INFERSCALE_SKIP_E2E", "") not in ("", "0"):
        return "e2e: SKIPPED (INFERSCALE_SKIP_E2E is set)"
    kc = os.environ.get("KUBECONFIG")
    if kc and os.path.abspath(kc) != str(E2E_DIR / "kubeconfig"):
        return f"e2e: against the cluster in KUBECONFIG={kc}"
    return "e2e: against the local stack (e2e/cluster.sh up; reused if running)"


@pytest.fixture
def shared_traces() -> Path:
    """The shared production traces' folder. Skipped when it is missing, except under `make test`
    (INFERSCALE_REQUIRE_TOOLS), where it fails as a missing tool does: CI never passes a check it did not run."""
    if not TRACES.is_dir():
        message = f"shared traces not present at {TRACES} (../shared/traces, or INFERSCALE_TRACES)"
        if os.environ.get("INFERSCALE_REQUIRE_TOOLS", "") not in ("", "0"):
            pytest.fail(message)
        pytest.skip(message)
    return TRACES
