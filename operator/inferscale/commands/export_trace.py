"""`inferscale export-trace`: a service's own traffic, read back from Prometheus, as a rate curve that `simulate`,
`tune` and `plan --trace` replay, so a user can try the policies on the traffic they would run them on.

The curve is the ServeGen aggregate format (`window_start_s,total_rate_rps,mean_input_tokens,mean_output_tokens`):
per window, the requests that arrived per second and the mean prompt and output lengths of those that finished,
from the engines' own counters and gauges. Arrivals, not completions: a window in which the fleet fell behind
finished fewer requests than came, and the difference is what its waiting and running requests grew by (every
request that came either finished, aborted ones included, or is still in flight). `simulate` turns each window
into requests by a seeded Poisson process, as it does ServeGen's.
"""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import io
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferscale.commands import checks
from inferscale.commands.prometheus_options import (
    BearerTokenFileOpt,
    CaFileOpt,
    HeaderOpt,
    PasswordFileOpt,
    PrometheusUrlOpt,
    UsernameOpt,
)
from inferscale.scaling.durations import format_duration
from inferscale.scaling.types import PROMPT_TOKENS

if TYPE_CHECKING:
    from inferscale.adapters.prometheus import PrometheusReader

# kept in step with adapters.prometheus.IN_FLIGHT, which this module does not import at start-up (the CLI's
# import time); checked by the tests
IN_FLIGHT = "in_flight"
# arrivals over this share above completions: the fleet fell behind in that window
BEHIND = 1.01
# the rate written for a window in which nothing arrived: ServeGen's 0 means a gap, which the loader fills from
# the windows beside it (an idle night would replay as busy); this draws a request in a 10-minute window once
# in about 1,700
IDLE_RATE = 1e-6

# Prometheus refuses a range query of more than 11,000 points per series
MAX_STEPS = 10_000
# a rate needs two samples in its window: a window under a minute reads nothing at a 30 s scrape interval
MAX_WINDOWS = 525_600  # a year of one-minute windows: each a row, read through queries of MAX_STEPS points
MIN_WINDOW = 60.0
COLUMNS = ("window_start_s", "total_rate_rps", "mean_input_tokens", "mean_output_tokens")
_ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}

Points = dict[float, float]  # window end (Unix seconds) -> per-second rate over the window


@dataclass(frozen=True)
class Window:
    start: float  # Unix seconds
    finished: float | None  # requests/s finished; None: Prometheus holds no sample for the window
    growth: float | None  # requests/s the waiting and running requests grew by; None without both counts
    input_tokens: float | None  # mean prompt tokens per request finished; None when unknown
    output_tokens: float | None

    @property
    def rate(self) -> float | None:
        """Requests/s that arrived: every request that came either finished (aborted ones included) or is still
        in flight. Without the in-flight counts, the completions, which a fleet that kept up equals."""
        if self.finished is None or self.growth is None:
            return self.finished
        return max(0.0, self.finished + self.growth)


@dataclass(frozen=True)
class Traffic:
    """One service's counters as range answers, each family's dialects added."""

    namespace: str
    model_name: str
    engines: tuple[str, ...]
    requests: Points
    prompt_tokens: Points
    generation_tokens: Points
    in_flight: Points  # evaluation time -> requests waiting and running (a level, not a rate)


def window_grid(until: float, since: float, window: float) -> tuple[float, float]:
    """The first window's start and the last one's end, on multiples of `window` (Unix time), covering at most
    `since` before `until`."""
    end = math.floor(until / window) * window
    count = max(1, math.floor(since / window))
    return end - count * window, end


def chunks(start: float, end: float, window: float) -> list[tuple[float, float]]:
    """Evaluation times (first, last) of range queries of at most MAX_STEPS points, one per window end."""
    out: list[tuple[float, float]] = []
    first = start + window
    while first <= end:
        last = min(end, first + (MAX_STEPS - 1) * window)
        out.append((first, last))
        first = last + window
    return out


def windows(traffic: Traffic, start: float, end: float, window: float) -> list[Window]:
    """The service's windows in order. A rate evaluated at t covers (t - window, t], so it is the window that
    ends at t."""
    out: list[Window] = []
    steps = round((end - start) / window)
    for k in range(1, steps + 1):
        at = start + k * window
        finished = traffic.requests.get(at)
        prompt, generation = traffic.prompt_tokens.get(at), traffic.generation_tokens.get(at)
        # the lengths of a window in which nothing finished: unknown
        served = finished if finished is not None and finished > 0 else None
        before, after = traffic.in_flight.get(at - window), traffic.in_flight.get(at)
        out.append(
            Window(
                at - window,
                finished,
                None if before is None or after is None else (after - before) / window,
                prompt / served if served and prompt is not None else None,
                generation / served if served and generation is not None else None,
            )
        )
    return out


