"""Where the shared production traces live: beside the repository (`../shared/traces`), as on every
development and CI machine, unless INFERSCALE_TRACES names another folder."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("INFERSCALE_TRACES", str(REPO.parent / "shared" / "traces")))
