"""Output the command cannot write: one line on stderr, never a traceback."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize(
    "args",
    [
        ["crd"],
        ["plan", "--model", "llama-3.1-8b", "--gpu", "h100", "--json"],
        ["plan", "--model", "llama-3.1-8b", "--gpu", "h100"],
    ],
)
def test_a_reader_that_left_ends_the_command_quietly(args: list[str]) -> None:
    # a pipe whose read end is closed before the command writes: as `inferscale crd | head -0`, without the race
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [str(INFERSCALE), *args], stdout=write_end, stderr=subprocess.PIPE, text=True, check=False
        )
    finally:
        os.close(write_end)
    assert done.returncode == 1
    assert done.stderr == ""
