"""Trace loaders: request traces (Azure CSV, Mooncake JSONL) and ServeGen rate curves.

Formats (auto-detected from the first line):
- ``azure``: CSV header ``TIMESTAMP,ContextTokens,GeneratedTokens``; TIMESTAMP is a naive datetime
  (any number of fractional digits). Arrivals are made relative to the first request.
- ``mooncake``: JSON lines with ``timestamp`` (ms from start), ``input_length``, ``output_length``.
- ``servegen``: 10-minute aggregates ``window_start_s,total_rate_rps,...,mean_input_tokens,
  mean_output_tokens,...``. Requests are generated per window by a seeded Poisson process (the count
  is Poisson(rate·window), arrivals uniform in the window) with lognormal token lengths whose mean is
  the window's mean. A window with rate 0 is a collection gap, not idle traffic: its rate and token
  means are interpolated linearly between the nearest valid windows (carried at the ends). A window
  beside a gap with under `PARTIAL_SHARE` of the rate of the window on its other side is one that
  collection stopped or resumed inside (m-mid's windows after its gaps hold 14 req/s between ones of
  2,000: a few seconds of the ten minutes), and is a gap too; read as traffic, it made the filled gap
  a ramp down to it and a 150x jump after. The token
  means cover only part of the traffic (`token_info_rate_fraction`); they are applied to all of it.
  An empty or zero token mean in a window with traffic is unknown too, and filled the same way; a
  negative value, a row shorter than the header or a column named twice is an error.
  Mooncake's `hash_ids` (shared prefixes) are ignored: the simulator models no prefix cache.

Request traces are re-sorted by arrival: real ones have ties and clock jitter. A row more than
MAX_DISORDER seconds before the latest row above it is an error, not jitter: re-sorted, a row a day early
would move the origin by a day and leave the replay almost empty. Token counts above MAX_TOKENS and
traces longer than MAX_SPAN (as read, or once stretched by ``time_scale``) are errors too, and so is a
busiest window (a request trace's busiest minute) above MAX_RATE requests/s once scaled.

Scaling, applied in this order: ``time_scale`` X divides every timestamp by X (request traces get
X times the rate; a ServeGen curve keeps its rates on X-times shorter windows); ``rate_scale`` X
multiplies the rate on the same time axis (request traces: each request is kept floor(X) times plus
once more with probability frac(X); each extra copy is shifted by a uniform offset within
±COPY_JITTER/2, reflected at the trace's ends: X times the users is a superposition of independent
streams, not X clones arriving as one clump, and the shape slower than ~10 s, which is what an
autoscaler sees, is kept; ServeGen: the rate is multiplied); ``start`` drops what comes before it
and makes it the replay's time 0, and ``duration`` truncates what follows (both in seconds on the
scaled axis). A ServeGen ``start`` falls on a window boundary. Everything is deterministic per ``seed``.
ServeGen windows draw from their own seeded stream, keyed by the window's place in the file, so chunked
generation equals the whole and a replay from ``start`` holds the requests the whole replay has from
there (for a request trace, once ``rate_scale`` has made its copies over the whole trace).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import re
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

import numpy as np
import numpy.typing as npt

from inferscale.scaling.durations import format_duration, parse_duration
from inferscale.sim.requests import Request, Trace

TRACE_FORMATS = ("azure", "mooncake", "servegen")

AZURE_HEADER = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
SERVEGEN_COLUMNS = ("window_start_s", "total_rate_rps", "mean_input_tokens", "mean_output_tokens")

# A ServeGen window beside a collection gap holding under this share of the rate on its other side was
# collected for part of its ten minutes (`_partly_collected`). m-mid's seven hold 0.5-1%; its quietest other
# window beside a gap (3.2 req/s beside 5.0, at night) is at 65%, and every one of m-small's at 73% or more.
PARTIAL_SHARE = 0.1
# Lognormal shape of generated token lengths, fitted to the Azure conversation trace's p99/mean
# (input 4142/1155 -> sigma 0.65; output 601/211 -> sigma 0.5). ServeGen publishes means only.
INPUT_SIGMA = 0.65
OUTPUT_SIGMA = 0.5
# Spread (seconds) of the time shift given to extra copies when rate_scale > 1.
COPY_JITTER = 10.0
# Far above any model's context window, and small enough that token sums over millions of requests stay
# exact in int64 and float64.
MAX_TOKENS = 10**9
# The longest published LLM traces cover weeks (ServeGen: 14 days); two years of one-minute rate bins is
# about a million, still quick to build. Beyond it a trace is a unit mix-up or a typo, not a workload.
MAX_SPAN = 2 * 365 * 86400.0
START_TOLERANCE = 1e-3  # seconds: how far a ServeGen --start may be from a window boundary
# Requests/s in one ServeGen window as read, and in any format's busiest window once scaled: a thousand times
# the busiest published curve, and far from where numpy's Poisson draw of a window's count gives up. Past it,
# the fleets sized for the peak outgrow memory (the fluid mode holds an entry per replica) and the spec's int32.
MAX_RATE = 1e7
# Requests of a request trace once replicated by rate_scale: about 5 GB of columns.
MAX_REQUESTS = 200_000_000
# How far (seconds) a request trace's row may go back before the latest row above it.
MAX_DISORDER = 60.0

_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)$")
# Longest excerpt of a line quoted in an error: a Mooncake line read as CSV is thousands of characters.
QUOTE_LIMIT = 80


class TraceError(ValueError):
    """A trace file or a loader argument is unusable. The message names the file and line."""


class RatePoint(NamedTuple):
    t: float  # window start, seconds since trace start
    rate: float  # requests/s over the window
    mean_input: float | None  # None when the window holds no request (unknown, not zero)
    mean_output: float | None


@dataclass(frozen=True)
class RequestArrays:
    """Requests as columns, sorted by arrival: the form to use when a trace has millions of requests."""

    arrival: npt.NDArray[np.float64]
    input_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.arrival.size)

    def to_requests(self) -> tuple[Request, ...]:
        return tuple(
            Request(a, i, o)
            for a, i, o in zip(
                self.arrival.tolist(), self.input_tokens.tolist(), self.output_tokens.tolist(), strict=True
            )
        )


def resolve_format(path: Path, fmt: str | None) -> str:
    """`fmt` in any case (`--format AZURE`), or the format detected from the file's first line."""
    return fmt.lower() if fmt is not None else detect_format(path)


