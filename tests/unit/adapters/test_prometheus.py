"""The PromQL reader's answers as the operator consumes them (the queries themselves run against the
real Prometheus in tests/e2e)."""

import asyncio
import contextlib
import http.server
import json
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from inferscale.adapters.prometheus import (
    DEPLOYMENT_POD,
    FAMILY,
    QUERIES,
    PartialAnswer,
    PrometheusReader,
    build_queries,
    build_rate_history_query,
    deployment_of,
    deployment_pods,
)


class RangeAnswer:
    def __init__(self, result: list[dict[str, Any]]) -> None:
        self.result = result
        self.queries: list[str] = []

    def answer(self, api: str, params: dict[str, str]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
        assert api == "query_range"
        self.queries.append(params["query"])
        return self.result, ()


def series(ns: str, model: str, points: list[tuple[float, str]], **labels: str) -> dict[str, Any]:
    return {"metric": {"namespace": ns, "model_name": model, **labels}, "values": [[t, v] for t, v in points]}


def test_rate_history_adds_both_dialects_of_one_model_and_drops_non_finite_points() -> None:
    reader = PrometheusReader("http://127.0.0.1:1")
    fake = RangeAnswer(
        [
            series("llm", "m", [(60.0, "2"), (120.0, "3"), (180.0, "NaN")]),
            series("llm", "m", [(120.0, "1"), (180.0, "4")], dialect="sglang"),
            series("other", "m", [(60.0, "7")]),
        ]
    )
    reader._client = fake  # type: ignore[assignment]
    out = asyncio.run(reader.rate_history(0.0, 180.0))
    assert out[("llm", "m", "")] == [(60.0, 2.0), (120.0, 4.0), (180.0, 4.0)]
    assert out[("other", "m", "")] == [(60.0, 7.0)]
    assert fake.queries == [build_rate_history_query()] and reader.queries_sent == 1
    assert "sglang:num_requests_total" in fake.queries[0]


def test_rate_history_is_kept_per_deployment_of_a_model() -> None:
    reader = PrometheusReader("http://127.0.0.1:1")
    reader._client = RangeAnswer(  # type: ignore[assignment]
        [
            series("llm", "m", [(60.0, "9")], inferscale_deployment="llm"),
            series("llm", "m", [(60.0, "1")], inferscale_deployment="llm-canary"),
        ]
    )
    out = asyncio.run(reader.rate_history(0.0, 60.0))
    assert out == {("llm", "m", "llm"): [(60.0, 9.0)], ("llm", "m", "llm-canary"): [(60.0, 1.0)]}
    query = build_rate_history_query()
    assert "sum by (namespace, model_name, inferscale_deployment)" in query and f'"pod", "{DEPLOYMENT_POD}"' in query


@pytest.mark.parametrize(
    ("pod", "deployment"),
    [
        ("llm-7d9f8c6b5-x2x4q", "llm"),
        ("llm-canary-6c8d7f94b-bcd42", "llm-canary"),  # all before the last two dashes
        ("llama-3-1-8b-5f7b9c-q8w2z", "llama-3-1-8b"),
        ("llm-0", ""),  # a StatefulSet's pod
        ("standalone", ""),
        ("qwen-loadtest-x7k2p", ""),  # a Job's pod: "loadtest" is no pod-template-hash (vowels)
        # a 57-character Deployment name: Kubernetes cut the hash off its pods' names, which must not
        # read as the Deployment "qwen2-5-72b-instruct-awq-tp4-ranking-prod-euw1" beside it
        ("qwen2-5-72b-instruct-awq-tp4-ranking-prod-euw1-candidate2-vtq89", ""),
        ("llm-7d9f8c6b5-x2x4", ""),  # a suffix is 5 characters
        ("llm-7d9f-x2x4q", ""),  # a hash is 6-10
    ],
)
def test_a_pods_deployment_is_read_from_its_name(pod: str, deployment: str) -> None:
    assert deployment_of(pod) == deployment


@pytest.mark.parametrize(
    ("deployment", "pods", "others"),
    [
        ("vllm-8b", ["vllm-8b-7d9f8c6b5-x2x4q"], ["vllm-8b-canary-7d9f8c6b5-x2x4q", "vllm-8b-7d9f8c6b5-x2x4"]),
        ("llm.v2", ["llm.v2-7d9f8c6b5-x2x4q"], ["llmxv2-7d9f8c6b5-x2x4q"]),  # its '.' is a dot, not any character
        # 50 characters: Kubernetes cut <deployment>-<hash>- to 58 before the random suffix
        (LONG := "qwen2-5-72b-instruct-awq-tp4-ranking-prod-euw1-a.b", [f"{LONG}-7d9f8c6x2x4q"], [f"{LONG}-7d9f8"]),
    ],
)
def test_a_deployments_pods_regex_needs_no_escaping_in_promql_or_grafana(
    deployment: str, pods: list[str], others: list[str]
) -> None:
    regex = deployment_pods(deployment)
    assert "\\" not in regex  # the dashboard's `pods` variable goes into a PromQL string as it is
    assert all(re.fullmatch(regex, p) for p in pods)
    assert not any(re.fullmatch(regex, p) for p in others)


class Silent:
    """A Prometheus that accepts connections and never answers (a SIGSTOPped process): counts connections,
    and how many were open at once."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.open = self.peak = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)
            with self._lock:
                self.open += 1
                self.peak = max(self.peak, self.open)
            threading.Thread(target=self._until_closed, args=(conn,), daemon=True).start()

    def _until_closed(self, conn: socket.socket) -> None:
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        with self._lock:
            self.open -= 1

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_hung_prometheus_fails_each_query_once_without_retrying_it() -> None:
    silent = Silent()
    reader = PrometheusReader(silent.url, timeout=1.0)
    try:
        snap = asyncio.run(reader.snapshot(0.0))
    finally:
        reader.close()
        silent.close()
    assert snap.unavailable and len(snap.errors) == len(QUERIES)
    assert all(e.endswith(": no answer within 1s") for e in snap.errors), snap.errors
    # urllib3's default retries would have opened 4 connections per query, each waiting a full timeout
    assert len(silent.accepted) == len(QUERIES)
    # all at once: asyncio's default pool (cores + 4 threads) would have run them in waves of one timeout each
    assert silent.peak == len(QUERIES)


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf")])
def test_a_timeout_that_is_no_positive_time_is_refused(timeout: float) -> None:
    with pytest.raises(ValueError, match="Prometheus timeout"):
        PrometheusReader("http://127.0.0.1:1", timeout=timeout)


def test_a_refused_connection_is_said_in_a_line_without_the_query() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket closes
    reader = PrometheusReader(f"http://127.0.0.1:{port}", timeout=1.0)
    try:
        snap = asyncio.run(reader.snapshot(0.0))
    finally:
        reader.close()
    assert snap.unavailable
    refused = "cannot connect: [Errno 111] Connection refused"
    assert all(e.split(": ", 1)[1] == refused for e in snap.errors), snap.errors


def test_a_selector_value_with_quotes_backslashes_or_a_newline_stays_inside_its_string() -> None:
    value = 'a\nb"c\\d'
    for query in [*build_queries({"job": value}).values(), build_rate_history_query({"job": value})]:
        assert "\n" not in query
        assert 'job="a\\nb\\"c\\\\d"' in query


class InstantAnswers:
    """The client's answer for each query name: `data.result` and no warnings."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.by_query = {promql: answers.get(name, []) for name, promql in build_queries().items()}

    def answer(self, api: str, params: dict[str, str]) -> tuple[Any, tuple[str, ...]]:
        assert api == "query"
        return self.by_query[params["query"]], ()


def snapshot_of(answers: dict[str, Any], now: float = 0.0) -> Any:
    """The reader's snapshot at `now` of these answers, each query name's `data.result`."""
    reader = PrometheusReader("http://127.0.0.1:1")
    client, reader._client = reader._client, InstantAnswers(answers)
    try:
        return asyncio.run(reader.snapshot(now))
    finally:
        reader._client = client
        reader.close()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ([1712345678.9, "0"], "the answer is not an instant vector"),
        ([{"metric": None, "value": [1.0, "3"]}], "the answer is not an instant vector"),
        (["not a sample"], "the answer is not an instant vector"),
        ("a proxy's error page", "the answer is not an instant vector"),
        # Prometheus's label values are strings; an object or a list would not even hash as a pod's key
        ([{"metric": {"namespace": ["llm"], "pod": "p0"}, "value": [1.0, "3"]}], "the answer has a label value"),
        (
            [{"metric": {"namespace": "llm", "pod": "p0", "model_name": {"a": 1}}, "value": [1.0, "3"]}],
            "the answer has a label value",
        ),
        (
            [{"metric": {"namespace": "llm", "pod": "p0", "dialect": ["x"]}, "value": [1.0, "3"]}],
            "the answer has a label value",
        ),
    ],
    ids=["scalar", "null-metric", "string-sample", "string", "list-namespace", "object-model", "list-dialect"],
)
def test_an_answer_that_is_not_an_instant_vector_fails_its_query_not_the_tick(answer: Any, error: str) -> None:
    running = [{"metric": {"namespace": "llm", "pod": "p0", "model_name": "m"}, "value": [1.0, "1"]}]
    snap = snapshot_of({"gauges": answer, "sample_time": running})
    assert snap.failed == {"gauges"}
    (said,) = snap.errors
    assert said.startswith(f"gauges: ValueError: {error}")
    assert snap.pods[("llm", "p0", "m")].values == {"sample_time": 0.0}


