"""The PromQL reader's answers as the operator consumes them (the queries themselves run against the
real Prometheus in tests/e2e)."""

import asyncio
import http.server
import json
import socket
import threading
import urllib.parse
from typing import Any

import pytest

from inferscale.adapters.prometheus import (
    DEPLOYMENT_POD,
    QUERIES,
    PartialAnswer,
    PrometheusReader,
    build_queries,
    build_rate_history_query,
    deployment_of,
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


@pytest.mark.parametrize(
    "answer",
    [[1712345678.9, "0"], [{"metric": None, "value": [1.0, "3"]}], ["not a sample"], "a proxy's error page"],
    ids=["scalar", "null-metric", "string-sample", "string"],
)
def test_an_answer_that_is_not_an_instant_vector_fails_its_query_not_the_tick(answer: Any) -> None:
    reader = PrometheusReader("http://127.0.0.1:1")
    running = [{"metric": {"namespace": "llm", "pod": "p0", "model_name": "m"}, "value": [1.0, "2"]}]
    client, reader._client = reader._client, InstantAnswers({"gauges": answer, "sample_time": running})  # type: ignore[assignment]
    try:
        snap = asyncio.run(reader.snapshot(0.0))
    finally:
        reader._client = client
        reader.close()
    assert snap.failed == {"gauges"}
    (error,) = snap.errors
    assert error.startswith("gauges: ValueError: the answer is not an instant vector")
    assert snap.pods[("llm", "p0", "m")].values == {"sample_time": 2.0}


class Thanos(http.server.BaseHTTPRequestHandler):
    """A querier one of whose stores did not answer: the request rate comes back with a warning naming it."""

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query)["query"][0]
        body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": []}}
        if url.path == "/api/v1/query_range":
            body["data"] = {"resultType": "matrix", "result": [series("llm", "m", [(60.0, "1")])]}
            body["warnings"] = ["store 10.0.0.7:10901 unavailable"]
        elif query == build_queries()["requests"]:
            sample = {"metric": {"namespace": "llm", "pod": "p0", "model_name": "m"}, "value": [1.0, "2"]}
            body["data"]["result"] = [sample]
            body["warnings"] = ["No StoreAPIs matched for this query: store 10.0.0.7:10901 unavailable"]
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


def test_an_answer_with_a_warning_is_used_and_marked_partial() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Thanos)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    reader = PrometheusReader(f"http://127.0.0.1:{server.server_address[1]}", timeout=5.0)
    try:
        snap = asyncio.run(reader.snapshot(0.0))
        # a range answered in part is refused: the rate history would keep its gap for days
        with pytest.raises(PartialAnswer) as partial:
            asyncio.run(reader.rate_history(0.0, 120.0))
    finally:
        reader.close()
        server.shutdown()
        server.server_close()
    assert snap.failed == frozenset() and snap.partial == frozenset({"requests"})
    assert snap.pods[("llm", "p0", "m")].values == {"requests": 2.0}
    (warning,) = snap.warnings
    assert warning.startswith("requests: No StoreAPIs matched") and "10.0.0.7:10901" in warning
    assert reader.describe(partial.value) == "answered in part: store 10.0.0.7:10901 unavailable"
