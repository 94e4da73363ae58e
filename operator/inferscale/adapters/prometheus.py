"""Reads vLLM engine metrics for every InferenceService at once.

One tick costs a fixed set of PromQL queries whatever the number of services: each query returns
per-pod series for the whole fleet (`by (namespace, pod, model_name)`), and `observe` picks out
one service's pods afterwards. A query that fails, or returns NaN/Inf, leaves its family unknown
for this tick; it never turns into a zero.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ProtocolError, ReadTimeoutError
from urllib3.util.retry import Retry

from inferscale.adapters.prometheus_access import AccessError, PrometheusAccess
from inferscale.scaling.types import CACHED_PROMPT_TOKENS, PROMPT_TOKENS

PodKey = tuple[str, str, str]  # (namespace, pod, model_name)

_BY = "namespace, pod, model_name"
# Labels a scrape adds, not the engine: series of one pod that differ only in them are one series scraped twice,
# by a ServiceMonitor and a PodMonitor or by two Prometheus replicas without deduplication. Each family takes
# their max before anything is summed, so the twice-scraped pod does not read as twice the queue and twice the
# traffic. The engine's own labels (vLLM's engine, finished_reason, le; SGLang's is_streaming, its ranks; any
# a new version adds) are kept apart and still add up: a label missing here leaves a duplicate counted twice, as
# before, where a list of the engines' labels would have summed a new label's series as one.
_SCRAPE_LABELS = "job, instance, endpoint, service, container, prometheus, prometheus_replica, replica"
FAMILY = "inferscale_family"  # the metric name, kept through the gauges' aggregation, which drops __name__
OLD_KV = "vllm:gpu_cache_usage_perc"  # vLLM < 0.10
RATE_WINDOW = "1m"
LATENCY_WINDOW = "2m"  # at least two scrapes at a 30 s scrape interval, many at 5 s
_HISTOGRAM, _TPOT = "histogram", "tpot"  # the label that sets per-request TPOT buckets apart
_DIALECT = "dialect"  # the label that sets SGLang's series apart
_PART, _CACHED = "inferscale_part", "cached"  # the label that sets the prefix cache's prompt tokens apart
# A Deployment's pods are named <deployment>-<pod-template-hash>-<5 random characters>. The rate history is
# summed per Deployment (the label WORKLOAD, from the pod name), so that two services of one model name in
# one namespace, a canary beside its stable fleet, each forecast their own traffic. Both the hash (a uint32's
# decimal digits, so 6-10 characters but for 1 in 40,000) and the suffix are drawn from Kubernetes' vowel-free
# alphabet (apimachinery util/rand): a Job's pod (<job>-<5>) or a pod whose hash Kubernetes cut off (a name
# over 57 characters) rarely passes for another Deployment's. Prometheus anchors the regex, as
# `re.fullmatch` does with the same pattern (`deployment_of`); the prefix is all before the last two dashes.
# The label is one no scrape config sets: a `workload` label of the user's own would survive label_replace
# on the pods whose names do not match, and group them under its values.
WORKLOAD = "inferscale_deployment"
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
_HASH_MIN, _HASH_MAX, _RANDOM = 6, 10, 5  # the pod-template hash's characters, and the name's random suffix
_POD_SUFFIX = f"{_SAFE}{{{_HASH_MIN},{_HASH_MAX}}}-{_SAFE}{{{_RANDOM}}}"
DEPLOYMENT_POD = f"(.+)-{_POD_SUFFIX}"
VLLM, SGLANG = "vllm", "sglang"  # spec.engine's values
# SGLang counts finished requests in num_requests_total; builds without it, in the e2e histogram's count
_SGLANG_REQUESTS = ("sglang:num_requests_total", "sglang:e2e_request_latency_seconds_count")
# SGLang's gauges, folded into vLLM's families (sgl-project/sglang docs/references/production_metrics.md)
SGLANG_GAUGES = {
    "sglang:num_running_reqs": "vllm:num_requests_running",
    "sglang:num_queue_reqs": "vllm:num_requests_waiting",
    "sglang:token_usage": "vllm:kv_cache_usage_perc",
}


def _sel(metric: str, matchers: str) -> str:
    return f"{metric}{{{matchers}}}" if matchers else metric


def build_queries(selector: Mapping[str, str] | None = None, tpot: bool = True) -> dict[str, str]:
    """The fixed query set, with a service's extra label matchers (spec.metrics.selector) if any.
    Saturation peaks over 1m (as WVA does), latency over 2m, rates over 1m. Each query reads vLLM's
    names and SGLang's (see `_either`), so a mixed fleet still costs one query per family. `tpot` adds
    vLLM's per-request TPOT histogram to the TTFT query: its buckets made that query the tick's slowest at
    1000 services (PromQL 1.06 -> 1.29 s), so the operator asks for it only while some service sets
    slo.tpotP95."""
    m = _matchers(selector)
    with_m = "," + m if m else ""
    vllm_gauges = "vllm:(num_requests_waiting|num_requests_running|kv_cache_usage_perc|gpu_cache_usage_perc)"
    sglang_gauges = f"sglang:({'|'.join(name.split(':')[1] for name in SGLANG_GAUGES)})"

    def summed(*metrics: str, window: str = RATE_WINDOW, by: str = _BY) -> str:
        return _summed(m, *metrics, window=window, by=by)

    lat, hist = LATENCY_WINDOW, f"{_BY}, le"
    per_request = summed("vllm:request_time_per_output_token_seconds_bucket", window=lat, by=hist)
    return {
        "gauges": _either(_once_per_name(vllm_gauges, with_m), _once_per_name(sglang_gauges, with_m)),
        "kv_peak": _either(
            f"max by ({_BY}) (max_over_time({_sel('vllm:kv_cache_usage_perc', m)}[1m]) "
            f"or max_over_time({_sel(OLD_KV, m)}[1m]))",
            f"max by ({_BY}) (max_over_time({_sel('sglang:token_usage', m)}[1m]))",
        ),
        "sample_time": _either(
            f"max by ({_BY}) (timestamp({_sel('vllm:num_requests_running', m)}))",
            f"max by ({_BY}) (timestamp({_sel('sglang:num_running_reqs', m)}))",
        ),
        # both latency histograms in one query: the per-request TPOT series carry histogram="tpot"
        "ttft_buckets": _either(
            summed("vllm:time_to_first_token_seconds_bucket", window=lat, by=hist),
            summed("sglang:time_to_first_token_seconds_bucket", window=lat, by=hist),
        )
        + (" or " + _label(per_request, _HISTOGRAM, _TPOT) if tpot else ""),
        # SGLang's older time_per_output_token histogram is not an ITL (a running mean per streamed chunk, or
        # e2e / tokens once for a non-streamed request, queue and prefill included): only inter_token_latency
        "itl_sum": _either(
            summed("vllm:inter_token_latency_seconds_sum", "vllm:time_per_output_token_seconds_sum", window=lat),
            summed("sglang:inter_token_latency_seconds_sum", window=lat),
        ),
        "itl_count": _either(
            summed("vllm:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_count", window=lat),
            summed("sglang:inter_token_latency_seconds_count", window=lat),
        ),
        "requests": _either(summed("vllm:request_success_total"), summed(*_SGLANG_REQUESTS)),
        # Both engines count a prompt whole, its prefix-cache hits included; the cached share rides in the same
        # query (vLLM's prompt_tokens_cached_total and SGLang's cached_tokens_total are counted per request, as the
        # prompts are; vLLM's prefix_cache_hits count each scheduling's lookup, again after a preemption)
        "prompt_tokens": _either(summed("vllm:prompt_tokens_total"), summed("sglang:prompt_tokens_total"))
        + " or "
        + _label(
            _either(summed("vllm:prompt_tokens_cached_total"), summed("sglang:cached_tokens_total")), _PART, _CACHED
        ),
        "generation_tokens": _either(summed("vllm:generation_tokens_total"), summed("sglang:generation_tokens_total")),
    }


def build_rate_history_query(selector: Mapping[str, str] | None = None) -> str:
    """Request rate per (namespace, model_name, Deployment, dialect): the forecaster's input, one range
    query per tick. Pods whose names are not a Deployment's are summed under an empty Deployment."""
    m, by = _matchers(selector), f"namespace, model_name, {WORKLOAD}"

    def per_deployment(*metrics: str) -> str:
        # a counter chosen per pod, as the instant query does, then summed per Deployment: chosen after the sum,
        # a Deployment with one pod of a newer build (both SGLang counters) would drop its older pods (one)
        return f'sum by ({by}) (label_replace({_summed(m, *metrics)}, "{WORKLOAD}", "$1", "pod", "{DEPLOYMENT_POD}"))'

    return _either(per_deployment("vllm:request_success_total"), per_deployment(*_SGLANG_REQUESTS))


