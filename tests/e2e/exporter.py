"""A metrics fixture: vLLM-format /metrics for every Ready pod of a Deployment, registered with
Prometheus through its file discovery (one target per pod, with namespace and pod labels).

Pods added by the operator join as soon as the API says they are Ready; values are set per pod
(the same for all, like a load balancer spreading a load evenly, unless a pod is given its own).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from tests.e2e.cluster import Cluster

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)


@dataclass
class Values:
    kv: float = 0.3
    waiting: float = 0.0
    running: float = 4.0
    ttft: float = 0.08  # every request's TTFT, seconds
    itl: float = 0.02
    tpot: float = 0.02  # every request's mean ITL (vllm:request_time_per_output_token_seconds)
    rps: float = 1.0  # finished requests per second per pod
    prompt_tokens: float = 0.0  # per request; 0: the token counters are not exported
    output_tokens: float = 0.0


class PodState:
    """Cumulative counters advance with wall time at the configured rates, like a real engine."""

    def __init__(self) -> None:
        self.requests = 0.0
        self.ttft_sum = 0.0
        self.ttft_buckets = [0.0] * len(TTFT_BUCKETS)
        self.itl_sum = 0.0
        self.itl_count = 0.0
        self.tpot_sum = 0.0
        self.tpot_buckets = [0.0] * len(TPOT_BUCKETS)
        self.prompt = 0.0
        self.generated = 0.0
        self.last = time.monotonic()

    def advance(self, v: Values) -> None:
        now = time.monotonic()
        n = v.rps * (now - self.last)
        self.last = now
        self.requests += n
        self.ttft_sum += n * v.ttft
        for i, le in enumerate(TTFT_BUCKETS):
            if v.ttft <= le:
                self.ttft_buckets[i] += n
        self.itl_sum += n * 100 * v.itl
        self.itl_count += n * 100
        self.tpot_sum += n * v.tpot
        self.prompt += n * v.prompt_tokens
        self.generated += n * v.output_tokens
        for i, le in enumerate(TPOT_BUCKETS):
            if v.tpot <= le:
                self.tpot_buckets[i] += n


def _gauge(name: str, lbl: str, value: float) -> list[str]:
    return [f"# TYPE {name} gauge", f"{name}{{{lbl}}} {value}"]


def _histogram(
    name: str, lbl: str, bounds: tuple[float, ...], cumulative: list[float], count: float, total: float
) -> list[str]:
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{{lbl},le="{le}"}} {c}' for le, c in zip(bounds, cumulative, strict=True)]
    lines += [f'{name}_bucket{{{lbl},le="+Inf"}} {count}', f"{name}_sum{{{lbl}}} {total}"]
    return [*lines, f"{name}_count{{{lbl}}} {count}"]


def render(model: str, v: Values, s: PodState) -> str:
    lbl = f'model_name="{model}",engine="0"'
    lines = [
        *_gauge("vllm:num_requests_running", lbl, v.running),
        *_gauge("vllm:num_requests_waiting", lbl, v.waiting),
        *_gauge("vllm:kv_cache_usage_perc", lbl, v.kv),
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{{lbl},finished_reason="stop"}} {s.requests}',
        *_histogram("vllm:time_to_first_token_seconds", lbl, TTFT_BUCKETS, s.ttft_buckets, s.requests, s.ttft_sum),
        *_histogram("vllm:inter_token_latency_seconds", lbl, (), [], s.itl_count, s.itl_sum),
        *_histogram(
            "vllm:request_time_per_output_token_seconds", lbl, TPOT_BUCKETS, s.tpot_buckets, s.requests, s.tpot_sum
        ),
    ]
    if v.prompt_tokens > 0:
        lines += [
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{lbl}}} {s.prompt}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{lbl}}} {s.generated}",
        ]
    return "\n".join(lines) + "\n"


def render_sglang(model: str, v: Values, s: PodState) -> str:
    """The same state in SGLang's names (docs/references/production_metrics.md). Finished requests are
    counted twice over, in num_requests_total (split by an extra label) and in the e2e histogram's count,
    as current SGLang does: the operator must read them once."""
    lbl = f'model_name="{model}"'
    lines = [
        *_gauge("sglang:num_running_reqs", lbl, v.running),
        *_gauge("sglang:num_queue_reqs", lbl, v.waiting),
        *_gauge("sglang:token_usage", lbl, v.kv),
        "# TYPE sglang:num_requests_total counter",
        f'sglang:num_requests_total{{{lbl},is_streaming="true"}} {s.requests / 2}',
        f'sglang:num_requests_total{{{lbl},is_streaming="false"}} {s.requests / 2}',
        *_histogram("sglang:e2e_request_latency_seconds", lbl, (), [], s.requests, s.requests),
        *_histogram("sglang:time_to_first_token_seconds", lbl, TTFT_BUCKETS, s.ttft_buckets, s.requests, s.ttft_sum),
        *_histogram("sglang:inter_token_latency_seconds", lbl, (), [], s.itl_count, s.itl_sum),
    ]
    return "\n".join(lines) + "\n"


class Exporter:
    """`pod_port`: each Ready pod's page is also served at its own IP on that port, as an engine serves its
    /metrics (the local stack's kwok gives pods loopback IPs, so the operator can reach them there)."""

    def __init__(
        self, cluster: Cluster, namespace: str, app: str, model: str, dialect: str = "vllm", pod_port: int | None = None
    ) -> None:
        self.cluster, self.namespace, self.app, self.model = cluster, namespace, app, model
        self.render = render_sglang if dialect == "sglang" else render
        self.values = Values()
        self.own: dict[str, dict[str, float]] = {}  # pod -> the values it reports unlike the others
        self.serving = True
        self.pods: dict[str, PodState] = {}
        self.pod_port = pod_port
        self.at_pod: dict[str, http.server.ThreadingHTTPServer] = {}  # pod -> its page at its own IP
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler(None))
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.target_name = f"exporter-{namespace}-{app}"
        self._threads = [
            threading.Thread(target=self.server.serve_forever, daemon=True),
            threading.Thread(target=self._follow_pods, daemon=True),
        ]

    def page(self, pod: str) -> bytes | None:
        with self._lock:
            state = self.pods.get(pod)
            if not self.serving or state is None:
                return None
            values = replace(self.values, **self.own.get(pod, {}))
            state.advance(values)
            return self.render(self.model, values, state).encode()

    def _handler(self, pod: str | None) -> type[http.server.BaseHTTPRequestHandler]:
        """Serves /metrics/<pod> (Prometheus's targets), or `pod`'s own /metrics (at its own address)."""
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.page(pod if pod is not None else self.path.rsplit("/", 1)[-1])
                if body is None:
                    self.send_response(503)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> Exporter:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        for server in self.at_pod.values():
            server.shutdown()
            server.server_close()
        (self.cluster.targets_dir / f"{self.target_name}.json").unlink(missing_ok=True)

    def set(self, **values: float) -> None:
        with self._lock:
            for k, v in values.items():
                setattr(self.values, k, v)

    def set_pod(self, pod: str, **values: float) -> None:
        with self._lock:
            self.own.setdefault(pod, {}).update(values)

    def vanish(self) -> None:
        """The engines stop answering: scrapes fail and Prometheus marks the series stale."""
        with self._lock:
            self.serving = False

    def _ready_pods(self) -> dict[str, str]:
        """Ready pod -> its IP ("" before it has one), by name."""
        items = self.cluster.kubectl_json("get", "pods", "-n", self.namespace, "-l", f"app={self.app}")["items"]
        out = {}
        for p in items:
            conds = {c["type"]: c["status"] for c in p.get("status", {}).get("conditions", [])}
            if conds.get("Ready") == "True" and not p["metadata"].get("deletionTimestamp"):
                out[p["metadata"]["name"]] = p.get("status", {}).get("podIP") or ""
        return dict(sorted(out.items()))

    def _serve_at_pods(self, ips: dict[str, str]) -> None:
        if self.pod_port is None:
            return
        for pod in set(self.at_pod) - set(ips):
            server = self.at_pod.pop(pod)
            server.shutdown()
            server.server_close()
        for pod, ip in ips.items():
            if pod not in self.at_pod and ip:
                server = http.server.ThreadingHTTPServer((ip, self.pod_port), self._handler(pod))
                threading.Thread(target=server.serve_forever, daemon=True).start()
                self.at_pod[pod] = server

    def _follow_pods(self) -> None:
        registered: list[str] = []
        ips: dict[str, str] = {}
        while not self._stop.is_set():
            with contextlib.suppress(AssertionError):  # the API server did not answer: the pods stay as they were
                ips = self._ready_pods()
            pods = list(ips)
            with self._lock:
                for p in pods:
                    self.pods.setdefault(p, PodState())
                for p in set(self.pods) - set(pods):
                    del self.pods[p]
            self._serve_at_pods(ips)
            if pods != registered:
                groups = [
                    {
                        "targets": [self.address],
                        "labels": {"namespace": self.namespace, "pod": p, "__metrics_path__": f"/metrics/{p}"},
                    }
                    for p in pods
                ]
                path = self.cluster.targets_dir / f"{self.target_name}.json"
                tmp = path.with_suffix(".tmp")
                self.cluster.targets_dir.mkdir(parents=True, exist_ok=True)
                tmp.write_text(json.dumps(groups))
                tmp.replace(path)
                registered = pods
            self._stop.wait(1.0)
