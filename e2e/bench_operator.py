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
import math
import os
import pathlib
import statistics
import sys
import threading
import time
import urllib.request
from typing import Any

import kubernetes

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.cluster import Cluster, eventually, start_local_cluster  # noqa: E402
from tests.e2e.exporter import PodState, Values, render  # noqa: E402
from tests.e2e.operator_proc import OperatorProcess  # noqa: E402

TICK = "15s"
STEADY_TICKS = 8  # four status refreshes at a 15 s tick
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


class Api:
    """Direct API reads for the harness (a kubectl process per poll would cost a fraction of a core)."""

    def __init__(self, kubeconfig: str) -> None:
        self.client = kubernetes.config.new_client_from_config(config_file=kubeconfig)

    def _get(self, path: str) -> Any:
        cfg = self.client.configuration
        headers = {"Accept": "application/json"}
        if cfg.api_key.get("authorization"):
            headers["Authorization"] = cfg.api_key["authorization"]
        resp = self.client.call_api("GET", cfg.host + path, header_params=headers, _request_timeout=30)
        return json.loads(resp.read())

    def list_pods(self, ns: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self._get(f"/api/v1/namespaces/{ns}/pods")["items"]
        return items

    def replicas(self, ns: str, name: str) -> int:
        return int(self._get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale")["spec"]["replicas"])


class FleetExporter:
    """One HTTP server; /metrics/<pod> for every Ready pod of the namespace; values per Deployment."""

    def __init__(self, cluster: Cluster, ns: str, api: Api, expected: int) -> None:
        self.cluster, self.ns, self.api = cluster, ns, api
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
        threading.Thread(target=self.follow, args=(expected,), daemon=True).start()

    def follow(self, expected: int) -> None:
        """Registers Ready pods as scrape targets: every 2 s until all `expected` are there, then every
        10 s, so the harness itself does not load the API server it measures."""
        registered: set[str] = set()
        while not self.stop_event.is_set():
            try:
                items = self.api.list_pods(self.ns)
            except Exception:  # an overloaded API server: try again
                self.stop_event.wait(2.0)
                continue
            ready = {}
            for p in items:
                conds = {c["type"]: c["status"] for c in p.get("status", {}).get("conditions") or []}
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
            self.stop_event.wait(2.0 if len(ready) < expected else 10.0)

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


def proc_stats(pid: int) -> tuple[float, float, float]:
    """(CPU seconds, RSS MiB, peak RSS MiB) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as f:
        fields = [line.partition(":") for line in f]
    mem = {k: int(v.split()[0]) / 1024 for k, _, v in fields if k in ("VmRSS", "VmHWM")}
    return cpu, mem["VmRSS"], mem["VmHWM"]


def scrape(op: OperatorProcess) -> dict[str, float]:
    return op.metric_values(timeout=10)


def run_size(cluster: Cluster, n: int, sample: int) -> dict[str, Any]:
    ns = f"bench-{n}"
    cluster.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=300s", check=False)
    cluster.kubectl("create", "namespace", ns)
    eventually(lambda: cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode == 0, 60, "SA")
    print(f"[{n}] creating {n} Deployments and InferenceServices", flush=True)
    cluster.kubectl("apply", "-f", "-", input=workload(n, ns))
    api = Api(cluster.kubeconfig)
    exporter = FleetExporter(cluster, ns, api, n)
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
            eventually(
                lambda: scrape(op).get("inferscale_tick_duration_seconds_count", 0) >= 3, 120, "3 ticks", interval=5
            )
            m0, (cpu0, _, _), t0 = scrape(op), proc_stats(op.proc.pid), time.monotonic()
            eventually(
                lambda: (
                    scrape(op)["inferscale_tick_duration_seconds_count"]
                    >= m0["inferscale_tick_duration_seconds_count"] + STEADY_TICKS
                ),
                STEADY_TICKS * 45,
                f"{STEADY_TICKS} more ticks",
                interval=5,  # the operator's /metrics is ~10 series per service: do not load what is measured
            )
            m1, (cpu1, rss, peak), t1 = scrape(op), proc_stats(op.proc.pid), time.monotonic()
            ticks = m1["inferscale_tick_duration_seconds_count"] - m0["inferscale_tick_duration_seconds_count"]

            def per_tick(metric: str) -> float:
                return (m1.get(metric, 0.0) - m0.get(metric, 0.0)) / ticks

            queries = per_tick("inferscale_prometheus_queries_total")
            tick_s = per_tick("inferscale_tick_duration_seconds_sum")
            rec_s = per_tick("inferscale_reconcile_duration_seconds_sum")
            kube_s = per_tick('inferscale_tick_phase_seconds_sum{phase="kubernetes"}')
            prom_s = per_tick('inferscale_tick_phase_seconds_sum{phase="prometheus"}')
            written = per_tick('inferscale_status_writes_total{outcome="written"}')
            refreshed = per_tick('inferscale_status_writes_total{outcome="refreshed"}')
            dropped = per_tick('inferscale_status_writes_total{outcome="dropped"}')
            skipped = per_tick('inferscale_status_writes_total{outcome="unchanged"}')
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
                for name in chosen:
                    if name not in latency and api.replicas(ns, name) > 1:
                        latency[name] = time.monotonic() - changed_at
                time.sleep(0.5)  # the poll period of the measurement, not a wait for a condition
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
        "kube_s": kube_s,
        "prom_s": prom_s,
        "reconcile_s": rec_s,
        "status_writes": written,
        "status_refreshed": refreshed,
        "status_dropped": dropped,
        "status_total": written + refreshed + dropped + skipped,
        "cpu_cores": cpu,
        "rss_mb": rss,
        "peak_rss_mb": peak,
        "reacted": f"{len(lat)}/{len(chosen)}",
        "reaction_p50_s": statistics.median(lat) if lat else float("nan"),
        "reaction_p95_s": q[18],
    }


def seconds(value: float) -> str:
    """A latency cell: "-" where there is no figure (no sample, or one sample for a P95)."""
    return "-" if math.isnan(value) else f"{value:.1f} s"


def component_versions(cluster: Cluster) -> dict[str, str]:
    """The versions the figures were measured on, as the running components report them."""
    server = cluster.kubectl_json("version")["serverVersion"]["gitVersion"]
    with urllib.request.urlopen(f"{cluster.prometheus_url}/api/v1/status/buildinfo", timeout=10) as resp:
        prometheus = json.load(resp)["data"]["version"]
    return {"kube-apiserver": str(server), "prometheus": str(prometheus)}


def machine() -> str:
    with open("/proc/meminfo") as f:
        total_kib = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return f"{os.cpu_count()} cores, {total_kib / 2**20:.0f} GiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,100,1000")
    parser.add_argument("--sample", type=int, default=20, help="services whose reaction latency is measured")
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "docs" / "operator-benchmark.md")
    args = parser.parse_args()
    cluster = start_local_cluster()
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(REPO / "crds"))
    nodes(cluster)
    versions = component_versions(cluster)
    rows = [run_size(cluster, int(s), args.sample) for s in args.sizes.split(",")]
    header = (
        "| services | PromQL queries/tick | tick: read (lists / PromQL) | decide+act+status | whole tick | "
        "status writes/tick: in the tick + paced refreshes (dropped) | operator CPU (cores) | RSS (peak) | "
        "reaction P50 | reaction P95 | reacted |"
    )
    lines = [header, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['services']} | {r['queries_per_tick']:.1f} | {r['tick_s']:.2f} s ({r['kube_s']:.2f} / "
            f"{r['prom_s']:.2f}) | {r['reconcile_s']:.2f} s | {r['tick_s'] + r['reconcile_s']:.2f} s | "
            f"{r['status_writes']:.1f} + {r['status_refreshed']:.1f} ({r['status_dropped']:.1f}) of "
            f"{r['status_total']:.0f} | {r['cpu_cores']:.2f} | "
            f"{r['rss_mb']:.0f} MB ({r['peak_rss_mb']:.0f} MB) | {seconds(r['reaction_p50_s'])} | "
            f"{seconds(r['reaction_p95_s'])} | {r['reacted']} |"
        )
    table = "\n".join(lines)
    print(table)
    args.out.write_text(f"""# Operator scale benchmark

Produced by `make bench-operator` (`.venv/bin/python e2e/bench_operator.py --sizes {args.sizes}`) on the local
stack: kube-apiserver {versions["kube-apiserver"]}, kwok nodes, Prometheus {versions["prometheus"]} scraping every
5 s; the operator ticks every {TICK}. Machine: {machine()}, shared with the control plane, Prometheus and the
metrics fixture (so CPU figures include contention).

- **PromQL queries/tick**: the operator's own `inferscale_prometheus_queries_total` over {STEADY_TICKS} steady
  ticks (instant queries plus the incremental range query for the forecaster's history).
- **read**: `inferscale_tick_duration_seconds`: the three Kubernetes lists (InferenceServices, HPAs,
  ScaledObjects, in pages of 500; pods and Deployments come from watch-fed caches, listed only while a cache is
  out of sync) and the PromQL set, which run concurrently; the parts are `inferscale_tick_phase_seconds`.
  **decide+act+status**: `inferscale_reconcile_duration_seconds`, every service's decision, /scale writes and
  the status writes that carry news. **whole tick**: the two together.
- **status writes/tick**: `inferscale_status_writes_total`: a status that says something new (a count, a
  reason, a condition, the scaler's record) is written in the tick; a status whose figures alone are older
  than 30 s is queued and written at an even pace between ticks, all landed before the next tick reads
  (dropped: not sent by then; that tick computes fresher figures).
- **CPU, RSS**: from /proc of the operator process over the same ticks; peak = VmHWM since start.
- **reaction**: {args.sample} services' exporters switch to KV 95% / 20 waiting at once; time until their
  Deployment's `/scale` shows more replicas (polled every 0.5 s). The budget is one scrape (5 s) plus the
  tick ({TICK}) plus processing; goal: <= scrape + 2 ticks.

{table}

Goals (issue #3): 1000 services at a 15 s tick with <= 10 queries per tick, tick <= 2 s, RSS <= 300 MB;
reaction <= scrape interval + 2 ticks ({5 + 2 * 15} s).
""")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
