"""`inferscale run` refuses bad arguments with one line and exit code 2, before starting anything."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from inferscale.cli import app


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prometheus-timeout", "0s"], "--prometheus-timeout must be positive"),
        (["--prometheus-timeout", "soon"], "--prometheus-timeout:"),
        (["--interval", "-5s"], "--interval"),
        (["--metrics-port", "70000"], "is not a TCP port"),
    ],
)
def test_a_bad_argument_exits_2_with_its_name(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", "-n", "llm", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
