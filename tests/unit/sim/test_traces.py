from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from tests.paths import TRACES

from inferscale.sim import traces
from inferscale.sim.traces import (
    TraceError,
    detect_format,
    iter_request_chunks,
    load_rate_curve,
    load_request_arrays,
    load_request_curve,
    load_trace,
    rate_curve,
)

AZURE = TRACES / "AzureLLMInferenceTrace_conv.csv"
MOONCAKE = TRACES / "synthetic_trace.jsonl"
SERVEGEN = TRACES / "m-mid_aggregate_10min.csv"
SERVEGEN_SMALL = TRACES / "m-small_aggregate_10min.csv"

needs_traces = pytest.mark.usefixtures("shared_traces")  # skipped without them, failed under make test


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
MC = '{{"timestamp": {}, "input_length": {}, "output_length": 5}}\n'
SERVEGEN_HEADER = (
    "window_start_s,total_rate_rps,active_clients,mean_input_tokens,mean_output_tokens,token_info_rate_fraction\n"
)


# --- the real files -------------------------------------------------------------------------------


@needs_traces
def test_azure_conv_counts_and_shape() -> None:
    trace = load_trace(AZURE)
    assert len(trace.requests) == 19_366
    assert trace.requests[0].arrival == 0.0
    assert trace.duration == pytest.approx(3501.721937, abs=1e-6)  # 7-digit fractions kept
    arrivals = [r.arrival for r in trace.requests]
    assert arrivals == sorted(arrivals)
    assert np.mean([r.input_tokens for r in trace.requests]) == pytest.approx(1155, rel=0.01)
    assert np.mean([r.output_tokens for r in trace.requests]) == pytest.approx(211, rel=0.01)
    assert trace.name == "AzureLLMInferenceTrace_conv"


@needs_traces
def test_mooncake_counts_and_ms_timestamps() -> None:
    trace = load_trace(MOONCAKE)
    assert len(trace.requests) == 3_993
    assert trace.duration == pytest.approx(1022.025)
    assert np.mean([r.input_tokens for r in trace.requests]) == pytest.approx(15_326, rel=0.01)


@needs_traces
@pytest.mark.parametrize("path", [SERVEGEN, SERVEGEN_SMALL])
def test_servegen_curve_is_14_days_of_10_minute_windows_without_gaps(path: Path) -> None:
    curve = load_rate_curve(path)
    assert len(curve) == 14 * 24 * 6
    assert curve[1].t - curve[0].t == 600.0
    assert all(p.rate > 0 and p.mean_input and p.mean_output for p in curve)


@needs_traces
def test_format_detection() -> None:
    assert detect_format(AZURE) == "azure"
    assert detect_format(MOONCAKE) == "mooncake"
    assert detect_format(SERVEGEN) == "servegen"


# --- scaling ----------------------------------------------------------------------------------------


@needs_traces
def test_time_scale_compresses_timestamps() -> None:
    base = load_trace(MOONCAKE)
    fast = load_trace(MOONCAKE, time_scale=4)
    assert len(fast.requests) == len(base.requests)
    assert fast.duration == pytest.approx(base.duration / 4)
    assert fast.requests[100].arrival == pytest.approx(base.requests[100].arrival / 4)


@needs_traces
@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 7.0])
def test_rate_scale_multiplies_the_count_on_the_same_axis(scale: float) -> None:
    base = load_trace(AZURE)
    scaled = load_trace(AZURE, rate_scale=scale, seed=3)
    frac = scale % 1
    assert len(scaled.requests) == pytest.approx(scale * 19_366, abs=1 + 4 * (19_366 * frac * (1 - frac)) ** 0.5)
    assert scaled.duration == base.duration
    arrivals = np.array([r.arrival for r in scaled.requests])
    assert np.all(np.diff(arrivals) >= 0)
    # The shape over time is kept: per-10-minute counts scale uniformly.
    base_counts = np.histogram([r.arrival for r in base.requests], bins=6, range=(0, base.duration))[0]
    counts = np.histogram(arrivals, bins=6, range=(0, base.duration))[0]
    assert counts / base_counts == pytest.approx(np.full(6, scale), rel=0.08)


