"""The fluid scenario's span and request count, which the CLI reports and `--mode auto` compares."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferscale.sim.scenario import Scenario, expected_requests

HEADER = "window_start_s,total_rate_rps,active_clients,mean_input_tokens,mean_output_tokens\n"


def servegen(tmp_path: Path, rates: list[float]) -> Path:
    p = tmp_path / "sg.csv"
    p.write_text(HEADER + "".join(f"{600 * i},{r},1,100,20\n" for i, r in enumerate(rates)))
    return p


def test_a_duration_inside_the_first_window_keeps_that_duration(tmp_path: Path) -> None:
    # one point is left after the cut: its length is ServeGen's 10 minutes, not a 60 s bin
    curve, duration, total = expected_requests(Scenario(servegen(tmp_path, [10.0, 20.0]), duration=300.0))
    assert len(curve) == 1 and duration == 300.0 and total == pytest.approx(3000.0)


def test_a_cut_window_counts_only_up_to_the_cut(tmp_path: Path) -> None:
    curve, duration, total = expected_requests(Scenario(servegen(tmp_path, [10.0, 20.0, 30.0]), duration=660.0))
    assert duration == 660.0 and [p.t for p in curve] == [0.0, 600.0]
    assert total == pytest.approx(10.0 * 600 + 20.0 * 60)


def test_a_single_window_file_lasts_ten_minutes_on_the_scaled_axis(tmp_path: Path) -> None:
    _, duration, total = expected_requests(Scenario(servegen(tmp_path, [5.0]), time_scale=2.0))
    assert duration == 300.0 and total == pytest.approx(1500.0)


def test_no_duration_replays_every_window(tmp_path: Path) -> None:
    _, duration, total = expected_requests(Scenario(servegen(tmp_path, [10.0, 20.0])))
    assert duration == 1200.0 and total == pytest.approx(18000.0)


def test_a_start_replays_the_windows_from_there_on_a_clock_that_starts_at_it(tmp_path: Path) -> None:
    curve, duration, total = expected_requests(Scenario(servegen(tmp_path, [10.0, 20.0, 30.0]), start=600.0))
    assert [(p.t, p.rate) for p in curve] == [(0.0, 20.0), (600.0, 30.0)]
    assert duration == 1200.0 and total == pytest.approx(20.0 * 600 + 30.0 * 600)


def test_a_start_at_the_last_window_keeps_the_files_window_length(tmp_path: Path) -> None:
    p = tmp_path / "sg.csv"
    p.write_text(HEADER + "".join(f"{300 * i},{r},1,100,20\n" for i, r in enumerate([10.0, 20.0, 30.0])))
    curve, duration, total = expected_requests(Scenario(p, start=600.0))
    assert len(curve) == 1 and duration == 300.0 and total == pytest.approx(30.0 * 300)


def mooncake(tmp_path: Path, seconds: list[float]) -> Path:
    p = tmp_path / "mc.jsonl"
    p.write_text("".join(f'{{"timestamp": {1000 * s:g}, "input_length": 100, "output_length": 20}}\n' for s in seconds))
    return p


def test_a_request_trace_shorter_than_a_minute_keeps_its_rate_and_its_span(tmp_path: Path) -> None:
    # 100 requests in 0.99 s: about 100 requests/s, not 100 spread over a minute
    curve, duration, total = expected_requests(Scenario(mooncake(tmp_path, [i / 100 for i in range(100)])))
    assert len(curve) == 1 and duration == pytest.approx(0.99)
    assert curve[0].rate == pytest.approx(100 / 0.99) and total == pytest.approx(100)


def test_a_request_traces_windows_are_counted_over_the_part_of_the_range_they_cover(tmp_path: Path) -> None:
    # one request a second for 100 s, the last at 99 s: a 30-s cut counts 30 over 30 s, a 90-s one ends on a
    # 30-s window of its own, and the whole trace's 39-s tail after its first minute too
    trace = mooncake(tmp_path, [float(i) for i in range(100)])
    curve, duration, total = expected_requests(Scenario(trace, duration=30.0))
    assert [p.rate for p in curve] == pytest.approx([1.0]) and duration == 30.0 and total == pytest.approx(30)
    curve, duration, total = expected_requests(Scenario(trace, duration=90.0))
    assert [p.t for p in curve] == [0.0, 60.0] and [p.rate for p in curve] == pytest.approx([1.0, 1.0])
    assert total == pytest.approx(90)
    curve, duration, total = expected_requests(Scenario(trace, rate_scale=2.0))
    assert [p.t for p in curve] == [0.0, 60.0] and [p.rate for p in curve] == pytest.approx([2.0, 80 / 39])
    assert duration == 99.0
    assert total == pytest.approx(200)


def test_a_request_traces_tail_shorter_than_half_a_minute_joins_the_minute_before(tmp_path: Path) -> None:
    # the trace's last request sits at its end: a tail of 1 s on its own would read as a peak of 2 requests/s
    curve, duration, total = expected_requests(Scenario(mooncake(tmp_path, [*range(0, 60, 6), 60.0, 61.0])))
    assert [p.t for p in curve] == [0.0] and [p.rate for p in curve] == pytest.approx([12 / 61]) and duration == 61.0
    assert total == pytest.approx(12)


def test_a_request_trace_of_one_instant_is_counted_over_a_minute(tmp_path: Path) -> None:
    curve, duration, total = expected_requests(Scenario(mooncake(tmp_path, [5.0, 5.0])))
    assert [p.rate for p in curve] == pytest.approx([2 / 60]) and duration == 60.0 and total == pytest.approx(2)
