"""`inferscale emulate`'s input checks, which run before it touches the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferscale.cli import app

runner = CliRunner()
AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "azure.csv"
    p.write_text(AZURE)
    return p


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["emulate", "--deployment", "llm", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--duration", "soon"], "invalid duration 'soon'"),
        (["--model", "gpt-9"], "unknown model 'gpt-9'"),
        (["--format", "mooncake"], "azure.csv"),
        (["--max-num-batched-tokens", "512"], "max_num_batched_tokens (512) must be >= max_num_seqs (1024)"),
        (["--max-num-seqs", "9000"], "max_num_batched_tokens (8192) must be >= max_num_seqs (9000)"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(trace: Path, extra: list[str], message: str) -> None:
    code, err = run("--trace", str(trace), *extra)
    assert code == 2 and message in err and err.startswith("inferscale emulate: ")


def test_the_format_ignores_case_like_simulate(trace: Path, tmp_path: Path) -> None:
    # the trace loads, so the next check to fail is the cluster's credentials
    code, err = run("--trace", str(trace), "--format", "AZURE", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and "cannot load Kubernetes credentials" in err