@needs_traces
def test_replication_is_a_superposition_not_clumps() -> None:
    # 40x the users is 40 independent-ish streams: within 10-s blocks the per-second counts stay near
    # Poisson (variance/mean ~ 1), as in the original trace; 40 clones behind each request would give ~40.
    def dispersion(arrival: np.ndarray, span: float) -> float:
        blocks = int(span) // 10
        c = np.histogram(arrival, bins=blocks * 10, range=(0, blocks * 10))[0].reshape(blocks, 10)
        return float((c.var(axis=1, ddof=1) / c.mean(axis=1)).mean())

    base, span = load_request_arrays(AZURE)
    scaled, _ = load_request_arrays(AZURE, rate_scale=40)
    assert dispersion(base.arrival, span) < 1.5
    assert dispersion(scaled.arrival, span) < 4.0
    assert scaled.arrival.min() >= 0 and scaled.arrival.max() <= span


def test_replicated_copies_do_not_arrive_together(tmp_path: Path) -> None:
    lines = "".join(f'{{"timestamp": {i * 1000}, "input_length": 10, "output_length": 5}}\n' for i in range(50))
    trace = load_trace(write(tmp_path, "t.jsonl", lines), rate_scale=3)
    assert len(trace.requests) == 150
    arrivals = [r.arrival for r in trace.requests]
    assert len(set(arrivals)) == 150


@needs_traces
def test_servegen_rate_scale_and_time_scale() -> None:
    base = load_rate_curve(SERVEGEN)
    scaled = load_rate_curve(SERVEGEN, rate_scale=0.01, time_scale=10)
    assert scaled[5].rate == pytest.approx(base[5].rate * 0.01)
    assert scaled[5].t == pytest.approx(base[5].t / 10)
    assert scaled[5].mean_input == base[5].mean_input


@needs_traces
def test_duration_truncates() -> None:
    trace = load_trace(AZURE, duration=600)
    assert trace.duration == 600
    assert all(r.arrival < 600 for r in trace.requests)
    assert 0 < len(trace.requests) < 19_366
    assert len(load_rate_curve(SERVEGEN, duration=86_400)) == 144
    assert load_trace(MOONCAKE, duration=1e9).duration == pytest.approx(1022.025)


@needs_traces
def test_seeds_are_deterministic_and_distinct() -> None:
    a = load_trace(AZURE, rate_scale=1.7, seed=1)
    b = load_trace(AZURE, rate_scale=1.7, seed=1)
    c = load_trace(AZURE, rate_scale=1.7, seed=2)
    assert a == b
    assert a.requests != c.requests


@needs_traces
def test_servegen_generation_matches_the_curve_and_is_chunk_stable() -> None:
    day = 86_400.0
    arrays, span = load_request_arrays(SERVEGEN, rate_scale=0.01, duration=day, seed=5)
    curve = load_rate_curve(SERVEGEN, rate_scale=0.01, duration=day)
    assert span == day
    expected = sum(p.rate * 600 for p in curve)
    assert len(arrays) == pytest.approx(expected, rel=0.01)
    assert np.all(np.diff(arrays.arrival) >= 0)
    assert arrays.arrival[-1] < day
    # Token means follow the windows' means (lognormal drawn around them).
    weights = np.array([p.rate for p in curve])
    mean_in = np.average([p.mean_input for p in curve], weights=weights)
    assert arrays.input_tokens.mean() == pytest.approx(mean_in, rel=0.03)
    chunks, _ = iter_request_chunks(SERVEGEN, rate_scale=0.01, duration=day, seed=5)
    assert np.array_equal(np.concatenate([c.arrival for c in chunks]), arrays.arrival)
    other, _ = load_request_arrays(SERVEGEN, rate_scale=0.01, duration=day, seed=6)
    assert not np.array_equal(other.arrival[:100], arrays.arrival[:100])


def test_servegen_gaps_are_interpolated_not_idle(tmp_path: Path) -> None:
    rows = [
        "0,10,5,100,20,0.5",
        "600,0.0,0,,,",
        "1200,0.0,0,,,",
        "1800,40,5,400,50,0.5",
        "2400,0.0,0,,,",
    ]
    curve = load_rate_curve(write(tmp_path, "sg.csv", SERVEGEN_HEADER + "\n".join(rows) + "\n"))
    assert [p.rate for p in curve] == pytest.approx([10, 20, 30, 40, 40])
    assert [p.mean_input for p in curve] == pytest.approx([100, 200, 300, 400, 400])
    trace = load_trace(tmp_path / "sg.csv", seed=1)
    counts = np.histogram([r.arrival for r in trace.requests], bins=5, range=(0, 3000))[0]
    assert counts[1] > 0.5 * 20 * 600  # a gap is not idle


