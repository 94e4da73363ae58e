"""Output the command cannot write: one line on stderr, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

INFERSCALE = Path(sys.executable).parent / "inferscale"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("args", [["crd"], ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--json"]])
def test_a_full_disk_under_stdout_is_one_line_not_a_traceback(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([str(INFERSCALE), *args], stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert done.returncode == 1
    assert done.stderr == "inferscale: cannot write the output: No space left on device\n"