def rows(series: Sequence[Window]) -> list[dict[str, str]]:
    """CSV rows in the ServeGen format. A window without a sample is written as rate 0, which the loader takes
    for a collection gap and fills from its neighbours (ServeGen's convention); a window known to be idle as
    IDLE_RATE, so that it replays idle rather than filled; unknown lengths are empty."""
    first = series[0].start if series else 0.0
    out = []
    for w in series:
        rate = 0.0 if w.rate is None else max(w.rate, IDLE_RATE)
        out.append(
            {
                "window_start_s": f"{w.start - first:g}",
                "total_rate_rps": f"{rate:.6f}",
                "mean_input_tokens": "" if w.input_tokens is None else f"{w.input_tokens:.1f}",
                "mean_output_tokens": "" if w.output_tokens is None else f"{w.output_tokens:.1f}",
            }
        )
    return out


def to_csv(series: Sequence[Window]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows(series))
    return buffer.getvalue()


def pick_service(
    answers: Mapping[str, Sequence[tuple[dict[str, str], list[tuple[float, float]]]]],
    namespace: str,
    model_name: str | None,
) -> Traffic:
    """The one service the answers hold, its dialects added; several model names without --model, or none, is
    an InputError that names what there is."""
    models = sorted({labels.get("model_name", "") for labels, _ in answers["requests"]})
    if not models:
        who = f"namespace {namespace!r}" + (f", model_name {model_name!r}" if model_name else "")
        raise checks.InputError(
            f"Prometheus holds no request counter (vllm:request_success_total, sglang:num_requests_total) for "
            f"{who} in that time: check --namespace, --model and --deployment, and that Prometheus scrapes the pods "
            "with namespace and pod labels"
        )
    if len(models) > 1:
        raise checks.InputError(
            f"namespace {namespace!r} serves {len(models)} models ({', '.join(map(repr, models))}): "
            "pick one with --model"
        )

    def added(name: str) -> Points:
        points: Points = {}
        for _, values in answers[name]:
            for at, v in values:
                points[at] = points.get(at, 0.0) + v
        return points

    engines = tuple(sorted({labels.get("dialect", "vllm") for labels, _ in answers["requests"]}))
    return Traffic(
        namespace,
        models[0],
        engines,
        added("requests"),
        added(PROMPT_TOKENS),
        added("generation_tokens"),
        added(IN_FLIGHT),
    )


def summary(traffic: Traffic, series: Sequence[Window], window: float, out: str) -> str:
    known = [w.rate for w in series if w.rate is not None]
    gaps = len(series) - len(known)
    first = dt.datetime.fromtimestamp(series[0].start, dt.UTC).strftime("%Y-%m-%d %H:%M")
    last = dt.datetime.fromtimestamp(series[-1].start + window, dt.UTC).strftime("%Y-%m-%d %H:%M")
    engines = " and ".join(_ENGINES.get(e, e) for e in traffic.engines)
    text = (
        f"wrote {len(series)} windows of {format_duration(window)} ({first} to {last} UTC) of {traffic.namespace}/"
        f"{traffic.model_name} ({engines}) to {out}"
    )
    if known:  # the mean of the windows seen: the replay fills a gap from the windows beside it, not with a zero
        text += f": mean {sum(known) / len(known):.2f} req/s, peak {max(known):.2f} req/s arriving"
    behind = [w for w in series if w.rate is not None and w.finished is not None and w.rate > BEHIND * w.finished]
    if behind:
        most = max(behind, key=lambda w: (w.rate or 0.0) - (w.finished or 0.0))
        text += (
            f"; the fleet fell behind in {len(behind)} window(s), finishing as little as {most.finished:.2f} req/s "
            f"of {most.rate:.2f} arriving"
        )
    unknown = sum(1 for w in series if w.finished is not None and w.growth is None)
    if unknown:
        text += f"; {unknown} window(s) without a waiting or running count read as their completions"
    if gaps:
        text += (
            f"; {gaps} window(s) without a sample, written as rate 0, which simulate fills from the windows beside them"
        )
    return text + f"\nreplay it: inferscale simulate --trace {out} --policy inferscale --policy static-peak"


async def _read(
    reader: PrometheusReader, queries: Mapping[str, str], start: float, end: float, window: float
) -> dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]]:
    answers: dict[str, list[tuple[dict[str, str], list[tuple[float, float]]]]] = {name: [] for name in queries}

    async def read(name: str) -> None:
        # from one point before the first window's end: the in-flight count at its start (a window's growth needs
        # both ends); the rates' extra point is of no window and left unread
        for first, last in chunks(start - window, end, window):
            answers[name].extend(await reader.range_query(queries[name], first, last, window))

    await asyncio.gather(*(read(name) for name in queries))
    return answers