@pytest.mark.parametrize("skew", [-70.0, 0.0, 120.0])
def test_a_samples_age_is_read_on_prometheuss_clock_not_the_operators(skew: float) -> None:
    """Prometheus's clock `skew` seconds ahead of the operator's: the gauges' age is what Prometheus says it is."""
    now = 1_000_000.0

    def at(evaluated: float, value: float) -> list[dict[str, Any]]:
        return [{"metric": {"namespace": "llm", "pod": "p0", "model_name": "m"}, "value": [evaluated, str(value)]}]

    # evaluated a second into the tick by Prometheus, whose newest sample of the pod is 5 s older than that
    snap = snapshot_of({"sample_time": at(now + skew + 1.0, now + skew - 4.0)}, now)
    assert snap.pods[("llm", "p0", "m")].values == {"sample_time": now - 5.0}


def test_a_figure_no_engine_can_report_is_unknown_for_its_pod_not_added_in() -> None:
    def on(pod: str, value: float, name: str) -> dict[str, Any]:
        return {"metric": {"namespace": "llm", "pod": pod, FAMILY: name}, "value": [1.0, str(value)]}

    gauges = [on("p0", 0.9, "vllm:kv_cache_usage_perc"), on("p0", 6, "vllm:num_requests_waiting")]
    gauges += [on("p1", -0.9, "vllm:kv_cache_usage_perc"), on("p1", -6, "vllm:num_requests_waiting")]
    gauges += [on("p2", 1.5, "vllm:kv_cache_usage_perc"), on("p2", 1e308, "vllm:num_requests_waiting")]
    peaks = [on("p0", 0.95, ""), on("p1", 1e308, "")]
    snap = snapshot_of({"gauges": gauges, "kv_peak": peaks, "requests": [on("p1", -2.0, "")]})
    values = {pod: series.values for (_, pod, _), series in snap.pods.items()}
    assert values["p0"] == {"vllm:kv_cache_usage_perc": 0.9, "vllm:num_requests_waiting": 6.0, "kv_peak": 0.95}
    assert "p1" not in values  # a negative count or rate, a fraction over 1: nothing known of it
    assert values["p2"] == {"vllm:num_requests_waiting": 1e308}  # large, but a count: the decision's to refuse


