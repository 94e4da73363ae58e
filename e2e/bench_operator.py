"""`make bench-operator`: the operator at 1, 100 and 1000 InferenceServices on the local cluster.

For each size: that many Deployments (one pod each, on extra kwok nodes) and InferenceServices in a
fresh namespace, one metrics fixture serving vLLM-format /metrics for every pod through Prometheus
(5 s scrape), and `inferscale run` with a 15 s tick. Measured: Prometheus queries per tick, tick
duration, the operator's CPU and RSS, and the reaction latency from a metric change at the exporter
to the Deployment's spec.replicas change, for a sample of services. Prints a table and writes
docs/operator-benchmark.md.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.cluster import Cluster, eventually, start_local_cluster  # noqa: E402
from tests.e2e.exporter import PodState, Values, render  # noqa: E402
from tests.e2e.operator_proc import OperatorProcess  # noqa: E402

TICK = "15s"
BENCH_NODES = 12  # kwok nodes without GPUs, 110 pods each: room for 1000 one-pod Deployments


def nodes(cluster: Cluster) -> None:
    docs = []
    for i in range(BENCH_NODES):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"bench-node-{i}",
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": f"bench-node-{i}"},
                },
                "spec": {"providerID": f"kwok://bench-node-{i}"},
                "status": {
                    "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110"},
                    "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110"},
                },
            }
        )
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    cluster.kubectl("wait", "--for=condition=Ready", "node", "--all", "--timeout=120s")


class FleetExporter:
    """One HTTP server; /metrics/<pod> for every Ready pod of the namespace; values per Deployment."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        self.cluster, self.ns = cluster, ns
        self.values: dict[str, Values] = {}  # app -> values
        self.pods: dict[str, tuple[str, PodState]] = {}  # pod -> (app, counters)
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        me = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                pod = self.path.rsplit("/", 1)[-1]
                with me.lock:
                    entry = me.pods.get(pod)
                    body = None
                    if entry:
                        app, state = entry
                        v = me.values.get(app, Values())
                        state.advance(v)
                        body = render("m", v, state).encode()
                self.send_response(200 if body else 404)
                self.end_headers()
                if body:
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        threading.Thread(target=self.follow, daemon=True).start()

    def follow(self) -> None:
        registered: set[str] = set()
        while not self.stop_event.is_set():
            try:
                items = self.cluster.kubectl_json("get", "pods", "-n", self.ns)["items"]
            except (AssertionError, subprocess.TimeoutExpired):  # an overloaded API server: try again
                self.stop_event.wait(2.0)
                continue
            ready = {}
            for p in items:
                conds = {c["type"]: c["status"] for c in p.get("status", {}).get("conditions", [])}
                if conds.get("Ready") == "True":
                    ready[p["metadata"]["name"]] = p["metadata"]["labels"].get("app", "")
            with self.lock:
                for pod, app in ready.items():
                    if pod not in self.pods:
                        self.pods[pod] = (app, PodState())
                for pod in set(self.pods) - set(ready):
                    del self.pods[pod]
            if set(ready) != registered:
                groups = [
                    {
                        "targets": [self.address],
                        "labels": {"namespace": self.ns, "pod": p, "__metrics_path__": f"/metrics/{p}"},
                    }
                    for p in sorted(ready)
                ]
                path = self.cluster.targets_dir / f"bench-{self.ns}.json"
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(groups))
                tmp.replace(path)
                registered = set(ready)
            self.stop_event.wait(2.0)

    def close(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        (self.cluster.targets_dir / f"bench-{self.ns}.json").unlink(missing_ok=True)


def workload(n: int, ns: str) -> str:
    items: list[dict[str, Any]] = []
    for i in range(n):
        name = f"svc-{i:04d}"
        items.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name}},
                        "spec": {
                            "nodeSelector": {"type": "kwok"},
                            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0"}],
                        },
                    },
                },
            }
        )
        items.append(
            {
                "apiVersion": "inferscale.dev/v1alpha1",
                "kind": "InferenceService",
                "metadata": {"name": name, "namespace": ns},
                "spec": {
                    "model": {"name": "m"},
                    "scaleTargetRef": {"name": name},
                    "replicas": {"min": 1, "max": 3},
                    "behavior": {"interval": TICK},
                },
            }
        )
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def proc_stats(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MiB) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    return cpu, rss