@needs_traces
def test_a_servegen_replay_too_large_to_hold_in_memory_is_refused_before_it_is_drawn() -> None:
    # the whole 14 days at the curve's own rates: two billion requests, some 50 GB of columns
    with pytest.raises(TraceError, match=r"about 2,\d{3},\d{3},\d{3} requests; .* give a shorter --duration"):
        load_request_arrays(SERVEGEN)
    chunks, _ = iter_request_chunks(SERVEGEN)  # drawn a window at a time, as simulate replays it: no bound
    assert len(next(chunks)) > 0


@needs_traces
def test_a_shorter_servegen_replay_is_the_start_of_a_longer_one() -> None:
    # 900 s cuts the second 10-minute window: drawn whole and cut, not drawn again over the part kept
    short, _ = load_request_arrays(SERVEGEN_SMALL, rate_scale=0.01, duration=900.0, seed=3)
    long, _ = load_request_arrays(SERVEGEN_SMALL, rate_scale=0.01, duration=1200.0, seed=3)
    assert short.arrival.max() < 900.0 and np.any(short.arrival > 600.0)
    kept = long.arrival < 900.0
    assert np.array_equal(short.arrival, long.arrival[kept])
    assert np.array_equal(short.input_tokens, long.input_tokens[kept])


def test_a_servegen_window_collected_for_part_of_its_time_beside_a_gap_is_a_gap_too(tmp_path: Path) -> None:
    rows = [
        "0,100,5,100,20,0.5",
        "600,0.0,0,,,",
        "1200,1.2,5,900,90,0.5",  # collection resumed seconds before this window's end: 1.2 of 100 req/s
        "1800,100,5,100,20,0.5",
        "2400,30,5,100,20,0.5",  # traffic falling by whole windows: traffic, whatever gap follows
        "3000,0.0,0,,,",
        "3600,10,5,100,20,0.5",
    ]
    curve = load_rate_curve(write(tmp_path, "sg.csv", SERVEGEN_HEADER + "\n".join(rows) + "\n"))
    # a ramp down to 1.2 req/s and an 80x jump after it, were the part-window read as ten minutes of traffic
    assert [p.rate for p in curve] == pytest.approx([100, 100, 100, 100, 30, 20, 10])
    assert [p.mean_input for p in curve] == pytest.approx([100, 100, 100, 100, 100, 100, 100])


def test_rate_curve_of_a_trace_marks_empty_windows_unknown(tmp_path: Path) -> None:
    lines = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
    lines += '{"timestamp": 150000, "input_length": 30, "output_length": 7}\n'
    curve = rate_curve(load_trace(write(tmp_path, "t.jsonl", lines)), window=60)
    assert [p.rate for p in curve] == pytest.approx([1 / 60, 0, 1 / 30])  # the last covers 30 s
    assert curve[1].mean_input is None and curve[1].mean_output is None
    assert curve[2].mean_input == 30


def test_rate_curve_counts_the_last_part_minute_over_the_time_it_covers(tmp_path: Path) -> None:
    # a steady 1 req/s for 621 s: a 21-s tail counted over a whole minute read as a third of the load, and
    # the oracle sized the trace's last seconds for it
    lines = "".join(f'{{"timestamp": {t * 1000}, "input_length": 10, "output_length": 5}}\n' for t in range(622))
    curve = rate_curve(load_trace(write(tmp_path, "t.jsonl", lines)), window=60)
    assert len(curve) == 11
    assert [p.rate for p in curve] == pytest.approx([1.0] * 11, rel=0.05)


def test_rate_curve_keeps_a_light_tail_from_lowering_the_last_minute(tmp_path: Path) -> None:
    # 2 req/s for a minute, then 20 s at 0.5 req/s: joined into one bin, the busy minute read 1.6 req/s
    times = [i * 0.5 for i in range(120)] + [60 + i * 2.0 for i in range(11)]
    lines = "".join(f'{{"timestamp": {t * 1000}, "input_length": 10, "output_length": 5}}\n' for t in times)
    curve = rate_curve(load_trace(write(tmp_path, "t.jsonl", lines)), window=60)
    assert [p.rate for p in curve] == pytest.approx([2.0, 0.55])


