from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferscale.cli import app

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.fixture
def azure_trace(tmp_path: Path) -> Path:
    """Ten minutes of 2 requests/s."""
    lines = [AZURE_HEADER]
    for i in range(1200):
        m, s = divmod(i * 0.5, 60)
        lines.append(f"2023-11-16 18:{10 + int(m):02d}:{s:09.6f},{300 + 7 * (i % 50)},{20 + i % 40}\n")
    path = tmp_path / "azure.csv"
    path.write_text("".join(lines))
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["simulate", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_has_the_scenario_and_every_requested_policy(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    png = tmp_path / "r.png"
    code, stdout, _ = invoke(
        "--trace", str(azure_trace), "--policy", "static-peak", "--policy", "oracle", "--time-to-ready", "60s",
        "--json", str(out), "--plot", str(png), "--workers", "1",
    )  # fmt: skip
    assert code == 0, stdout
    doc = json.loads(out.read_text())
    assert doc["scenario"]["requests"] == 1200 and doc["scenario"]["time_to_ready"] == "60s"
    assert list(doc["policies"]) == ["static-peak", "oracle"]
    keys = {"slo_attainment", "gpu_hours", "ttft_p95_s", "ttft_p99_s", "itl_mean_s", "scale_actions", "requests"}
    for scores in doc["policies"].values():
        assert keys <= set(scores)
        assert scores["requests"] == 1200 and 0.0 <= scores["slo_attainment"] <= 1.0 and scores["gpu_hours"] > 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "static-peak" in stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "magic"], "unknown policy magic"),
        (["--model", "gpt-17"], "gpt-17"),
        (["--gpu", "tpu-v9"], "tpu-v9"),
        (["--duration", "soon"], "--duration"),
        (["--slo-ttft", "-1s"], "--slo-ttft"),
        (["--slo-tpot-p95", "0s"], "--slo-tpot-p95"),
        (["--time-to-ready", "4m-2m"], "--time-to-ready"),
        (["--rate-scale", "0"], "--rate-scale"),
        (["--format", "parquet"], "--format"),
        (["--mode", "fast"], "--mode"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(azure_trace: Path, args: list[str], message: str) -> None:
    code, _, stderr = invoke("--trace", str(azure_trace), *args)
    assert code == 2
    assert message in stderr and "Traceback" not in stderr


def test_unparsable_or_missing_trace_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("hello,world\n1,2\n")
    code, _, stderr = invoke("--trace", str(bad))
    assert code == 2 and "bad.csv" in stderr and "Traceback" not in stderr
    code, _, stderr = invoke("--trace", str(tmp_path / "nope.csv"))
    assert code == 2 and "no such file" in stderr


def test_fluid_mode_replays_the_rate_curve_with_the_same_json(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    code, stdout, _ = invoke(
        "--trace", str(azure_trace), "--mode", "fluid", "--policy", "static-peak", "--json", str(out), "--workers", "1"
    )  # fmt: skip
    assert code == 0, stdout
    doc = json.loads(out.read_text())
    assert doc["scenario"]["mode"] == "fluid"
    assert doc["scenario"]["requests"] == pytest.approx(1200, rel=0.01)
    assert doc["policies"]["static-peak"]["gpu_hours"] > 0


def test_the_per_request_tpot_slo_reaches_inferscales_spec(azure_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code, stdout, _ = invoke(
        "--trace", str(azure_trace), "--policy", "inferscale", "--time-to-ready", "60s",
        "--slo-tpot-p95", "40ms", "--json", str(out), "--workers", "1",
    )  # fmt: skip
    assert code == 0, stdout
    assert json.loads(out.read_text())["scenario"]["slo_tpot_p95_s"] == pytest.approx(0.04)
