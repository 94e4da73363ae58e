"""Tolerances the model meets against published measurements (the figures are in calibration.py)."""

from inferscale.perf.calibration import (
    CalibrationRow,
    calibration_rows,
    nim_8b_rows,
    nim_70b_rows,
    roofline_rows,
    trtllm_8b_rows,
)


def _worst(rows: list[CalibrationRow]) -> float:
    return max(abs(r.error_percent) for r in rows)


def _concurrency(row: CalibrationRow) -> int:
    return int(row.case.rsplit("c=", 1)[1])


def test_nim_8b_itl_and_throughput_within_11_percent_below_saturation() -> None:
    # NIM's tok/s stops rising past concurrency 100: queueing there is not modelled, those rows are reported only
    rows = [r for r in nim_8b_rows() if ("ITL" in r.case or "tok/s" in r.case) and _concurrency(r) <= 100]
    assert len(rows) == 10 and _worst(rows) <= 11


def test_idle_ttft_within_25_percent_of_the_clients_figure() -> None:
    # the model's is the engine's TTFT; NIM's client also times HTTP, tokenising and the first streamed chunk
    rows = [r for r in nim_8b_rows() + nim_70b_rows() if "TTFT" in r.case]
    assert len(rows) == 2 and _worst(rows) <= 25


def test_nim_70b_fp8_tp2_within_10_percent_below_saturation() -> None:
    assert _worst(nim_70b_rows()) <= 10


def test_trtllm_8b_peak_throughput_within_20_percent() -> None:
    assert _worst(trtllm_8b_rows()) <= 20


def test_roofline_c0_within_50_percent_of_every_blis_fit() -> None:
    assert _worst(roofline_rows()) <= 50


def test_error_is_relative_to_the_measurement() -> None:
    assert CalibrationRow("x", 10.0, 12.5, "ms").error_percent == 25.0
    assert all(r.measured > 0 and r.model > 0 for r in calibration_rows())