def detect_format(path: Path) -> str:
    first = _first_line(path)
    if first.startswith(",".join(AZURE_HEADER)):
        return "azure"
    if first.startswith("window_start_s,"):
        return "servegen"
    if first.startswith("{"):
        return "mooncake"
    raise TraceError(
        f"{path}:1: cannot tell the trace format from the first line {_quote(first)}; "
        f"pass --format as one of {', '.join(TRACE_FORMATS)}"
    )


def load_trace(
    path: str | Path,
    fmt: str | None = None,
    rate_scale: float = 1.0,
    time_scale: float = 1.0,
    duration: float | None = None,
    seed: int = 0,
    *,
    start: float = 0.0,
) -> Trace:
    arrays, span = load_request_arrays(path, fmt, rate_scale, time_scale, duration, seed, start=start)
    return Trace(name=Path(path).stem, requests=arrays.to_requests(), duration=span)


def load_request_arrays(
    path: str | Path,
    fmt: str | None = None,
    rate_scale: float = 1.0,
    time_scale: float = 1.0,
    duration: float | None = None,
    seed: int = 0,
    *,
    start: float = 0.0,
) -> tuple[RequestArrays, float]:
    """All requests as columns, and the duration covered (seconds on the scaled axis)."""
    chunks, span = iter_request_chunks(
        path, fmt, rate_scale, time_scale, duration, seed, start=start, at_most=MAX_REQUESTS
    )
    parts = list(chunks)
    if not parts:
        return _empty(), span
    return (
        RequestArrays(
            np.concatenate([p.arrival for p in parts]),
            np.concatenate([p.input_tokens for p in parts]),
            np.concatenate([p.output_tokens for p in parts]),
        ),
        span,
    )


def iter_request_chunks(
    path: str | Path,
    fmt: str | None = None,
    rate_scale: float = 1.0,
    time_scale: float = 1.0,
    duration: float | None = None,
    seed: int = 0,
    *,
    start: float = 0.0,
    at_most: int | None = None,
) -> tuple[Iterator[RequestArrays], float]:
    """Requests in arrival order, lazily: one chunk per ServeGen window (a request trace is one chunk).
    Returns the iterator and the duration covered. `at_most`: the requests a ServeGen replay is expected to
    hold may not pass it (a caller holding them all in memory: a whole 14-day curve is two billion)."""
    p = Path(path)
    _check_scales(p, rate_scale, time_scale, duration, start)
    kind = resolve_format(p, fmt)
    if kind == "servegen":
        part = _servegen_part(p, rate_scale, time_scale, duration, start)
        expected = sum(pt.rate * min(part.window, part.span - pt.t) for pt in part.curve if pt.t < part.span)
        if at_most is not None and expected > at_most:
            raise TraceError(
                f"{p}: {_length(part.span)} of it at --rate-scale {rate_scale:g} is about {expected:,.0f} requests; "
                f"a replay held in memory may hold {at_most:,}: give a shorter --duration or a smaller --rate-scale"
            )
        return _servegen_requests(part.curve, part.window, part.span, seed, first=part.first), part.span
    arrays, span = _request_trace(p, kind, time_scale)
    _check_copies(p, len(arrays), rate_scale)
    _check_peak(p, _busiest_minute(arrays, span), rate_scale, time_scale, "minute")
    if start > 0 and start >= span:
        raise _past_end(p, start, span)
    # a second past the end: `_cut` draws the line itself, on the axis that begins at `start`
    kept = (start, math.inf if duration is None else start + duration + 1.0)
    arrays = _rescale_rate(arrays, span, rate_scale, seed, kept)
    arrays, span = _cut(p, arrays, span, start, duration)
    return iter([arrays]), span