def test_rate_curve_counts_a_tail_of_an_instant_over_a_second(tmp_path: Path) -> None:
    times = [i * 0.5 for i in range(120)] + [60.001]
    lines = "".join(f'{{"timestamp": {t * 1000}, "input_length": 10, "output_length": 5}}\n' for t in times)
    curve = rate_curve(load_trace(write(tmp_path, "t.jsonl", lines)), window=60)
    assert [p.rate for p in curve] == pytest.approx([2.0, 1.0])


# --- malformed input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,5\nyesterday,1,1\n",
            ":3: TIMESTAMP",
        ),
        ("b.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,ten,5\n", ":2: ContextTokens"),
        ("c.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,0\n", ":2: GeneratedTokens"),
        ("d.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10\n", ":2: expected 3 columns"),
        ("e.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 18:15:46.68,10,5\n", ":2: TIMESTAMP"),
        (
            "f.jsonl",
            '{"timestamp": 0, "input_length": 1, "output_length": 1}\n{"timestamp": 5,\n',
            ":2: not valid JSON",
        ),
        ("g.jsonl", '{"timestamp": 0, "input_length": 1}\n', ":1: missing field 'output_length'"),
        ("h.jsonl", '{"timestamp": -4, "input_length": 1, "output_length": 1}\n', ":1: timestamp"),
        (  # an integer past a float's range: json reads it whole
            "h2.jsonl",
            '{"timestamp": 0, "input_length": 1, "output_length": 1}\n'
            + f'{{"timestamp": 1{"0" * 400}, "input_length": 1, "output_length": 1}}\n',
            ":2: timestamp must be a number of ms >= 0, got 1000000000000000000000000000000000000000",
        ),
        ("i.jsonl", '{"timestamp": 1, "input_length": 2.5, "output_length": 1}\n', ":1: input_length"),
        ("j.csv", SERVEGEN_HEADER + "0,1,1,10,10,1\n600,abc,1,10,10,1\n", ":3: total_rate_rps 'abc'"),
        ("k.csv", SERVEGEN_HEADER + "0,1,1,10,10,1\n0,1,1,10,10,1\n", ":3: window_start_s 0.0 does not increase"),
        ("l.csv", SERVEGEN_HEADER + "0,1,1,10,10,1\n600,1,1,10,10,1\n1800,1,1,10,10,1\n", ":4: windows must be evenly"),
        ("m.csv", SERVEGEN_HEADER + "0,0,1,,,\n600,0,1,,,\n", "all are collection gaps"),
        ("n.csv", SERVEGEN_HEADER + "0,-1,1,10,10,1\n", ":2: total_rate_rps must be a number >= 0, got '-1'"),
        ("n2.csv", SERVEGEN_HEADER + " ,1,1,10,10,1\n", ":2: window_start_s must be a number, got ' '"),
        ("o.csv", "window_start_s,total_rate_rps\n0,1\n", "lacks column(s) mean_input_tokens"),
        ("p.txt", "hello world\n", "cannot tell the trace format"),
        ("q.txt", "\n\n", "the file is empty"),
        ("r.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "holds no request"),
        # numbers past what the replay can hold
        ("s.csv", AZ + "2023-11-16 18:15:46.68,100000000000000000000000,5\n", ":2: ContextTokens too large"),
        ("t.csv", AZ + f"2023-11-16 18:15:46.68,{'7' * 5000},5\n", ":2: ContextTokens too large"),
        ("u.csv", AZ + "2023-11-16 18:15:46.68,1000000001,5\n", ":2: ContextTokens too large ('1000000001')"),
        ("v.csv", AZ + "2023-11-16 18:15:46.68,²,5\n", ":2: ContextTokens must be an integer >= 0, got '²'"),
        ("w.csv", AZ + "2023-11-16 18:15:46.68,--5,5\n", ":2: ContextTokens must be an integer >= 0"),
        ("x.jsonl", MC.format(0, 1) + MC.format(1000, 10**23), ":2: input_length too large"),
        ("y.jsonl", '{"timestamp": 0, "input_length": 1' + "0" * 5000 + "}\n", ":1: a number has too many digits"),
        ("y2.jsonl", MC.format(0, 1) + "[" * 100_000 + "\n", ":2: not valid JSON: nested too deeply"),
        # times past what the replay can cover, and rows far out of order
        ("z1.jsonl", MC.format(0, 1) + MC.format("1e15", 1), ":2: arrives 31,710 years after the first request"),
        ("z2.jsonl", MC.format(0, 1) + MC.format("1e300", 1), ":2: arrives 3.17e+289 years after"),
        (
            "z3.csv",
            AZ + "2023-11-16 18:15:46.68,1,5\n2023-11-16 18:15:47,1,5\n9999-12-31 00:00:00,1,5\n",
            ":4: arrives",
        ),
        (
            "z4.csv",
            AZ + "2023-11-16 18:15:46.68,1,5\n2023-11-16 18:16:47,1,5\n2023-11-15 18:16:47,2,5\n",
            ":4: arrives 1 day before line 3, above it: '2023-11-15 18:16:47,2,5' after '2023-11-16 18:16:47,1,5'",
        ),
        ("z5.jsonl", MC.format(0, 1) + MC.format(70_000, 1) + MC.format(9_000, 1), ":3: arrives 61 s before line 2"),
        ("z6.csv", SERVEGEN_HEADER + "0,1,1,10,10,1\n1e15,1,1,10,10,1\n", ":3: window_start_s 1000000000000000.0 is"),
        # ServeGen values that are not gaps
        ("sg1.csv", SERVEGEN_HEADER + "0,1,1,1e300,10,1\n", ":2: mean_input_tokens too large ('1e300')"),
        ("sg5.csv", SERVEGEN_HEADER + "0,1e300,1,100,10,1\n", ":2: total_rate_rps too large (1e+300)"),
        ("sg2.csv", SERVEGEN_HEADER + "0,1,1,100,10,1\n600,1,1,-100,10,1\n", ":3: mean_input_tokens must be >= 0"),
        ("sg3.csv", SERVEGEN_HEADER + "0,1,1,100,10,1\n600,1\n", ":3: expected 6 columns as in the header, got 2"),
        (
            "sg4.csv",
            "window_start_s,total_rate_rps,mean_input_tokens,mean_output_tokens,window_start_s\n0,1,100,10,5\n",
            ":1: column(s) 'window_start_s' appear more than once in the header",
        ),
    ],
)
def test_malformed_files_name_file_line_and_problem(tmp_path: Path, name: str, text: str, fragment: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError, match=None) as err:
        load_trace(path)
    assert fragment in str(err.value)
    assert str(path) in str(err.value)