TRAFFIC_BY = "namespace, model_name"
IN_FLIGHT = "in_flight"  # a level, not a rate: requests waiting and running at each evaluation time


def build_traffic_queries(
    namespace: str, model_name: str | None, deployment: str | None, window: str
) -> dict[str, str]:
    """Requests finished and prompt and generation tokens per second over each `window`, and the requests in
    flight (waiting and running) at its end, per (namespace, model_name, dialect), for `export-trace`: the
    counters and gauges the operator reads, a pod counted once however often scraped. `deployment` keeps the
    pods named as that Deployment's."""
    selector = {"namespace": namespace} | ({"model_name": model_name} if model_name else {})
    m = _matchers(selector)
    if deployment:
        m += f',pod=~"{_escape(deployment_pods(deployment))}"'

    def per_service(*metrics: str) -> str:
        # a counter chosen per pod, then summed (see build_rate_history_query)
        return f"sum by ({TRAFFIC_BY}) ({_summed(m, *metrics, window=window)})"

    def in_flight(names: str) -> str:
        # waiting plus running, each gauge of a pod once however often scraped, summed per service
        return f"sum by ({TRAFFIC_BY}) ({_once_per_name(names, ',' + m)})"

    return {
        "requests": _either(per_service("vllm:request_success_total"), per_service(*_SGLANG_REQUESTS)),
        IN_FLIGHT: _either(
            in_flight("vllm:(num_requests_waiting|num_requests_running)"),
            in_flight("sglang:(num_queue_reqs|num_running_reqs)"),
        ),
        PROMPT_TOKENS: _either(per_service("vllm:prompt_tokens_total"), per_service("sglang:prompt_tokens_total")),
        "generation_tokens": _either(
            per_service("vllm:generation_tokens_total"), per_service("sglang:generation_tokens_total")
        ),
    }