def export_trace(
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Namespace of the service's pods.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Write the rate curve (CSV) here.")],
    model: Annotated[
        str | None, typer.Option(help="The engine's model_name label; needed when the namespace serves several.")
    ] = None,
    deployment: Annotated[
        str | None, typer.Option(help="Only the pods of this Deployment (a canary beside its stable fleet).")
    ] = None,
    since: Annotated[
        str, typer.Option(help="How far back to read, e.g. 336h for 14 days (Prometheus keeps 15 days by default).")
    ] = "168h",
    until: Annotated[
        str | None, typer.Option(help="End of the traffic read, RFC 3339 (e.g. 2026-12-01T00:00:00Z); default now.")
    ] = None,
    window: Annotated[
        str, typer.Option(help="Length of each window of the curve, at least 1m; ServeGen's is 10m.")
    ] = "10m",
    prometheus_url: PrometheusUrlOpt = "http://localhost:9090",
    prometheus_bearer_token_file: BearerTokenFileOpt = None,
    prometheus_username: UsernameOpt = None,
    prometheus_password_file: PasswordFileOpt = None,
    prometheus_ca_file: CaFileOpt = None,
    prometheus_header: HeaderOpt = None,
    prometheus_timeout: Annotated[str, typer.Option(help="How long one range query may take.")] = "60s",
) -> None:
    """Export a service's traffic from Prometheus (requests arriving per second and the mean lengths of those
    finished, per window) as a rate curve `simulate`, `tune` and `plan --trace` replay. Arrivals are the
    completions plus the growth of the waiting and running requests, so a window in which the fleet fell
    behind reads what came, not what it served."""
    from inferscale.adapters.prometheus import PrometheusReader, build_traffic_queries
    from inferscale.commands.simulate import input_errors

    with input_errors():
        checks.namespace_name("--namespace", namespace)
        if deployment is not None:
            checks.object_name("--deployment", deployment)
        if model is not None:
            checks.not_blank("--model", model)
        span = checks.positive_duration("--since", since)
        step = checks.positive_duration("--window", window)
        if step < MIN_WINDOW or step != math.floor(step):
            raise checks.InputError(
                f"--window must be whole seconds and at least 1m (a rate needs two scrapes), got {window!r}"
            )
        if step > span:
            raise checks.InputError(f"--window {window} is longer than --since {since}")
        if span < 2 * step:  # the curve's window is the spacing of its rows, which one row does not have
            raise checks.InputError(
                f"--since {since} holds one --window {window}: a curve needs two windows or more to say its window "
                "(one alone is read as ServeGen's 10 minutes); give a longer --since or a shorter --window"
            )
        end_at = _until(until)
        if end_at - span < 0:
            raise checks.InputError(f"--since {since} reaches back before 1970 (Unix time 0)")
        if span / step > MAX_WINDOWS:
            raise checks.InputError(
                f"--since {since} is {span / step:,.0f} windows of --window {window}; at most {MAX_WINDOWS:,} "
                "(a year of 1m windows): give a shorter --since or a longer --window"
            )
        checks.http_url("--prometheus-url", prometheus_url)
        access = checks.prometheus_access(
            prometheus_bearer_token_file,
            prometheus_username,
            prometheus_password_file,
            prometheus_ca_file,
            prometheus_header or [],
        )
        timeout = checks.positive_duration("--prometheus-timeout", prometheus_timeout)
        if str(out) != "-":
            checks.output_file("--out", out)
    start, end = window_grid(end_at, span, step)
    queries = build_traffic_queries(namespace, model, deployment, f"{int(step)}s")
    reader = PrometheusReader(prometheus_url.rstrip("/"), timeout, access)
    try:
        answers = asyncio.run(_read(reader, queries, start, end, step))
    except Exception as e:  # every failure of the server or the network, said in one line
        print(f"error: Prometheus at {prometheus_url}: {reader.describe(e)}", file=sys.stderr)
        raise typer.Exit(2) from None
    finally:
        reader.close()
    with input_errors():
        traffic = pick_service(answers, namespace, model)
    series = windows(traffic, start, end, step)
    text = to_csv(series)
    if str(out) == "-":
        sys.stdout.write(text)
    else:
        out.write_text(text)
    print(summary(traffic, series, step, "stdout" if str(out) == "-" else str(out)), file=sys.stderr)


def _until(text: str | None) -> float:
    if text is None:
        return dt.datetime.now(dt.UTC).timestamp()
    try:
        at = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise checks.InputError(f"--until {text!r} is not an RFC 3339 time, e.g. 2026-12-01T00:00:00Z") from None
    if at.tzinfo is None:
        raise checks.InputError(f"--until {text!r} has no time zone; add Z for UTC")
    return at.timestamp()