def test_missing_file_and_binary_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such trace file"):
        load_trace(tmp_path / "nope.csv")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TraceError, match="not UTF-8"):
        load_trace(binary)


def test_format_messages_name_the_option_and_quote_little_of_the_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="pass --format as one of azure, mooncake, servegen"):
        load_trace(write(tmp_path, "t.txt", "hello world\n"))
    ids = ", ".join(str(i) for i in range(500))
    mooncake = write(
        tmp_path, "t.jsonl", f'{{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [{ids}]}}\n'
    )
    with pytest.raises(TraceError) as err:
        load_trace(mooncake, fmt="azure")
    got = str(err.value).split(", got ", 1)[1]
    assert got.startswith('\'{"timestamp": 0') and got.endswith("…'") and len(got) <= 82


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,5\n", "azure"),
        ("m.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 5}\n', "mooncake"),
        ("s.csv", SERVEGEN_HEADER + "0,1,1,10,5,1\n", "servegen"),
    ],
)
def test_a_leading_byte_order_mark_is_ignored(tmp_path: Path, name: str, text: str, fmt: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())  # what Excel writes in front of a UTF-8 CSV
    assert detect_format(path) == fmt
    for given in (None, fmt):
        curve = load_rate_curve(path, given)
        assert curve and curve[0].mean_input == 10


def test_bad_arguments(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1}\n')
    with pytest.raises(TraceError, match="rate_scale"):
        load_trace(path, rate_scale=0)
    with pytest.raises(TraceError, match="time_scale"):
        load_trace(path, time_scale=float("nan"))
    with pytest.raises(TraceError, match="duration"):
        load_trace(path, duration=-1)
    with pytest.raises(TraceError, match="unknown trace format 'parquet'"):
        load_trace(path, fmt="parquet")