_GENERATED_PREFIX = 63 - _RANDOM  # Kubernetes' generated names: a prefix cut to 58 characters, then the random


def deployment_pods(deployment: str) -> str:
    """A regex of the names a Deployment's pods get: <deployment>-<hash>-<5 random>, or, where that would be over
    63 characters, Kubernetes' name generator cuts <deployment>-<hash>- to its first 58 and adds the 5 (a
    Deployment name of 47 characters or more). The vowel-free alphabet keeps a longer sibling's pods out. No
    backslash in it for a Kubernetes name, so it goes into PromQL strings and Grafana variables as it is (the
    dashboard reads it from `inferscale_service_model`'s `pods` label)."""
    whole = f"{_literal(deployment)}-{_POD_SUFFIX}"
    kept = _GENERATED_PREFIX - len(deployment) - 1  # the hash's characters left after the cut
    if kept < 0:  # the Deployment's name itself is cut
        return f"{_literal(deployment[:_GENERATED_PREFIX])}{_SAFE}{{{_RANDOM}}}"
    if kept < _HASH_MAX + 1:  # the longest hashes and their dash do not fit
        return f"{whole}|{_literal(deployment)}-{_SAFE}{{{kept + _RANDOM}}}"
    return whole


def _literal(name: str) -> str:
    """A regex matching `name` alone; a Kubernetes name's '.' as `[.]`, so that no backslash needs escaping."""
    return "".join(c if c.isalnum() or c == "-" else "[.]" if c == "." else re.escape(c) for c in name)