class Answering(http.server.BaseHTTPRequestHandler):
    """A server on the Prometheus API whose answer to each request `answer` gives: its body, by pieces
    `pause` seconds apart."""

    protocol_version = "HTTP/1.1"
    pause = 0.0

    def answer(self, api: str, query: str) -> tuple[int, bytes]:
        raise NotImplementedError

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        status, data = self.answer(url.path, urllib.parse.parse_qs(url.query)["query"][0])
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        pieces = [data[i : i + 8] for i in range(0, len(data), 8)] if self.pause else [data]
        for piece in pieces:
            self.wfile.write(piece)
            self.wfile.flush()
            time.sleep(self.pause)

    def log_message(self, *_: Any) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[Answering], timeout: float = 5.0) -> Iterator[PrometheusReader]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    reader = PrometheusReader(f"http://127.0.0.1:{server.server_address[1]}", timeout=timeout)
    try:
        yield reader
    finally:
        reader.close()
        server.shutdown()
        server.server_close()


def vector(result: list[dict[str, Any]], status: str = "success", **more: Any) -> tuple[int, bytes]:
    return 200, json.dumps({"status": status, "data": {"resultType": "vector", "result": result}, **more}).encode()


P0 = {"namespace": "llm", "pod": "p0", "model_name": "m"}