def test_token_counts_up_to_the_bound_load(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "t.csv", AZ + "2023-11-16 18:15:46.68,1000000000,1000000000\n"))
    assert trace.requests[0].input_tokens == trace.requests[0].output_tokens == 10**9


def test_small_disorder_is_re_sorted(tmp_path: Path) -> None:
    # ties and jitter, up to a minute back from the latest row above
    lines = MC.format(10_000, 1) + MC.format(5_000, 2) + MC.format(70_000, 3) + MC.format(10_000, 4)
    lines += MC.format(10_000, 5)
    trace = load_trace(write(tmp_path, "t.jsonl", lines))
    assert [r.input_tokens for r in trace.requests] == [2, 1, 4, 5, 3]
    assert [r.arrival for r in trace.requests] == [0.0, 5.0, 5.0, 5.0, 65.0]


def test_a_time_scale_stretching_the_trace_past_two_years_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "t.jsonl", MC.format(0, 1) + MC.format(50_000, 1))
    with pytest.raises(TraceError, match="--time-scale 1e-09 stretches the trace's 50 s to 1,585 years") as err:
        load_rate_curve(path, time_scale=1e-9)  # 26 billion one-minute bins, were it built
    assert str(path) in str(err.value)
    assert load_request_arrays(path, time_scale=1e-6)[1] == pytest.approx(50e6)  # 1.6 years: accepted
    servegen = write(tmp_path, "sg.csv", SERVEGEN_HEADER + "0,1,1,10,5,1\n600,1,1,10,5,1\n")
    with pytest.raises(TraceError) as err:
        load_request_arrays(servegen, time_scale=1e-6)
    assert "--time-scale 1e-06 stretches the trace's 20 minutes to 38.1 years" in str(err.value)


@needs_traces
def test_the_real_traces_may_be_stretched_within_two_years() -> None:
    assert load_trace(MOONCAKE, time_scale=1e-3).duration == pytest.approx(1022.025e3)
    with pytest.raises(TraceError) as err:
        load_rate_curve(SERVEGEN, time_scale=0.01)
    assert "--time-scale 0.01 stretches the trace's 14 days to 3.84 years" in str(err.value)


def test_servegen_empty_or_zero_token_means_in_a_busy_window_are_unknown(tmp_path: Path) -> None:
    rows = ["0,10,5,100,20,0.5", "600,10,5,,,0", "1200,10,5,0,0,0", "1800,10,5,400,50,0.5"]
    curve = load_rate_curve(write(tmp_path, "sg.csv", SERVEGEN_HEADER + "\n".join(rows) + "\n"))
    assert [p.mean_input for p in curve] == pytest.approx([100, 200, 300, 400])
    assert [p.rate for p in curve] == pytest.approx([10, 10, 10, 10])


def test_a_rate_scale_beyond_what_can_be_generated_is_refused_before_anything_is_built(tmp_path: Path) -> None:
    servegen = write(tmp_path, "sg.csv", SERVEGEN_HEADER + "0,1000,1,100,10,1\n600,2000,1,100,10,1\n")
    with pytest.raises(TraceError, match=r"--rate-scale 1e\+06 takes the busiest window to 2e\+09 requests/s"):
        load_trace(servegen, rate_scale=1e6)
    azure = write(tmp_path, "az.csv", AZ + "2023-11-16 18:15:46.68,1,5\n2023-11-16 18:15:47,1,5\n")
    with pytest.raises(TraceError, match=r"--rate-scale 1e\+09 makes its 2 requests 2,000,000,000"):
        load_trace(azure, rate_scale=1e9)