def load_rate_curve(
    path: str | Path,
    fmt: str | None = None,
    rate_scale: float = 1.0,
    time_scale: float = 1.0,
    duration: float | None = None,
    window: float = 60.0,
    *,
    start: float = 0.0,
) -> list[RatePoint]:
    """The expected request rate over time, for aggregate simulation. ServeGen keeps its own windows
    (gaps filled); a request trace is binned into `window`-second bins of its time-scaled arrivals,
    with the rate multiplied by `rate_scale` (the expectation of the seeded thinning/replication)."""
    p = Path(path)
    kind = _checked_curve(p, fmt, rate_scale, time_scale, duration, window, start)
    if kind == "servegen":
        part = _servegen_part(p, rate_scale, time_scale, duration, start)
        return [pt for pt in part.curve if pt.t < part.span]
    arrays, span = _replayed_part(p, kind, rate_scale, time_scale, duration, start)
    return [pt._replace(rate=pt.rate * rate_scale) for pt in _bin(arrays, span, window)]


def load_request_curve(
    path: str | Path,
    fmt: str | None = None,
    rate_scale: float = 1.0,
    time_scale: float = 1.0,
    duration: float | None = None,
    window: float = 60.0,
    *,
    start: float = 0.0,
) -> tuple[list[RatePoint], float]:
    """A request trace's expected rate over [start, start + duration) in `window`-second windows, and the time
    it covers: the fluid mode's and `plan --trace`'s curve. Each window's requests are counted over the time
    it covers of that range, not over a whole window, so that a trace compressed into less than a window, or
    cut inside one, keeps its rate. The last window runs to the range's end, half a window to one and a half
    long: a shorter part-window is joined to the one before, since the trace's last request sits at its very
    end and a tail of a second would make that one request a peak. (`load_rate_curve` keeps whole-window
    bins: the benchmark's rate scale is set on them.)"""
    p = Path(path)
    kind = _checked_curve(p, fmt, rate_scale, time_scale, duration, window, start)
    if kind == "servegen":
        raise TraceError(f"{p}: a ServeGen curve keeps its own windows: use load_rate_curve")
    arrays, span = _replayed_part(p, kind, rate_scale, time_scale, duration, start)
    # requests at one instant cover no time: they are counted over one window, as a rate needs some
    covered = span if span > 0 else window
    n = max(1, math.floor(covered / window + 0.5))
    idx = np.minimum((arrays.arrival // window).astype(np.int64), n - 1)
    lengths = np.full(n, window)
    lengths[-1] = covered - (n - 1) * window
    curve = [pt._replace(rate=pt.rate * rate_scale) for pt in _points(arrays, idx, lengths, window)]
    # a window cut short can be busier than any whole minute of the trace
    _check_peak(p, max(pt.rate for pt in curve) / rate_scale, rate_scale, time_scale, "minute")
    return curve, covered


TAIL_FLOOR = 1.0  # seconds: the least a trace's last part-window is counted over


def rate_curve(trace: Trace, window: float) -> list[RatePoint]:
    """A trace's request rate and mean token lengths per `window`-second bin, from its start to its end."""
    if window <= 0:
        raise ValueError(f"window must be > 0 seconds, got {window}")
    reqs = trace.requests
    arrays = RequestArrays(
        np.fromiter((r.arrival for r in reqs), np.float64, len(reqs)),
        np.fromiter((r.input_tokens for r in reqs), np.int64, len(reqs)),
        np.fromiter((r.output_tokens for r in reqs), np.int64, len(reqs)),
    )
    # The last bin is the part of a window the trace covers, counted over that part: over a whole window, a
    # 2-s tail read as 3% of its load. It keeps a bin of its own (joined to the window before, a light tail
    # lowered the need of a busy last minute: the oracle's Azure replay lost 0.5 point), counted over at
    # least a second: the trace ends on an arrival, and a tail of a millisecond would make it a peak.
    idx, n = _bin_index(arrays, trace.duration, window)
    lengths = np.full(n, window)
    lengths[-1] = min(window, max(trace.duration - (n - 1) * window, TAIL_FLOOR))
    return _points(arrays, idx, lengths, window)


def _bin_index(arrays: RequestArrays, span: float, window: float) -> tuple[npt.NDArray[np.int64], int]:
    """Each request's `window`-second bin, and the number of bins (the last arrival falls in the last)."""
    n_bins = max(1, math.ceil(span / window))
    return np.minimum((arrays.arrival // window).astype(np.int64), n_bins - 1), n_bins


def _busiest_minute(arrays: RequestArrays, span: float) -> float:
    """Requests/s in the busiest of the one-minute bins `load_rate_curve` gives."""
    idx, n_bins = _bin_index(arrays, span, 60.0)
    return float(np.bincount(idx, minlength=n_bins).max()) / 60.0


def _bin(arrays: RequestArrays, span: float, window: float) -> list[RatePoint]:
    idx, n_bins = _bin_index(arrays, span, window)
    return _points(arrays, idx, np.full(n_bins, window), window)


def _points(
    arrays: RequestArrays, idx: npt.NDArray[np.int64], lengths: npt.NDArray[np.float64], window: float
) -> list[RatePoint]:
    """Window k (its requests those of index k) at k x `window`: its requests over its length, and their
    mean lengths."""
    n = len(lengths)
    counts = np.bincount(idx, minlength=n)
    sum_in = np.bincount(idx, weights=arrays.input_tokens, minlength=n)
    sum_out = np.bincount(idx, weights=arrays.output_tokens, minlength=n)
    points = []
    for k in range(n):
        c = int(counts[k])
        points.append(
            RatePoint(
                k * window,
                c / float(lengths[k]),
                float(sum_in[k] / c) if c else None,
                float(sum_out[k] / c) if c else None,
            )
        )
    return points


def _checked_curve(
    p: Path, fmt: str | None, rate_scale: float, time_scale: float, duration: float | None, window: float, start: float
) -> str:
    """The trace's format, once the arguments of a rate curve are checked."""
    _check_scales(p, rate_scale, time_scale, duration, start)
    if window <= 0:
        raise TraceError(f"{p}: window must be > 0 seconds, got {window}")
    return resolve_format(p, fmt)


def _replayed_part(
    p: Path, kind: str, rate_scale: float, time_scale: float, duration: float | None, start: float
) -> tuple[RequestArrays, float]:
    """A request trace's requests from `start` for `duration` and the span they cover, once its busiest minute
    is checked at this scale."""
    arrays, span = _request_trace(p, kind, time_scale)
    _check_peak(p, _busiest_minute(arrays, span), rate_scale, time_scale, "minute")
    return _cut(p, arrays, span, start, duration)


def _cut(
    path: Path, arrays: RequestArrays, span: float, start: float, duration: float | None
) -> tuple[RequestArrays, float]:
    """The requests of [start, start + duration), on a time axis that begins at `start`."""
    if start > 0:
        if start >= span:
            raise _past_end(path, start, span)
        keep = arrays.arrival >= start
        arrays = RequestArrays(arrays.arrival[keep] - start, arrays.input_tokens[keep], arrays.output_tokens[keep])
        span -= start
    if duration is not None:
        keep = arrays.arrival < duration
        arrays = RequestArrays(arrays.arrival[keep], arrays.input_tokens[keep], arrays.output_tokens[keep])
        span = min(span, duration)
    return arrays, span


class _ServegenPart(NamedTuple):
    curve: list[RatePoint]  # the windows from `start` on, `start` at time 0
    window: float  # seconds, on the scaled axis
    span: float  # what the windows cover, up to `duration`
    first: int  # the place of curve[0] in the file, which keys each window's random stream


def _servegen_part(
    path: Path, rate_scale: float, time_scale: float, duration: float | None, start: float
) -> _ServegenPart:
    """The part of a ServeGen curve a replay covers, gaps filled, on the scaled axis."""
    whole, win = _servegen_curve(path, rate_scale, time_scale)
    curve = _servegen_from(path, whole, win, start)
    span = len(curve) * win if duration is None else min(duration, len(curve) * win)
    return _ServegenPart(curve, win, span, len(whole) - len(curve))


def _servegen_from(path: Path, curve: list[RatePoint], win: float, start: float) -> list[RatePoint]:
    """The windows from `start` on, moved so that `start` is time 0. A start inside a window would
    replay part of it as if it were the whole, so it must fall on a boundary (within a millisecond,
    so that a boundary printed to the millisecond, as the message below does, is accepted)."""
    if start == 0:
        return curve
    end = len(curve) * win
    if start >= end - START_TOLERANCE:
        raise _past_end(path, start, end)
    first = round(start / win)
    if abs(first * win - start) > START_TOLERANCE:
        below = math.floor(start / win) * win
        raise TraceError(
            f"{path}: --start {_exact(start)} falls inside a ServeGen window; windows are {_exact(win)} long on "
            f"the replay's time axis, and the nearest boundaries are {_exact(below)} and {_exact(below + win)}"
        )
    return [pt._replace(t=pt.t - curve[first].t) for pt in curve[first:]]


def _past_end(path: Path, start: float, end: float) -> TraceError:
    return TraceError(f"{path}: --start {_exact(start)} is at or past the trace's end ({_exact(end)} in)")


def _exact(seconds: float) -> str:
    """A duration as --start takes it, exact to the millisecond: '2h5m', or '1818.182s' where minutes
    and whole seconds would round it."""
    text = format_duration(seconds) if seconds else "0s"
    if abs(parse_duration(text) - seconds) <= START_TOLERANCE:
        return text
    return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def _check_scales(path: Path, rate_scale: float, time_scale: float, duration: float | None, start: float = 0.0) -> None:
    if not (math.isfinite(start) and start >= 0):
        raise TraceError(f"{path}: start must be a finite number of seconds >= 0, got {start}")
    if not (math.isfinite(rate_scale) and rate_scale > 0):
        raise TraceError(f"{path}: rate_scale must be a finite number > 0, got {rate_scale}")
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise TraceError(f"{path}: time_scale must be a finite number > 0, got {time_scale}")
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise TraceError(f"{path}: duration must be a finite number of seconds > 0, got {duration}")


def _request_trace(path: Path, kind: str, time_scale: float) -> tuple[RequestArrays, float]:
    if kind == "azure":
        arrival, inp, out = _read_azure(path)
    elif kind == "mooncake":
        arrival, inp, out = _read_mooncake(path)
    else:
        raise TraceError(f"{path}: unknown trace format {kind!r}; known: {', '.join(TRACE_FORMATS)}")
    if not arrival:
        raise TraceError(f"{path}: the trace holds no request")
    t = np.asarray(arrival, np.float64)
    order = np.argsort(t, kind="stable")
    t = t[order] - t[order[0]]
    _check_stretch(path, float(t[-1]), time_scale)
    t /= time_scale
    arrays = RequestArrays(t, np.asarray(inp, np.int64)[order], np.asarray(out, np.int64)[order])
    return arrays, float(t[-1])


def _check_stretch(path: Path, span: float, time_scale: float) -> None:
    # Checked before anything is built on the scaled axis: 1e-9 would ask for billions of rate bins. (The
    # span as read is bounded by the readers.)
    if time_scale < 1 and span / time_scale > MAX_SPAN:
        raise TraceError(
            f"{path}: --time-scale {time_scale:g} stretches the trace's {_length(span)} to "
            f"{_length(span / time_scale)}; a replay may cover at most {_length(MAX_SPAN)}"
        )


def _check_copies(path: Path, n: int, rate_scale: float) -> None:
    if n * rate_scale > MAX_REQUESTS:
        raise TraceError(
            f"{path}: --rate-scale {rate_scale:g} makes its {n:,} requests {n * rate_scale:,.0f}; "
            f"a request trace held in memory may grow to {MAX_REQUESTS:,}"
        )


def _check_peak(path: Path, peak: float, rate_scale: float, time_scale: float, window: str) -> None:
    """`peak`: requests/s of the busiest `window` on the time-scaled axis, before `rate_scale`."""
    if peak * rate_scale <= MAX_RATE:
        return
    # a request trace's rate grows with --time-scale too: name the flags that set it
    flags = [
        f"--{name} {value:g}" for name, value in (("time-scale", time_scale), ("rate-scale", rate_scale)) if value != 1
    ]
    flags = flags or [f"--rate-scale {rate_scale:g}"]
    raise TraceError(
        f"{path}: {' and '.join(flags)} take{'' if len(flags) > 1 else 's'} the busiest {window} to "
        f"{peak * rate_scale:g} requests/s; at most {MAX_RATE:g}"
    )


COPY_BATCH = 1 << 20  # copies made at a time


def _rescale_rate(
    arrays: RequestArrays, span: float, rate_scale: float, seed: int, kept: tuple[float, float] = (0.0, math.inf)
) -> RequestArrays:
    """Each request copied `rate_scale` times on average, in arrival order; only the copies arriving within
    `kept` are held, and the trace is copied a batch at a time: a minute of a day's trace at
    --rate-scale 10000 would otherwise hold the day's copies, gigabytes of them. The random draws are those
    of copying it whole at once, so a later window is the whole replay's, request for request."""
    if rate_scale == 1.0:
        return arrays
    n = len(arrays)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7A7E]))
    copies = math.floor(rate_scale) + (rng.random(n) < rate_scale - math.floor(rate_scale))
    parts: list[tuple[np.ndarray, np.ndarray]] = []  # (arrival, source) of the copies kept
    batch = max(1, math.floor(COPY_BATCH / rate_scale))  # requests of the trace
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        src = np.repeat(np.arange(lo, hi), copies[lo:hi])
        # The first copy of a request keeps its time; later copies are shifted, reflected at the ends.
        first = np.ones(src.size, dtype=bool)
        first[1:] = src[1:] != src[:-1]
        offset = np.where(first, 0.0, (rng.random(src.size) - 0.5) * COPY_JITTER)
        arrival = np.abs(arrays.arrival[src] + offset)
        arrival = np.clip(np.where(arrival > span, 2 * span - arrival, arrival), 0.0, span)
        within = (arrival >= kept[0]) & (arrival < kept[1])
        parts.append((arrival[within], src[within]))
    arrival = np.concatenate([a for a, _ in parts])
    src = np.concatenate([i for _, i in parts])
    order = np.argsort(arrival, kind="stable")
    return RequestArrays(arrival[order], arrays.input_tokens[src][order], arrays.output_tokens[src][order])


def _read_azure(path: Path) -> tuple[list[float], list[int], list[int]]:
    arrival: list[float] = []
    lines: array[int] = array("q")  # of each row, for errors found once the column is read
    inp: list[int] = []
    out: list[int] = []
    # Seconds from the first day seen: absolute epoch seconds would cost float precision.
    epoch_days: dict[str, float] = {}
    first_day: int | None = None
    with _open(path) as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[:3]) != AZURE_HEADER:
            raise TraceError(
                f"{path}:1: expected header {','.join(AZURE_HEADER)}, got {_quote(','.join(header or []))}"
            )
        for row in reader:
            line = reader.line_num
            if not row:
                continue
            if len(row) < 3:
                raise TraceError(f"{path}:{line}: expected 3 columns, got {len(row)}: {_quote(','.join(row))}")
            m = _TIMESTAMP.match(row[0].strip())
            if m is None:
                raise TraceError(f"{path}:{line}: TIMESTAMP {row[0]!r} is not 'YYYY-MM-DD HH:MM:SS[.fraction]'")
            day = m.group(1)
            if day not in epoch_days:
                try:
                    ordinal = dt.date.fromisoformat(day).toordinal()
                    first_day = ordinal if first_day is None else first_day
                    epoch_days[day] = (ordinal - first_day) * 86400.0
                except ValueError as e:
                    raise TraceError(f"{path}:{line}: TIMESTAMP {row[0]!r}: {e}") from None
            hh, mm, ss = int(m.group(2)), int(m.group(3)), float(m.group(4))
            if hh > 23 or mm > 59 or ss >= 61:
                raise TraceError(f"{path}:{line}: TIMESTAMP {row[0]!r} has an impossible time of day")
            arrival.append(epoch_days[day] + hh * 3600 + mm * 60 + ss)
            lines.append(line)
            inp.append(_tokens(path, line, "ContextTokens", row[1], minimum=0))
            out.append(_tokens(path, line, "GeneratedTokens", row[2], minimum=1))
    _check_order(path, arrival, lines)
    return arrival, inp, out


