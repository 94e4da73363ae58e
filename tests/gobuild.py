"""Builds a small Go program of the repository (the offline API-server and Pod Security checkers) for a test.

Go is a requirement of the project (the local control plane is built with it), so a build failure
is a test failure, not a skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def build_go_tool(source: Path, out_dir: Path) -> Path:
    go = shutil.which("go")
    assert go is not None, "go is not on PATH: the project needs Go >= 1.26 (see README)"
    binary = out_dir / source.name
    build = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=source,
        capture_output=True,
        text=True,
        env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
        timeout=900,
        check=False,
    )
    assert build.returncode == 0, f"{source} does not build: {build.stderr[-2000:]}"
    return binary