def test_a_request_traces_busiest_minute_is_held_to_servegens_rate_bound(tmp_path: Path) -> None:
    # 3 requests in the first minute: 0.05 requests/s; 2e8 times that is 1e7, the bound itself
    azure = write(
        tmp_path, "az.csv", AZ + "".join(f"2023-11-16 18:{15 + s // 60}:{s % 60:02d},1,5\n" for s in (0, 1, 2, 70))
    )
    mooncake = write(tmp_path, "mc.jsonl", "".join(MC.format(ms, 1) for ms in (0, 1000, 2000, 70_000)))
    for path in (azure, mooncake):
        assert max(p.rate for p in load_rate_curve(path, rate_scale=2e8)) == pytest.approx(1e7)
        with pytest.raises(TraceError) as err:  # the curve of the fluid mode and plan: no request is built
            load_rate_curve(path, rate_scale=3e8)
        assert f"{path}: --rate-scale 3e+08 takes the busiest minute to 1.5e+07 requests/s; at most 1e+07" in str(
            err.value
        )
    # compressed time is a higher rate too: the message names both flags that raise it
    with pytest.raises(TraceError, match=r"--time-scale 2 and --rate-scale 2e\+08 take the busiest minute to "):
        load_rate_curve(azure, time_scale=2, rate_scale=2e8)


def test_a_request_curve_is_bounded_at_the_rate_it_holds_not_over_a_whole_minute(tmp_path: Path) -> None:
    # 4 requests in 2 s: 2 requests/s in the curve of the fluid mode and plan, 4/60 in a minute's bin
    path = write(tmp_path, "mc.jsonl", "".join(MC.format(ms, 1) for ms in (0, 500, 1000, 2000)))
    curve, span = load_request_curve(path, rate_scale=5e6)
    assert span == 2.0 and [p.rate for p in curve] == pytest.approx([1e7])
    with pytest.raises(TraceError, match=r"--rate-scale 6e\+06 takes the busiest minute to 1.2e\+07 requests/s"):
        load_request_curve(path, rate_scale=6e6)
    with pytest.raises(TraceError, match="a ServeGen curve keeps its own windows"):
        load_request_curve(write(tmp_path, "sg.csv", SERVEGEN_HEADER + "0,1,1,10,5,1\n"))


# --- a replay from a later point (--start) --------------------------------------------------------


@needs_traces
def test_a_start_replays_the_whole_replays_requests_from_there() -> None:
    # after the copies of --rate-scale, so a later window is the whole replay's, request for request
    whole, _ = load_request_arrays(AZURE, rate_scale=1.7, seed=3, duration=1800)
    later, span = load_request_arrays(AZURE, rate_scale=1.7, seed=3, start=600, duration=1200)
    keep = whole.arrival >= 600
    assert span == 1200 and 0 < len(later) < len(whole)
    np.testing.assert_array_equal(later.arrival, whole.arrival[keep] - 600)
    np.testing.assert_array_equal(later.input_tokens, whole.input_tokens[keep])
    np.testing.assert_array_equal(later.output_tokens, whole.output_tokens[keep])


@needs_traces
def test_a_servegen_start_generates_the_whole_replays_requests_of_those_windows() -> None:
    day = 86_400.0
    whole, _ = load_request_arrays(SERVEGEN, rate_scale=0.01, seed=5, duration=day + 7200)
    later, span = load_request_arrays(SERVEGEN, rate_scale=0.01, seed=5, start=day, duration=7200)
    keep = whole.arrival >= day
    assert span == 7200 and len(later) == keep.sum() > 0
    np.testing.assert_allclose(later.arrival, whole.arrival[keep] - day, atol=1e-6)
    np.testing.assert_array_equal(later.input_tokens, whole.input_tokens[keep])
    curve = load_rate_curve(SERVEGEN, start=day, duration=7200)
    assert [(p.t, p.rate) for p in curve] == [
        (p.t - day, p.rate) for p in load_rate_curve(SERVEGEN, duration=day + 7200) if p.t >= day
    ]


def test_a_start_on_a_compressed_axis_counts_in_compressed_seconds(tmp_path: Path) -> None:
    path = write(tmp_path, "sg.csv", SERVEGEN_HEADER + "".join(f"{600 * i},{i + 1},1,100,20,1\n" for i in range(4)))
    curve = load_rate_curve(path, time_scale=10, start=120)  # the third window, at 1,200 s of the trace
    assert [(p.t, p.rate) for p in curve] == [(0.0, 3.0), (60.0, 4.0)]


TWO_WINDOWS = SERVEGEN_HEADER + "0,1,1,100,20,1\n600,2,1,100,20,1\n"
FIVE_SECONDS = MC.format(0, 10) + MC.format(5000, 10)