def _read_mooncake(path: Path) -> tuple[list[float], list[int], list[int]]:
    arrival: list[float] = []
    lines: array[int] = array("q")
    inp: list[int] = []
    out: list[int] = []
    with _open(path) as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}:{line}: not valid JSON: {e.msg} at column {e.colno}") from None
            except ValueError:  # json refuses integers of thousands of digits
                raise TraceError(f"{path}:{line}: a number has too many digits") from None
            except RecursionError:  # json's parser recurses once per nested array or object
                raise TraceError(f"{path}:{line}: not valid JSON: nested too deeply") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
            for key in ("timestamp", "input_length", "output_length"):
                if key not in obj:
                    raise TraceError(f"{path}:{line}: missing field {key!r}")
            ts = obj["timestamp"]
            seconds = _milliseconds(ts) / 1000.0
            if not math.isfinite(seconds) or seconds < 0:
                raise TraceError(f"{path}:{line}: timestamp must be a number of ms >= 0, got {str(ts)[:40]}")
            arrival.append(seconds)
            lines.append(line)
            inp.append(_tokens(path, line, "input_length", obj["input_length"], minimum=0))
            out.append(_tokens(path, line, "output_length", obj["output_length"], minimum=1))
    _check_order(path, arrival, lines)
    return arrival, inp, out


