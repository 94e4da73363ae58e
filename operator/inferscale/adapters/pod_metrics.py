"""Engine metrics read from the pods themselves while Prometheus cannot give them (down, or the pods' series
gone): a service that sets `spec.metrics.podPort` is not left blind through the outage.

Each tick of the outage reads every Ready pod's /metrics once and keeps what it read for two minutes, so the
counters become rates between the operator's own reads, as Prometheus's `rate` makes them between its
scrapes: requests and tokens over the last minute, the latency histograms over the last two (`prometheus`'s
windows). The first read of an outage gives the gauges only. What comes out is the FleetSnapshot the
Prometheus adapter builds, so `observe` reads it as it reads Prometheus's; it always names Prometheus among
the failed queries, so no scale-down rests on it: the pods' own figures can show a rise, and Prometheus, once
back, decides the way down.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from inferscale.adapters.observation import KV, RUNNING, WAITING
from inferscale.adapters.prometheus import (
    LATENCY_WINDOW,
    OLD_KV,
    RATE_WINDOW,
    SGLANG,
    SGLANG_GAUGES,
    VLLM,
    FleetSnapshot,
    PodKey,
    PodSeries,
    gauge_family,
    merged_gauge,
    plausible,
)
from inferscale.scaling.durations import parse_duration
from inferscale.scaling.types import CACHED_PROMPT_TOKENS, GENERATION_TOKENS, PROMETHEUS, PROMPT_TOKENS, REQUESTS

RATE_SPAN = parse_duration(RATE_WINDOW)  # the windows the Prometheus adapter's queries read
LATENCY_SPAN = parse_duration(LATENCY_WINDOW)
KEPT = LATENCY_SPAN + 30.0  # a read older than this is of no window
PEAK_SPAN = 60.0  # the KV cache's peak, as max_over_time over 1m
READ_TIMEOUT = 3.0  # one pod's /metrics; a tick reads its service's pods at once
MAX_BYTES = 16 << 20  # an exposition larger than this is not an engine's
# counters -> the rate family they give; the first of a family's names a pod exports is the one read (SGLang
# builds without num_requests_total count requests in the e2e histogram, as the Prometheus adapter reads them)
_RATES: dict[str, tuple[str, ...]] = {
    REQUESTS: (
        "vllm:request_success_total",
        "sglang:num_requests_total",
        "sglang:e2e_request_latency_seconds_count",
    ),
    PROMPT_TOKENS: ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    CACHED_PROMPT_TOKENS: ("vllm:prompt_tokens_cached_total", "sglang:cached_tokens_total"),
    GENERATION_TOKENS: ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
}
_LATENCY: dict[str, tuple[str, ...]] = {
    "itl_sum": (
        "vllm:inter_token_latency_seconds_sum",
        "vllm:time_per_output_token_seconds_sum",
        "sglang:inter_token_latency_seconds_sum",
    ),
    "itl_count": (
        "vllm:inter_token_latency_seconds_count",
        "vllm:time_per_output_token_seconds_count",
        "sglang:inter_token_latency_seconds_count",
    ),
}
_TTFT = ("vllm:time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket")
_TPOT = "vllm:request_time_per_output_token_seconds_bucket"

# the samples read, all others dropped before parsing: a vLLM page carries hundreds (Python's own, every
# histogram's buckets), and a read is kept for two minutes per pod
_WANTED = frozenset(
    {KV, WAITING, RUNNING, OLD_KV, *SGLANG_GAUGES, *_TTFT, _TPOT}
    | {name for names in (*_RATES.values(), *_LATENCY.values()) for name in names}
)
# the families of the wanted samples, as a # TYPE or # HELP line names them (with or without _total)
_FAMILIES = frozenset(n.removesuffix(suffix) for n in _WANTED for suffix in ("", "_total", "_bucket", "_sum", "_count"))
_CHUNK = 1 << 16

Labels = tuple[tuple[str, str], ...]  # sorted
Key = tuple[str, Labels]  # a sample's name and labels
Sample = tuple[str, Labels, float]
_GAUGES = (KV, WAITING, RUNNING)


@dataclass(frozen=True)
class Read:
    at: float
    samples: dict[Key, float]


def relevant(text: str) -> str:
    """The lines of an exposition that carry the samples read (and their families' # lines): parsing the rest
    would cost the event loop milliseconds per pod for nothing."""
    keep = []
    for line in text.splitlines():
        if line.startswith("#"):
            words = line.split(maxsplit=3)
            if len(words) > 2 and words[1] in ("TYPE", "HELP") and words[2] in _FAMILIES:
                keep.append(line)
        elif line.split("{", 1)[0].split(" ", 1)[0] in _WANTED:
            keep.append(line)
    return "\n".join(keep) + "\n"


def parse(text: str) -> list[Sample]:
    """The exposition's samples of the names read that can be what they claim (`prometheus.plausible`).
    Raises ValueError on text that is not Prometheus's format."""
    out: list[Sample] = []
    for family in text_string_to_metric_families(relevant(text)):
        for s in family.samples:
            value = s.value
            if isinstance(value, (int, float)) and math.isfinite(value) and plausible(gauge_family(s.name), value):
                out.append((s.name, tuple(sorted(s.labels.items())), float(s.value)))
    return out


def _dialect(name: str) -> str:
    return SGLANG if name.startswith("sglang:") else VLLM


def _model(labels: Labels) -> str:
    return next((v for k, v in labels if k == "model_name"), "")


def _increase(old: float | None, new: float) -> float:
    """A counter's increase; a value below the last is a restart (the counter began again from 0)."""
    return new if old is None or new < old else new - old


def _base(reads: Sequence[Read], now: float, span: float) -> Read | None:
    """The oldest read within `span` of `now` other than the newest: the start of the window a rate covers."""
    for read in reads[:-1]:
        if now - read.at <= span + 1e-9:
            return read
    return None


def series_of(namespace: str, pod: str, reads: Sequence[Read]) -> list[PodSeries]:
    """What one pod's reads say, per model name, as the Prometheus adapter's queries would have answered: the
    windows end at its newest read."""
    if not reads:
        return []
    last = reads[-1]
    now = last.at
    out: dict[str, PodSeries] = {}

    def series(model: str, name: str) -> PodSeries:
        s = out.get(model)
        if s is None:
            s = out[model] = PodSeries(namespace, pod, model)
        s.dialects.add(_dialect(name))
        return s

    for (name, labels), value in last.samples.items():
        family = gauge_family(name)
        if family in _GAUGES:
            s = series(_model(labels), name)
            prev = s.values.get(family)
            s.values[family] = value if prev is None else merged_gauge(family, prev, value)
    for s in out.values():
        s.values["sample_time"] = last.at
        peaks = [
            v
            for r in reads
            if now - r.at <= PEAK_SPAN + 1e-9
            for (name, labels), v in r.samples.items()
            if gauge_family(name) == KV and _model(labels) == s.model_name
        ]
        if peaks:
            s.values["kv_peak"] = max(peaks)
    keys: dict[tuple[str, str], list[Key]] = {}  # (model, name) -> the samples of that name
    for key in last.samples:
        keys.setdefault((_model(key[1]), key[0]), []).append(key)
    models = {model for model, _ in keys}
    rate_base, latency_base = _base(reads, now, RATE_SPAN), _base(reads, now, LATENCY_SPAN)
    for base, families in ((rate_base, _RATES), (latency_base, _LATENCY)):
        if base is None:
            continue
        seconds = last.at - base.at
        for family, names in families.items():
            for model in models:
                counter = next((n for n in names if (model, n) in keys), None)
                if counter is not None:
                    increase = sum(_increase(base.samples.get(k), last.samples[k]) for k in keys[(model, counter)])
                    series(model, counter).values[family] = increase / seconds
    if latency_base is not None:
        seconds = last.at - latency_base.at
        for (model, name), of_name in keys.items():
            if name not in (*_TTFT, _TPOT):
                continue
            s = series(model, name)
            buckets = s.tpot_buckets if name == _TPOT else s.ttft_buckets
            for key in of_name:
                bound = _bound(dict(key[1]).get("le"))
                if bound is None:
                    continue
                increase = _increase(latency_base.samples.get(key), last.samples[key])
                buckets[bound] = buckets.get(bound, 0.0) + increase / seconds
    return list(out.values())


def _bound(le: str | None) -> float | None:
    """A bucket's upper bound; None for a label that is not a number (the bucket is left out)."""
    if le is None:
        return None
    try:
        bound = float(le)  # "+Inf" too
    except ValueError:
        return None
    return None if math.isnan(bound) else bound


class PodReads:
    """The reads of the pods kept between ticks, and the reading of them. Each read keeps its pod's reads of the
    last window; the operator's loop prunes the pods not read since (`prune`) once a tick."""

    def __init__(self, timeout: float = READ_TIMEOUT) -> None:
        self.timeout = timeout
        self._kept: dict[tuple[str, str], list[Read]] = {}

    def keep(self, namespace: str, pod: str, read: Read) -> None:
        reads = self._kept.setdefault((namespace, pod), [])
        if reads and read.at <= reads[-1].at:
            return
        reads.append(read)
        reads[:] = [r for r in reads if read.at - r.at <= KEPT]

    def kept(self) -> set[tuple[str, str]]:
        """The (namespace, pod) whose reads are kept."""
        return set(self._kept)

    def prune(self, now: float) -> None:
        """Forgets the pods not read for a window: gone, or Prometheus back."""
        self._kept = {k: v for k, v in self._kept.items() if v and now - v[-1].at <= KEPT}

    async def _read(self, session: aiohttp.ClientSession, url: str) -> tuple[str, float]:
        """The whole page (a read of the stream returns what has arrived, which a page sent in several TCP
        segments is not) and the monotonic time it was complete."""
        async with session.get(url) as answer:
            if answer.status != 200:
                raise ValueError(f"HTTP {answer.status}")
            body = bytearray()
            async for chunk in answer.content.iter_chunked(_CHUNK):
                body += chunk
                if len(body) > MAX_BYTES:
                    raise ValueError(f"over {MAX_BYTES >> 20} MiB: not an engine's /metrics")
            return body.decode("utf-8", errors="replace"), time.monotonic()

    async def snapshot(
        self, now: float, targets: Iterable[tuple[str, str, str]], began: float | None = None
    ) -> tuple[FleetSnapshot, list[str]]:
        """Reads each (namespace, pod, url) once and builds the snapshot from what is kept. Returns it and one
        line per pod that did not answer. `now` is the tick's time and `began` its monotonic time (default:
        this call's): a read is timed when its page arrived, so a tick that first waited out a hung Prometheus
        does not make the rate between two reads span the wrong time."""
        targets = list(targets)
        began = time.monotonic() if began is None else began
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            answers = await asyncio.gather(*(self._read(session, url) for _, _, url in targets), return_exceptions=True)
        errors: list[str] = []
        pods: dict[PodKey, PodSeries] = {}
        for (ns, pod, url), answer in zip(targets, answers, strict=True):
            if isinstance(answer, BaseException):
                errors.append(f"{pod}: {_said(answer, self.timeout)}")
                continue
            text, arrived = answer
            try:
                samples = parse(text)
            except Exception as e:  # the parser raises more than ValueError on some malformed lines
                errors.append(f"{pod}: {url} is not a metrics page ({str(e)[:80] or type(e).__name__})")
                continue
            if not samples:
                errors.append(f"{pod}: {url} is not an engine's metrics page (no vLLM or SGLang sample)")
                continue
            at = now + max(0.0, arrived - began)
            self.keep(ns, pod, Read(at, {(name, labels): value for name, labels, value in samples}))
            for s in series_of(ns, pod, self._kept[(ns, pod)]):
                pods[(ns, pod, s.model_name)] = s
        return FleetSnapshot(at=now, pods=pods, failed=frozenset({PROMETHEUS})), errors


def _said(e: BaseException, timeout: float) -> str:
    if isinstance(e, asyncio.TimeoutError):
        return f"no answer within {timeout:g}s"
    if isinstance(e, aiohttp.ClientConnectorError):
        return f"cannot connect ({e.os_error.strerror or e.os_error})"
    return f"{type(e).__name__}: {e}"[:160]