@pytest.mark.parametrize(
    ("text", "name", "start", "message"),
    [
        (
            TWO_WINDOWS,
            "sg.csv",
            300.0,
            "--start 5m falls inside a ServeGen window; windows are 10m long on the replay's time axis, "
            "and the nearest boundaries are 0s and 10m",
        ),
        # off a boundary and past the end: said to be past the end, not called off a boundary
        (TWO_WINDOWS, "sg.csv", 1500.0, "--start 25m is at or past the trace's end (20m in)"),
        (TWO_WINDOWS, "sg.csv", 1200.0, "--start 20m is at or past the trace's end (20m in)"),
        (FIVE_SECONDS, "t.jsonl", 5.0, "--start 5s is at or past the trace's end (5s in)"),
        (FIVE_SECONDS, "t.jsonl", -1.0, "start must be a finite number of seconds >= 0, got -1.0"),
        (FIVE_SECONDS, "t.jsonl", float("nan"), "start must be a finite number of seconds >= 0, got nan"),
    ],
)
def test_a_start_outside_the_trace_or_inside_a_window_is_refused(
    tmp_path: Path, text: str, name: str, start: float, message: str
) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError, match=re.escape(message)):
        load_request_arrays(path, start=start)
    with pytest.raises(TraceError, match=re.escape(message)):
        load_rate_curve(path, start=start)


def test_the_boundaries_a_refused_start_names_are_accepted(tmp_path: Path) -> None:
    # at --time-scale 3.3 a window lasts 181.8181... s: the boundary the message prints must load
    path = write(tmp_path, "sg.csv", SERVEGEN_HEADER + "".join(f"{600 * i},{i + 1},1,100,20,1\n" for i in range(4)))
    with pytest.raises(TraceError, match=re.escape("the nearest boundaries are 0s and 181.818s")):
        load_rate_curve(path, time_scale=3.3, start=150)
    curve = load_rate_curve(path, time_scale=3.3, start=181.818)
    assert [p.rate for p in curve] == [2.0, 3.0, 4.0] and curve[0].t == 0.0


def test_a_servegen_start_keeps_each_windows_random_stream(tmp_path: Path) -> None:
    path = write(tmp_path, "sg.csv", SERVEGEN_HEADER + "0,1,1,100,20,1\n600,2,1,100,20,1\n1200,3,1,100,20,1\n")
    whole, _ = load_request_arrays(path, seed=5)
    later, span = load_request_arrays(path, seed=5, start=600)
    keep = whole.arrival >= 600
    assert span == 1200 and len(later) == keep.sum() > 0
    np.testing.assert_allclose(later.arrival, whole.arrival[keep] - 600)
    np.testing.assert_array_equal(later.input_tokens, whole.input_tokens[keep])


def test_a_request_traces_start_is_on_the_compressed_axis_in_both_modes(tmp_path: Path) -> None:
    # one request a second for 100 s; at --time-scale 2 the replay from 10 s holds those from 20 s of the trace
    path = write(tmp_path, "t.jsonl", "".join(MC.format(1000 * i, 10) for i in range(100)))
    arrays, span = load_request_arrays(path, time_scale=2, start=10)
    assert len(arrays) == 80 and arrays.arrival[0] == 0.0 and span == pytest.approx(39.5)
    curve = load_rate_curve(path, time_scale=2, start=10, window=10)  # the fluid mode's curve
    assert [(p.t, p.rate) for p in curve] == [(0.0, 2.0), (10.0, 2.0), (20.0, 2.0), (30.0, 2.0)]


@needs_traces
def test_copies_are_made_a_batch_at_a_time_and_only_those_replayed_are_held(monkeypatch: pytest.MonkeyPatch) -> None:
    whole, _ = load_request_arrays(AZURE, rate_scale=3.4, seed=5, start=300, duration=600)
    monkeypatch.setattr(traces, "COPY_BATCH", 100)  # copies of about 29 requests at a time
    batched, _ = load_request_arrays(AZURE, rate_scale=3.4, seed=5, start=300, duration=600)
    np.testing.assert_array_equal(batched.arrival, whole.arrival)
    np.testing.assert_array_equal(batched.input_tokens, whole.input_tokens)
    monkeypatch.undo()
    # ten seconds of the trace at --rate-scale 2000: its 39 million copies would take 1.5 GB at once
    tracemalloc.start()
    try:
        ten, _ = load_request_arrays(AZURE, rate_scale=2000, duration=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < len(ten) < 100_000 and peak < 200 << 20