def _milliseconds(value: object) -> float:
    """A JSON timestamp as a float; NaN when it is not a number (true is not 1), infinite past a float's range
    (JSON's integers have as many digits as they are written with)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _check_order(path: Path, times: list[float], lines: array[int]) -> None:
    """Each row at most MAX_DISORDER before the latest above it, and within MAX_SPAN of the first. On
    the whole column at the end: a check per row would slow the reading of traces of millions."""
    if not times:
        return
    t = np.asarray(times, np.float64)
    latest = np.maximum.accumulate(t)
    back = np.flatnonzero(latest - t > MAX_DISORDER)
    # Rows before the first one too far back are within MAX_DISORDER of the first row or after it.
    far = np.flatnonzero(t - t[0] > MAX_SPAN)
    if far.size and (not back.size or far[0] < back[0]):
        i = int(far[0])
        raise TraceError(
            f"{path}:{lines[i]}: arrives {_length(t[i] - t[0])} after the first request (line {lines[0]}): "
            f"{_row(path, lines[i])}; a trace may cover at most {_length(MAX_SPAN)}"
        )
    if back.size:
        i = int(back[0])
        j = int(np.argmax(t[: i + 1] == latest[i]))
        raise TraceError(
            f"{path}:{lines[i]}: arrives {_length(latest[i] - t[i])} before line {lines[j]}, above it: "
            f"{_row(path, lines[i])} after {_row(path, lines[j])}; rows must be in time order "
            f"(up to {MAX_DISORDER:g} s of disorder is re-sorted)"
        )


def _row(path: Path, line: int) -> str:
    """Line `line` of the file, quoted; read again only for an error message."""
    with _open(path) as f:
        for n, text in enumerate(f, start=1):
            if n == line:
                return _quote(text.strip())
    return "''"


def _tokens(path: Path, line: int, field: str, raw: object, minimum: int) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif isinstance(raw, str):
        text = raw.strip()
        if text.isdigit() and text.isascii():  # isdigit alone takes '²', which int() refuses
            # int() refuses thousands of digits; past 20 the number is too large whatever it is
            value = int(text) if len(text) <= 20 else MAX_TOKENS + 1
        elif text[:1] == "-" and text[1:].isdigit():
            value = -1  # below any minimum, whatever its size
    if value is None or value < minimum:
        raise TraceError(f"{path}:{line}: {field} must be an integer >= {minimum}, got {_shown(raw)}")
    if value > MAX_TOKENS:
        raise TraceError(f"{path}:{line}: {field} too large ({_shown(raw)}); at most {MAX_TOKENS:,} tokens")
    return value


def _servegen_curve(path: Path, rate_scale: float, time_scale: float) -> tuple[list[RatePoint], float]:
    """Windows with gaps filled, on the scaled axis, and the scaled window length."""
    starts: list[float] = []
    rates: list[float] = []
    ins: list[float | None] = []
    outs: list[float | None] = []
    with _open(path) as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        twice = sorted({c for c in header if header.count(c) > 1})
        if twice:
            raise TraceError(f"{path}:1: column(s) {', '.join(map(repr, twice))} appear more than once in the header")
        missing = [c for c in SERVEGEN_COLUMNS if c not in header]
        if missing:
            raise TraceError(f"{path}:1: ServeGen header lacks column(s) {', '.join(missing)}")
        for row in reader:
            line = reader.line_num
            if None in row.values():  # DictReader fills a short row's missing columns with None
                given = sum(v is not None for k, v in row.items() if k is not None)
                raise TraceError(f"{path}:{line}: expected {len(header)} columns as in the header, got {given}")
            start = _number(path, line, "window_start_s", row["window_start_s"])
            rate = _number(path, line, "total_rate_rps", row["total_rate_rps"])
            if start is None:
                raise TraceError(f"{path}:{line}: window_start_s must be a number, got {_shown(row['window_start_s'])}")
            if rate is None or rate < 0:
                raise TraceError(
                    f"{path}:{line}: total_rate_rps must be a number >= 0, got {_shown(row['total_rate_rps'])}"
                )
            if rate > MAX_RATE:
                raise TraceError(f"{path}:{line}: total_rate_rps too large ({rate:g}); at most {MAX_RATE:g} requests/s")
            if starts and start <= starts[-1]:
                raise TraceError(f"{path}:{line}: window_start_s {start} does not increase")
            if starts and start - starts[0] > MAX_SPAN:
                raise TraceError(
                    f"{path}:{line}: window_start_s {start} is {_length(start - starts[0])} after the first "
                    f"window's; a trace may cover at most {_length(MAX_SPAN)}"
                )
            starts.append(start)
            rates.append(rate)
            valid = rate > 0
            ins.append(_token_mean(path, line, "mean_input_tokens", row["mean_input_tokens"], valid))
            outs.append(_token_mean(path, line, "mean_output_tokens", row["mean_output_tokens"], valid))
    if not starts:
        raise TraceError(f"{path}: the rate curve holds no window")
    if len(starts) > 1:
        steps = np.diff(np.asarray(starts))
        if not np.allclose(steps, steps[0]):
            bad = int(np.argmax(~np.isclose(steps, steps[0])))
            raise TraceError(
                f"{path}:{bad + 3}: windows must be evenly spaced ({steps[0]} s), found a {steps[bad]} s step"
            )
        window = float(steps[0])
    else:
        window = 600.0
    _check_stretch(path, starts[-1] - starts[0] + window, time_scale)
    for i in _partly_collected(rates, window):
        rates[i], ins[i], outs[i] = 0.0, None, None
    rate_filled = _fill_gaps(path, "total_rate_rps", [r if r > 0 else None for r in rates])
    in_filled = _fill_gaps(path, "mean_input_tokens", ins)
    out_filled = _fill_gaps(path, "mean_output_tokens", outs)
    # a ServeGen window keeps its rate under --time-scale: only --rate-scale moves it
    _check_peak(path, max(rate_filled), rate_scale, 1.0, "window")
    win = window / time_scale
    curve = [
        RatePoint((s - starts[0]) / time_scale, r * rate_scale, i, o)
        for s, r, i, o in zip(starts, rate_filled, in_filled, out_filled, strict=True)
    ]
    return curve, win


def _partly_collected(rates: list[float], window: float) -> list[int]:
    """The windows beside a gap whose rate is under `PARTIAL_SHARE` of the window's on their other side. Not one
    with less than a request in it: that is a window in which nothing arrived (`export-trace` writes it at
    0.000001 req/s, as 0 is a gap), and a part of a window collected without a request in it is a gap already."""
    return [
        i
        for i in range(1, len(rates) - 1)
        if rates[i] * window >= 1
        and any(
            rates[gap] == 0 and rates[i] < PARTIAL_SHARE * rates[other]
            for gap, other in ((i - 1, i + 1), (i + 1, i - 1))
        )
    ]


def _fill_gaps(path: Path, column: str, values: list[float | None]) -> list[float]:
    known = np.array([v is not None for v in values])
    if not known.any():
        raise TraceError(f"{path}: every window lacks {column} (all are collection gaps)")
    x = np.arange(len(values), dtype=np.float64)
    y = np.array([v if v is not None else np.nan for v in values], dtype=np.float64)
    # np.interp carries the first/last known value beyond the ends.
    filled = np.interp(x, x[known], y[known])
    return [float(v) for v in filled]


def _token_mean(path: Path, line: int, column: str, raw: str | None, valid: bool) -> float | None:
    """A window's mean token count, or None when unknown (a gap, or an empty or zero field)."""
    mean = _number(path, line, column, raw)
    if mean is not None and mean < 0:
        raise TraceError(f"{path}:{line}: {column} must be >= 0 (empty or 0: unknown), got {raw!r}")
    if mean is not None and mean > MAX_TOKENS:
        raise TraceError(f"{path}:{line}: {column} too large ({raw!r}); at most {MAX_TOKENS:,} tokens")
    return mean if valid and mean is not None and mean > 0 else None