def deployment_of(pod: str) -> str:
    """The Deployment a pod's name says it belongs to ("" when it is not a Deployment pod's name), as
    the rate history query labels it."""
    match = re.fullmatch(DEPLOYMENT_POD, pod)
    return match.group(1) if match else ""


def _matchers(selector: Mapping[str, str] | None) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted((selector or {}).items()))


def _summed(m: str, *metrics: str, window: str = RATE_WINDOW, by: str = _BY) -> str:
    # each alternative aggregated before `or`, so extra labels cannot make one pod count twice; a series scraped
    # twice counts once (_SCRAPE_LABELS)
    return " or ".join(
        f"sum by ({by}) (max without ({_SCRAPE_LABELS}) (rate({_sel(metric, m)}[{window}])))" for metric in metrics
    )


def _once_per_name(names: str, with_m: str) -> str:
    return (
        f'max without ({_SCRAPE_LABELS}) (label_replace({{__name__=~"{names}"{with_m}}}, "{FAMILY}", "$1", '
        f'"__name__", "(.+)"))'
    )


def _either(vllm: str, sglang: str) -> str:
    """vLLM's series as they are, SGLang's tagged dialect="sglang" (a pod exports one dialect)."""
    return f"{vllm} or {_label(sglang, _DIALECT, SGLANG)}"


def _label(expr: str, name: str, value: str) -> str:
    return f'label_replace({expr}, "{name}", "{value}", "", "")'


def _escape(value: str) -> str:
    """A label value inside PromQL's double quotes: Go's escapes, which JSON's are a subset of (a newline in a
    selector value must not end the string)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


QUERIES = build_queries()


@dataclass(frozen=True)
class PodSeries:
    """What one pod's engine reported. Missing families are absent keys, never zeros."""

    namespace: str
    pod: str
    model_name: str
    values: dict[str, float] = field(default_factory=dict)  # family -> value
    ttft_buckets: dict[float, float] = field(default_factory=dict)  # le -> rate
    tpot_buckets: dict[float, float] = field(default_factory=dict)  # le -> rate, one sample per request
    dialects: set[str] = field(default_factory=set)  # "vllm", "sglang": the metric names it answered with


@dataclass(frozen=True)
class FleetSnapshot:  # not slotted: by_pod caches on the instance
    at: float
    pods: dict[PodKey, PodSeries]
    failed: frozenset[str]  # query names that errored this tick
    errors: tuple[str, ...] = ()
    # query names answered with a warning (a Thanos querier whose stores did not all answer): data in part
    partial: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()

    @property
    def unavailable(self) -> bool:
        """Prometheus answered nothing at all: every family is unknown."""
        return len(self.failed) == len(QUERIES)

    @cached_property
    def by_pod(self) -> dict[tuple[str, str], list[PodSeries]]:
        """(namespace, pod) -> its series, so each service finds its pods without scanning the fleet."""
        index: dict[tuple[str, str], list[PodSeries]] = {}
        for (ns, pod, _), series in self.pods.items():
            index.setdefault((ns, pod), []).append(series)
        return index