class Thanos(Answering):
    """A querier one of whose stores did not answer: the request rate comes back with a warning naming it."""

    def answer(self, api: str, query: str) -> tuple[int, bytes]:
        if api == "/api/v1/query_range":
            body = {"resultType": "matrix", "result": [series("llm", "m", [(60.0, "1")])]}
            return 200, json.dumps(
                {"status": "success", "data": body, "warnings": ["store 10.0.0.7:10901 unavailable"]}
            ).encode()
        if query == build_queries()["requests"]:
            warning = "No StoreAPIs matched for this query: store 10.0.0.7:10901 unavailable"
            return vector([{"metric": P0, "value": [1.0, "2"]}], warnings=[warning])
        return vector([])


def test_an_answer_with_a_warning_is_used_and_marked_partial() -> None:
    with serving(Thanos) as reader:
        snap = asyncio.run(reader.snapshot(0.0))
        # a range answered in part is refused: the rate history would keep its gap for days
        with pytest.raises(PartialAnswer) as partial:
            asyncio.run(reader.rate_history(0.0, 120.0))
    assert snap.failed == frozenset() and snap.partial == frozenset({"requests"})
    assert snap.pods[("llm", "p0", "m")].values == {"requests": 2.0}
    (warning,) = snap.warnings
    assert warning.startswith("requests: No StoreAPIs matched") and "10.0.0.7:10901" in warning
    assert reader.describe(partial.value) == "answered in part: store 10.0.0.7:10901 unavailable"


class Erring(Answering):
    """A query layer that answers 200 with `status: error` and an empty result for the request rate (Prometheus
    itself may keep `data` on an error), and a login page for the KV peak."""

    def answer(self, api: str, query: str) -> tuple[int, bytes]:
        if query == build_queries()["requests"]:
            return vector([], status="error", errorType="timeout", error="query timed out")
        if query == build_queries()["kv_peak"]:
            return 200, b"<html><body>Sign in</body></html>"
        return vector([{"metric": P0, "value": [1.0, "1"]}])


def test_an_answer_that_says_error_fails_its_query_whatever_data_it_holds() -> None:
    with serving(Erring) as reader:
        snap = asyncio.run(reader.snapshot(0.0))
    assert snap.failed == {"requests", "kv_peak"}  # not an answer that there were no requests
    errors = dict(e.split(": ", 1) for e in snap.errors)
    assert errors["requests"] == "PrometheusApiClientException: Prometheus answered 'error': timeout query timed out"
    assert errors["kv_peak"] == "ValueError: the answer is not JSON: b'<html><body>Sign in</body></html>'"


class Trickling(Answering):
    """Each answer whole and right, 8 bytes every 100 ms: each read well within the timeout, the whole not."""

    pause = 0.1

    def answer(self, api: str, query: str) -> tuple[int, bytes]:
        return vector([{"metric": P0, "value": [1.0, "1"]}])


def test_an_answer_that_trickles_in_fails_its_query_at_the_timeout() -> None:
    _, whole = Trickling.answer(None, "", "")  # type: ignore[arg-type]
    assert len(whole) / 8 * Trickling.pause > 2 * 0.5  # the answer takes twice the timeout to come in
    with serving(Trickling, timeout=0.5) as reader:
        snap = asyncio.run(reader.snapshot(0.0))
    assert snap.unavailable
    assert {e.split(": ", 1)[1] for e in snap.errors} == {"no answer within 0.5s"}