def _number(path: Path, line: int, column: str, raw: str | None) -> float | None:
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(f"{path}:{line}: {column} {raw!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(f"{path}:{line}: {column} {raw!r} is not finite")
    return value


def _servegen_requests(
    curve: list[RatePoint], win: float, span: float, seed: int, first: int = 0
) -> Iterator[RequestArrays]:
    """`first`: the place of curve[0] in the file, which keys each window's random stream. A window the span
    cuts is drawn whole and cut, so that a shorter replay is the start of a longer one with the same seed."""
    for i, pt in enumerate(curve, start=first):
        if pt.t >= span:
            return
        rng = np.random.default_rng(np.random.SeedSequence([seed, i]))
        n = int(rng.poisson(pt.rate * win))
        arrival = pt.t + np.sort(rng.random(n)) * win
        assert pt.mean_input is not None and pt.mean_output is not None  # gaps are filled
        inp = _lognormal_tokens(rng, pt.mean_input, INPUT_SIGMA, n, minimum=1)
        out = _lognormal_tokens(rng, pt.mean_output, OUTPUT_SIGMA, n, minimum=1)
        kept = int(np.searchsorted(arrival, span))
        yield RequestArrays(arrival[:kept], inp[:kept], out[:kept])


def _lognormal_tokens(
    rng: np.random.Generator, mean: float, sigma: float, n: int, minimum: int
) -> npt.NDArray[np.int64]:
    mu = math.log(mean) - sigma * sigma / 2  # so that E[X] = mean
    return np.maximum(np.rint(rng.lognormal(mu, sigma, n)), minimum).astype(np.int64)


def _empty() -> RequestArrays:
    return RequestArrays(np.empty(0, np.float64), np.empty(0, np.int64), np.empty(0, np.int64))


@contextmanager
def _open(path: Path) -> Iterator[TextIO]:
    try:
        # utf-8-sig drops the byte-order mark Excel and Notepad put before a CSV's header.
        f = path.open(encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such trace file") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace file: {e.strerror}") from None
    with f:
        try:
            yield f
        except UnicodeDecodeError as e:
            raise TraceError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except csv.Error as e:
            raise TraceError(f"{path}: malformed CSV: {e}") from None


def _clip(text: str) -> str:
    return text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 1] + "…"


def _quote(text: str) -> str:
    return repr(_clip(text))


def _shown(raw: object) -> str:
    return _clip(repr(raw))


def _length(seconds: float) -> str:
    """A span as people read one: '45 s', '3.5 hours', '1 day', '31,710 years', '3.17e+289 years'."""
    # Seconds up to two minutes, so that 60.01 s reads as more than the 60 s of disorder allowed.
    for unit, size, above in (
        ("years", 365 * 86400.0, 1.0),
        ("days", 86400.0, 1.0),
        ("hours", 3600.0, 1.0),
        ("minutes", 60.0, 2.0),
    ):
        if seconds >= size * above:
            v = seconds / size
            text = f"{v:,.0f}" if 100 <= v < 1e6 else f"{v:.3g}"
            return f"{text} {unit[:-1] if text == '1' else unit}"
    return f"{seconds:.4g} s"


def _first_line(path: Path) -> str:
    with _open(path) as f:
        for text in f:
            if text.strip():
                return text.strip()
    raise TraceError(f"{path}: the file is empty")