def _finite(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def plausible(family: str, value: float) -> bool:
    """Whether one pod's figure can be what it claims. Every family read is a count, a rate, a time or a
    fraction: a negative one, or a fraction over 1, is a broken exporter's, unknown for that pod as NaN is.
    Added to the others' it would pass for load that is not there (a pod at -6 waiting cancels two at 6)."""
    if value < 0:
        return False
    return value <= 1.0 if family.endswith("_perc") or family == "kv_peak" else True


def gauge_family(name: str) -> str:
    """The family a gauge counts in, under vLLM's current name: SGLang's gauges and vLLM's old KV one folded in."""
    family = SGLANG_GAUGES.get(name, name)
    return "vllm:kv_cache_usage_perc" if family == OLD_KV else family


def merged_gauge(family: str, prev: float, value: float) -> float:
    """Two series of one pod's gauge (vLLM's data-parallel engines): the KV cache's fullest, the queues' sum."""
    return max(prev, value) if family.endswith("_perc") else prev + value


def parse_vector(
    name: str, result: Sequence[Mapping[str, Any]], into: dict[PodKey, PodSeries], now: float | None = None
) -> None:
    """Folds one instant-vector answer into per-pod series; samples without namespace/pod labels
    cannot be attributed to a service and are skipped. Given the operator's `now`, a sample time is
    its age by Prometheus's own clock (the answer's evaluation time less the sample's) set back from
    `now`: the two clocks may differ by minutes, which would read fresh gauges as stale (every scale
    held) or old ones as fresh."""
    for sample in result:
        labels = sample.get("metric", {})
        ns, pod = labels.get("namespace"), labels.get("pod")
        raw = sample.get("value")
        if not ns or not pod or not isinstance(raw, (list, tuple)) or len(raw) != 2:
            continue
        value = _finite(raw[1])
        family = gauge_family(labels.get(FAMILY) or labels.get("__name__", "")) if name == "gauges" else name
        if value is None or not plausible(family, value):
            continue
        if name == "sample_time" and now is not None:
            evaluated = _finite(raw[0])
            if evaluated is None:
                continue
            value = now - (evaluated - value)
        key = (ns, pod, labels.get("model_name", ""))
        series = into.get(key)
        if series is None:
            series = into[key] = PodSeries(*key)
        series.dialects.add(labels.get(_DIALECT, VLLM))
        if name == "gauges":
            if family in series.values:
                series.values[family] = merged_gauge(family, series.values[family], value)
            elif family:
                series.values[family] = value
        elif name == "ttft_buckets":
            le = labels.get("le")
            bound = math.inf if le == "+Inf" else _finite(le)
            if bound is not None:
                into_buckets = series.tpot_buckets if labels.get(_HISTOGRAM) == _TPOT else series.ttft_buckets
                # le="1" and le="1.0" are one bucket (Prometheus 3 writes the latter; both live through an upgrade)
                into_buckets[bound] = into_buckets.get(bound, 0.0) + value
        elif name == PROMPT_TOKENS and labels.get(_PART) == _CACHED:
            series.values[CACHED_PROMPT_TOKENS] = value
        else:
            series.values[name] = value


# No retries inside a tick: the next tick is the retry. A retried read timeout or 5xx only multiplies how long a
# hung or failing Prometheus holds the tick (urllib3's default, 4 attempts of a 10 s read and 6 s of back-off,
# held a query 46 s while the services' status said nothing of the outage), and each retry logs the whole
# encoded query. A pooled connection the server closed while idle is dropped by urllib3 without a retry.
NO_RETRY = Retry(total=0, raise_on_status=False)
# Threads, and pooled connections, for the queries of a tick: every query of two selector groups and their rate
# histories at once, so a hung Prometheus costs the tick one timeout, not one per wave of asyncio's default pool
# (6 threads on a 2-core node); requests' own pool keeps 10 connections per host and would open and drop the rest.
QUERY_THREADS = 2 * (len(QUERIES) + 1)


_REFUSED = re.compile(r"^HTTP Status Code (401|403) ")


def _refused(status: str, authenticated: bool) -> str:
    if authenticated:
        return f"Prometheus refused the operator's credentials (HTTP {status}): check the token or password file"
    return (
        f"Prometheus answered HTTP {status}: it wants credentials; give them with --prometheus-bearer-token-file, "
        "or --prometheus-username and --prometheus-password-file"
    )


def describe_failure(exc: BaseException, timeout: float, authenticated: bool = False) -> str:
    """A failed query in words an SRE can act on. The client's own messages carry the URL-encoded PromQL
    (hundreds of characters) before the cause, which requests wraps two levels deep."""
    if (refused := _REFUSED.match(str(exc))) is not None:
        return _refused(refused.group(1), authenticated)
    cause: BaseException | None = exc
    for _ in range(6):  # requests' SSLError wraps a retry error, urllib3's SSLError, then ssl's own
        if isinstance(cause, (AccessError, PartialAnswer)):
            return str(cause)
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"the TLS certificate is not trusted ({cause.verify_message}): give its CA with --prometheus-ca-file"
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed: {cause}"[:200]
        if isinstance(cause, NewConnectionError):  # a ConnectTimeoutError too, in urllib3's hierarchy
            return "cannot connect: " + str(cause).rsplit("new connection: ", 1)[-1]
        if isinstance(cause, (ReadTimeoutError, ConnectTimeoutError, TimeoutError)):
            return f"no answer within {timeout:g}s"
        if isinstance(cause, ProtocolError):
            return f"the connection broke before an answer ({cause})"[:200]
        if isinstance(cause, asyncio.CancelledError):
            return "cancelled: the operator is stopping"
        if cause is None:
            break
        inner = getattr(cause, "reason", None)
        cause = (
            inner
            if isinstance(inner, BaseException)
            else next((a for a in cause.args if isinstance(a, BaseException)), None)
        )
    return f"{type(exc).__name__}: {exc}"[:300]


class PartialAnswer(ValueError):
    """A range answer with a warning: kept out of the rate history, which would hold its gap for days."""


def _read_by(response: Any, deadline: float) -> bytes:
    """The answer's body, read by `deadline` (monotonic): requests bounds each read, so an answer that trickles
    in (a slow proxy, a huge answer on a thin link) would otherwise hold the tick for as long as it lasts."""
    chunks = []
    # read1 returns what has arrived (a read of 64 KiB would wait for all of them, however slowly they come)
    while chunk := response.raw.read1(1 << 16, decode_content=True):
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError("the answer did not arrive whole within the timeout")
    return b"".join(chunks)


class _Client(PrometheusConnect):  # type: ignore[misc]  # the library has no type hints
    def answer(self, api: str, params: Mapping[str, str]) -> tuple[Any, tuple[str, ...]]:
        """`data.result` of /api/v1/`api` and the warnings the client's own calls drop: a Thanos querier
        answers from the stores that answered and names the others there, so the data may be a part."""
        deadline = time.monotonic() + self._timeout
        response = self._session.request(
            method=self._method,
            url=f"{self.url}/api/v1/{api}",
            params=dict(params),
            verify=self._session.verify,
            headers=self.headers,
            auth=self.auth,
            cert=self._session.cert,
            timeout=self._timeout,
            stream=True,
        )
        with response:
            content = _read_by(response, deadline)
        if response.status_code != 200:  # the client's own wording, which `describe_failure` reads
            raise PrometheusApiClientException(f"HTTP Status Code {response.status_code} ({content!r})")
        try:
            body = json.loads(content)
        except ValueError:  # a login page or a proxy's error, answered 200
            raise ValueError(f"the answer is not JSON: {content[:120]!r}") from None
        if not isinstance(body, dict) or not isinstance(body.get("data"), dict):
            raise ValueError(f"the answer is not a Prometheus API response: {str(body)[:120]}")
        if body.get("status") != "success":  # an error's `data` may still hold a part, or an empty result
            raise PrometheusApiClientException(
                f"Prometheus answered {body.get('status')!r}: {body.get('errorType', '')} {body.get('error', '')}"
            )
        warnings = body.get("warnings")
        return body["data"].get("result"), tuple(str(w) for w in warnings) if isinstance(warnings, list) else ()


class PrometheusReader:
    """Runs the fixed query set concurrently (the client is synchronous, so each query runs in a thread of its
    own pool). A query fails when its whole answer takes longer than `timeout` seconds (connecting, or
    waiting for a read, that long fails it sooner); `close` ends the threads and the connections."""

    def __init__(self, url: str, timeout: float = 10.0, access: PrometheusAccess | None = None) -> None:
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"the Prometheus timeout must be a positive number of seconds, got {timeout!r}")
        self.url = url
        self.timeout = timeout
        self.access = access or PrometheusAccess()
        self._client = _Client(
            url=url, retry=NO_RETRY, timeout=timeout, session=self.access.session(), auth=self.access.auth()
        )
        # the client mounts requests' default-sized pool on the URL: replaced by one as large as the thread pool
        self._client._session.mount(url, HTTPAdapter(max_retries=NO_RETRY, pool_maxsize=QUERY_THREADS))
        self._pool = ThreadPoolExecutor(max_workers=QUERY_THREADS, thread_name_prefix="promql")
        self.queries_sent = 0  # for the operator's own metrics and the scale benchmark

    def describe(self, exc: BaseException) -> str:
        return describe_failure(exc, self.timeout, self.access.authenticated)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client._session.close()

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _query(self, promql: str) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
        self.queries_sent += 1
        result, warnings = await self._in_thread(self._client.answer, "query", {"query": promql})
        # a scalar or string answer is a bare [time, value] list, and a proxy may send anything: not an
        # instant vector fails this query (its family unknown) rather than the tick
        if not isinstance(result, list) or not all(
            isinstance(sample, dict) and isinstance(sample.get("metric", {}), dict) for sample in result
        ):
            raise ValueError(f"the answer is not an instant vector: {str(result)[:120]}")
        odd = next((v for sample in result for v in sample.get("metric", {}).values() if not isinstance(v, str)), None)
        if odd is not None:  # Prometheus's label values are strings: whatever sent this is not Prometheus
            raise ValueError(f"the answer has a label value that is not a string: {str(odd)[:120]}")
        return result, warnings

    async def snapshot(self, now: float, selector: Mapping[str, str] | None = None, tpot: bool = True) -> FleetSnapshot:
        queries = build_queries(selector, tpot)
        names = list(queries)
        answers = await asyncio.gather(*(self._query(queries[n]) for n in names), return_exceptions=True)
        pods: dict[PodKey, PodSeries] = {}
        failed: set[str] = set()
        errors: list[str] = []
        partial: set[str] = set()
        warned: list[str] = []
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, BaseException):
                failed.add(name)
                errors.append(f"{name}: {self.describe(answer)}")
                continue
            result, warnings = answer
            if warnings:
                partial.add(name)
                warned.append(f"{name}: {'; '.join(warnings)}"[:300])
            parse_vector(name, result, pods, now)
        return FleetSnapshot(
            at=now,
            pods=pods,
            failed=frozenset(failed),
            errors=tuple(errors),
            partial=frozenset(partial),
            warnings=tuple(warned),
        )

    async def range_query(
        self, query: str, start: float, end: float, step: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """Each series of a range query: its labels and its finite points, oldest first. An answer in part is
        an error (PartialAnswer): a trace exported from it would show the missing stores' traffic as none."""
        self.queries_sent += 1
        # seconds as a plain number, which the API takes: "%g" would write a step of 11.6 days as 1e+06
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.3f}"}
        result, warnings = await self._in_thread(self._client.answer, "query_range", params)
        if warnings:
            raise PartialAnswer(f"answered in part: {'; '.join(warnings)}"[:300])
        out = []
        for series in result if isinstance(result, list) else []:
            points = []
            for t, v in series.get("values", []):
                at, value = _finite(t), _finite(v)
                if at is not None and value is not None:
                    points.append((at, value))
            out.append((dict(series.get("metric", {})), points))
        return out

    async def rate_history(
        self, start: float, end: float, step: float = 60.0, selector: Mapping[str, str] | None = None
    ) -> dict[tuple[str, str, str], list[tuple[float, float]]]:
        """Request rate per (namespace, model_name, Deployment) between start and end, oldest first (both
        dialects added)."""
        self.queries_sent += 1
        query = build_rate_history_query(selector)
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{int(step)}s"}
        result, warnings = await self._in_thread(self._client.answer, "query_range", params)
        if warnings:
            raise PartialAnswer(f"answered in part: {'; '.join(warnings)}"[:300])
        out: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        for series in result if isinstance(result, list) else []:
            labels = series.get("metric", {})
            key = (labels.get("namespace", ""), labels.get("model_name", ""), labels.get(WORKLOAD, ""))
            points = dict(out.get(key, ()))
            for t, v in series.get("values", []):
                value, at = _finite(v), _finite(t)
                if value is not None and at is not None:
                    points[at] = points.get(at, 0.0) + value
            out[key] = sorted(points.items())
        return out