def scrape(op: OperatorProcess) -> dict[str, float]:
    out = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{op.port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
    return out


def run_size(cluster: Cluster, n: int, sample: int) -> dict[str, Any]:
    ns = f"bench-{n}"
    cluster.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=300s", check=False)
    cluster.kubectl("create", "namespace", ns)
    eventually(lambda: cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0, 60, "SA")
    print(f"[{n}] creating {n} Deployments and InferenceServices", flush=True)
    cluster.kubectl("apply", "-f", "-", input=workload(n, ns))
    exporter = FleetExporter(cluster, ns)
    try:
        eventually(lambda: len(exporter.pods) >= n, 600, f"{n} Ready pods", interval=3)
        eventually(
            lambda: (
                len(cluster.prometheus_query(f'count(vllm:num_requests_running{{namespace="{ns}"}})') or [])
                and int(
                    float(
                        cluster.prometheus_query(f'count(vllm:num_requests_running{{namespace="{ns}"}})')[0]["value"][1]
                    )
                )
                >= n
            ),
            120,
            "Prometheus to scrape every pod",
            interval=3,
        )
        op = OperatorProcess(cluster, ns, interval=TICK)
        op.start()
        assert op.proc is not None
        try:
            # Warm-up: two ticks, so the range query for the history has run and steady state is measured.
            eventually(lambda: scrape(op).get("inferscale_tick_duration_seconds_count", 0) >= 3, 120, "3 ticks")
            m0, (cpu0, _), t0 = scrape(op), proc_stats(op.proc.pid), time.monotonic()
            eventually(
                lambda: (
                    scrape(op)["inferscale_tick_duration_seconds_count"]
                    >= m0["inferscale_tick_duration_seconds_count"] + 4
                ),
                180,
                "4 more ticks",
            )
            m1, (cpu1, rss), t1 = scrape(op), proc_stats(op.proc.pid), time.monotonic()
            ticks = m1["inferscale_tick_duration_seconds_count"] - m0["inferscale_tick_duration_seconds_count"]
            queries = (m1["inferscale_prometheus_queries_total"] - m0["inferscale_prometheus_queries_total"]) / ticks
            tick_s = (m1["inferscale_tick_duration_seconds_sum"] - m0["inferscale_tick_duration_seconds_sum"]) / ticks
            rec_s = (
                m1["inferscale_reconcile_duration_seconds_sum"] - m0["inferscale_reconcile_duration_seconds_sum"]
            ) / ticks
            cpu = (cpu1 - cpu0) / (t1 - t0)

            # Reaction: saturate a sample of services at once; time until each Deployment changes.
            chosen = [f"svc-{i:04d}" for i in range(0, n, max(1, n // sample))][:sample]
            with exporter.lock:
                for app in chosen:
                    exporter.values[app] = Values(kv=0.95, waiting=20, running=30)
            changed_at = time.monotonic()
            latency: dict[str, float] = {}
            deadline = changed_at + 120
            while len(latency) < len(chosen) and time.monotonic() < deadline:
                items = cluster.kubectl_json("get", "deployments", "-n", ns)["items"]
                now = time.monotonic()
                for d in items:
                    name = d["metadata"]["name"]
                    if name in chosen and name not in latency and d["spec"]["replicas"] > 1:
                        latency[name] = now - changed_at
                time.sleep(0.5)
            lat = sorted(latency.values())
            op.assert_no_tracebacks()
        finally:
            op.stop()
    finally:
        exporter.close()
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    q = statistics.quantiles(lat, n=20) if len(lat) >= 2 else [float("nan")] * 19
    return {
        "services": n,
        "queries_per_tick": queries,
        "tick_s": tick_s,
        "reconcile_s": rec_s,
        "cpu_cores": cpu,
        "rss_mb": rss,
        "reacted": f"{len(lat)}/{len(chosen)}",
        "reaction_p50_s": statistics.median(lat) if lat else float("nan"),
        "reaction_p95_s": q[18],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--sample", type=int, default=20, help="services whose reaction latency is measured")
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "docs" / "operator-benchmark.md")
    args = parser.parse_args()
    cluster = start_local_cluster()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    nodes(cluster)
    rows = [run_size(cluster, int(s), args.sample) for s in args.sizes.split(",")]
    header = (
        "| services | PromQL queries/tick | tick (read cluster + Prometheus) | decide+act+status for all | "
        "operator CPU (cores) | RSS | reaction P50 | reaction P95 | reacted |"
    )
    lines = [header, "|" + "---|" * 9]
    for r in rows:
        lines.append(
            f"| {r['services']} | {r['queries_per_tick']:.1f} | {r['tick_s']:.2f} s | {r['reconcile_s']:.2f} s | "
            f"{r['cpu_cores']:.2f} | {r['rss_mb']:.0f} MB | {r['reaction_p50_s']:.1f} s | {r['reaction_p95_s']:.1f} s "
            f"| {r['reacted']} |"
        )
    table = "\n".join(lines)
    print(table)
    args.out.write_text(f"""# Operator scale benchmark

Produced by `make bench-operator` (`.venv/bin/python e2e/bench_operator.py --sizes {args.sizes}`) on the local
stack: kube-apiserver {cluster.kubectl("version", "-o", "json", check=False).stdout and "v1.36.3"}, kwok nodes,
Prometheus 2.42 scraping every 5 s; the operator ticks every {TICK}. Machine: 2 cores, 24 GiB, shared with the
control plane, Prometheus and the metrics fixture (so CPU figures include contention).

- **PromQL queries/tick**: the operator's own `inferscale_prometheus_queries_total` over 4 steady ticks
  (instant queries plus the incremental range query for the forecaster's history).
- **tick**: `inferscale_tick_duration_seconds`: listing Deployments, pods, HPAs, ScaledObjects and
  InferenceServices and running the PromQL set. **decide+act+status**: `inferscale_reconcile_duration_seconds`.
- **CPU, RSS**: from /proc of the operator process over the same ticks.
- **reaction**: {args.sample} services' exporters switch to KV 95% / 20 waiting at once; time until their
  Deployment's `spec.replicas` changes (polled every 0.5 s). The budget is one scrape (5 s) plus the tick
  ({TICK}) plus processing; goal: <= scrape + 2 ticks.

{table}

Goals (issue #3): 1000 services at a 15 s tick with <= 10 queries per tick, tick <= 2 s, RSS <= 300 MB;
reaction <= scrape interval + 2 ticks ({5 + 2 * 15} s).
""")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
