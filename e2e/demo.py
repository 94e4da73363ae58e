"""`make demo`: inferscale scaling a simulated GPU fleet on a real control plane, watched live.

1. the local stack (control plane built from Go modules on the first run, then cached; kwok GPU
   nodes; Prometheus);
2. the Helm chart (CRD, RBAC, ServiceAccount, the admission policy narrowing its writes);
3. a vLLM Deployment whose pods take 20-40 s to become Ready (a 4-8 minute model load at the replay's
   12x speed), and an InferenceService for it;
4. the operator, run out of cluster with the chart's ServiceAccount token (the pods of simulated
   nodes run nothing), and `inferscale emulate`: one simulated engine per Ready pod, replaying the
   Azure LLM conversation trace (58 minutes of production traffic) compressed to five minutes;
5. a live view, then a summary: SLO attainment and GPU-hours against static peak provisioning,
   written to .demo/summary.json and .demo/timeline.png.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

from inferscale.emulator import late_routing, unserved

REPO = pathlib.Path(__file__).resolve().parents[1]
OUT = REPO / ".demo"
VENV = REPO / ".venv" / "bin"
# A fresh namespace per run: Prometheus keeps earlier runs' series (the forecaster would read their
# history as this service's) and Events outlive their objects.
NS = f"demo-{time.strftime('%H%M%S')}"
RELEASE_NS = "inferscale-system"
# An hour of a production conversation service (Azure, Splitwise): a slow hump of +60% and back.
TRACE = REPO.parent / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PROFILE = ("llama-3.1-8b", "h100-80gb")
MIN_REPLICAS, MAX_REPLICAS = 2, 16
SLO_TTFT, SLO_ITL = 0.5, 0.05
READY_TIMEOUT, READY_POLL = 300.0, 2.0  # seconds for the warm fleet to become Ready, and between two looks


def sh(*args: str, input: str | None = None, check: bool = True, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(args, input=input, capture_output=True, text=True, env=env, check=False)
    if check and proc.returncode != 0:
        sys.exit(f"demo: {' '.join(args[:4])} ... failed:\n{proc.stderr.strip()}")
    return proc.stdout


def read_env() -> dict[str, str]:
    out = {}
    for line in (REPO / ".e2e" / "env").read_text().splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[7:].split("=", 1)
            out[k] = v.strip('"')
    return out


def warm_replicas(time_scale: float, rate_scale: float, duration: float) -> int:
    """The fleet the replay starts with: what inferscale's default target holds for the replay's first
    minute at the perf model's capacity. The trace starts mid-traffic (its first minute already carries
    the hour's base load), so a warm fleet is the one an autoscaler running before the replay would have
    left; fewer would make the first minute a step from zero onto an undersized fleet, which a one-minute
    request rate sees only as it fills."""
    from inferscale.emulator import busiest_minute_replicas
    from inferscale.perf import replica_profile
    from inferscale.scaling.capacity import DEFAULT_UTILIZATION
    from inferscale.sim.traces import load_request_arrays

    requests, _ = load_request_arrays(TRACE, "azure", rate_scale, time_scale, duration)
    need = busiest_minute_replicas(
        requests, replica_profile(*PROFILE), SLO_TTFT, SLO_ITL, 60.0, utilization=DEFAULT_UTILIZATION
    )
    return min(max(need or MIN_REPLICAS, MIN_REPLICAS), MAX_REPLICAS)


def deployment(replicas: int, ready_delay: str, ready_jitter: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llama-8b", "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "llama-8b"}},
            "template": {
                "metadata": {
                    "labels": {"app": "llama-8b"},
                    # kwok: Ready after a uniform 20-40 s. The replay runs 12x faster than the trace, so this is a 4-8
                    # minute model load in trace time, a real vLLM cold start (BLIS: 240 +- 30 s).
                    "annotations": {
                        "pod-ready.stage.kwok.x-k8s.io/delay": ready_delay,
                        "pod-ready.stage.kwok.x-k8s.io/jitter-delay": ready_jitter,
                    },
                },
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "vllm/vllm-openai:v0.11.0",
                            "args": ["--model", MODEL, "--max-num-seqs", "1024"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                },
            },
        },
    }


def service() -> dict[str, Any]:
    return {
        "apiVersion": "inferscale.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "llama-8b", "namespace": NS},
        "spec": {
            "model": {"name": MODEL, "profile": PROFILE[0], "gpu": PROFILE[1]},
            "engine": "vllm",
            "scaleTargetRef": {"name": "llama-8b"},
            "replicas": {"min": MIN_REPLICAS, "max": MAX_REPLICAS},
            "slo": {"ttftP95": f"{SLO_TTFT * 1000:.0f}ms", "itlMean": f"{SLO_ITL * 1000:.0f}ms"},
            # the scale-down window left to its default: the measured start (20-40 s) and a minute
            "behavior": {"interval": "5s", "scaleDown": {"period": "30s"}},
            "warmup": {"timeToReady": "30s", "predictive": True},
        },
    }


def operator_kubeconfig(env: dict[str, str]) -> pathlib.Path:
    """A kubeconfig that authenticates as the chart's ServiceAccount: the operator gets exactly the
    chart's RBAC, as it would in a real cluster."""
    kc = json.loads(sh("kubectl", "config", "view", "--raw", "-o", "json", env=env))
    cluster = kc["clusters"][0]["cluster"]
    token = sh("kubectl", "create", "token", "inferscale", "-n", RELEASE_NS, "--duration=2h", env=env).strip()
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": "inferscale", "user": {"token": token}}],
        "contexts": [{"name": "inferscale", "context": {"cluster": "e2e", "user": "inferscale"}}],
        "current-context": "inferscale",
    }
    path = OUT / "operator-kubeconfig"
    path.write_text(json.dumps(cfg))
    path.chmod(0o600)
    return path


def duration(text: str) -> float:
    """--duration as `inferscale emulate` reads it (300s, 5m), checked before the cluster starts."""
    from inferscale.scaling.durations import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return seconds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time-scale", type=float, default=12.0, help="trace compression (12: 58 min in ~5 min)")
    parser.add_argument("--rate-scale", type=float, default=1.5, help="request-rate multiplier")
    parser.add_argument("--duration", type=duration, default=300.0, help="replay length after compression (300s, 5m)")
    return parser.parse_args(argv)


def exit_on_signals() -> None:
    """SIGTERM (`timeout`, a cancelled CI job) and SIGHUP (a closed terminal) exit through the `finally`
    blocks, as Ctrl-C does: Python's default for them skips those, and the operator would keep its port and
    the leader Lease, the emulator would go on replaying into the cluster."""

    def leave(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)


def stop(proc: subprocess.Popen[bytes], sig: signal.Signals, timeout: float) -> None:
    """Signal a child that is still running and wait for it; kill it if it does not exit in time."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_ready(env: dict[str, str], want: int) -> int:
    """Ready replicas of the Deployment once `want` are, or READY_TIMEOUT has passed."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        dep = json.loads(sh("kubectl", "get", "deployment", "llama-8b", "-n", NS, "-o", "json", env=env))
        ready = int((dep.get("status") or {}).get("readyReplicas") or 0)
        if ready >= want or time.monotonic() >= deadline:
            return ready
        time.sleep(READY_POLL)


def watch(
    env: dict[str, str], operator: subprocess.Popen[bytes], emulator: subprocess.Popen[bytes], seconds: float
) -> tuple[list[dict[str, Any]], int | None]:
    """The live view until the replay ends or the operator exits, and the operator's exit code if it did: it
    should outlive the replay. Neither child outlives the view, however it ends (Ctrl-C, SIGTERM)."""
    try:
        history = live(env, emulator, operator, seconds)
        return history, operator.poll()
    finally:
        stop(emulator, signal.SIGTERM, 30)  # a stopped replay still writes what it served
        stop(operator, signal.SIGTERM, 40)


def opt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def live(
    env: dict[str, str], emulator: subprocess.Popen[bytes], operator: subprocess.Popen[bytes], seconds: float
) -> list[dict[str, Any]]:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    history: list[dict[str, Any]] = []
    start = time.monotonic()
    console = Console()
    with Live(console=console, refresh_per_second=2, transient=False) as view:
        while emulator.poll() is None and operator.poll() is None:
            raw = sh("kubectl", "get", "inferenceservice", "llama-8b", "-n", NS, "-o", "json", check=False, env=env)
            st = (json.loads(raw) if raw else {}).get("status") or {}
            obs, dec = st.get("observed") or {}, st.get("decision") or {}
            t = time.monotonic() - start
            history.append(
                {
                    "t": t,
                    "replicas": st.get("replicas"),
                    "desired": st.get("desiredReplicas"),
                    "ready": st.get("readyReplicas"),
                    "ttft_p95": obs.get("ttftP95"),
                    "reason": dec.get("reason"),
                }
            )
            table = Table(title=f"inferscale demo  t={t:5.0f}s / ~{seconds:.0f}s   (kubectl get infsvc -n {NS})")
            for col in ("replicas", "desired", "ready", "TTFT P95", "KV %", "waiting", "req/s"):
                table.add_column(col, justify="right")
            table.add_row(
                str(st.get("replicas", "-")),
                str(st.get("desiredReplicas", "-")),
                str(st.get("readyReplicas", "-")),
                str(obs.get("ttftP95") or "-"),
                str(obs.get("kvCachePercent", "-")),
                str(obs.get("waiting", "-")),
                f"{obs['requestRate']:.0f}" if obs.get("requestRate") is not None else "-",
            )
            decision = Table.grid(padding=(0, 1))
            decision.add_row("[bold]last decision[/]", f"{dec.get('reason', '-')}: {dec.get('message', '-')}")
            for c in st.get("conditions") or []:
                if c.get("type") in ("MetricsAvailable", "SLOMet", "ScalingLimited"):
                    decision.add_row(f"{c['type']}={c['status']}", c.get("message", ""))
            outer = Table.grid()
            outer.add_row(table)
            outer.add_row(decision)
            view.update(outer)
            time.sleep(2.0)
    return history


def plot(summary: dict[str, Any], history: list[dict[str, Any]], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = summary["timeline"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    ax1.plot([s["t"] for s in tl], [s["arrivals_per_s"] for s in tl], color="tab:gray", label="arrivals/s")
    ax1.set_ylabel("requests/s")
    twin = ax1.twinx()
    twin.step([s["t"] for s in tl], [s["pods"] for s in tl], where="post", color="tab:blue", label="pods (GPUs held)")
    twin.step([s["t"] for s in tl], [s["ready"] for s in tl], where="post", color="tab:green", label="Ready pods")
    desired = [(h["t"], h["desired"]) for h in history if h["desired"] is not None]
    if desired:
        twin.step(*zip(*desired, strict=True), where="post", color="tab:orange", ls="--", label="desired")
    twin.set_ylabel("replicas")
    lines = ax1.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax1.legend(lines, [ln.get_label() for ln in lines], loc="upper left", fontsize=8)
    ax1.set_title("inferscale demo: load, replicas and decisions")
    ax2.plot([s["t"] for s in tl], [s["waiting"] for s in tl], color="tab:red", label="waiting requests")
    ax2.set_ylabel("waiting")
    ax2.set_xlabel("seconds since the replay started")
    kv = [(s["t"], 100 * s["kv"]) for s in tl if s["kv"] is not None]
    if kv:
        t2 = ax2.twinx()
        t2.plot(*zip(*kv, strict=True), color="tab:purple", label="KV cache %")
        t2.set_ylabel("KV cache %")
    ax2.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(result: dict[str, Any]) -> None:
    """The summary's headline; a value no request gave (None) prints as '-'."""
    gh, sp = result["gpu_hours"], result["static_peak_gpu_hours"]
    print("\n== summary")
    print(
        f"requests: {result['finished']}/{result['requests']} finished, "
        f"SLO attainment {opt(result['slo_attainment'], '.1%')} (TTFT <= 500ms and mean ITL <= 50ms)"
    )
    print(f"TTFT P95 {opt(result['ttft_p95_s'], '.3f')}s, P99 {opt(result['ttft_p99_s'], '.3f')}s")
    cut = result.get("missed_unfinished") or 0
    print(
        f"missed: {result['missed_ttft']} on TTFT, {result['missed_itl_only']} on mean ITL alone "
        "(a fast first token, then a stream slowed by the batch it shared)"
        + (f", {cut} cut off unfinished" if cut else "")
    )
    late = late_routing(result)
    if late is not None:
        print(f"warning: {late}")
    if sp:
        print(
            f"GPU-hours {gh:.3f} vs {sp:.3f} for static peak provisioning ({result['static_peak_replicas']} "
            f"replicas all the time): {abs(100 * (1 - gh / sp)):.0f}% {'fewer' if gh <= sp else 'more'}"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exit_on_signals()
    OUT.mkdir(exist_ok=True)

    cached = any((pathlib.Path.home() / ".cache" / "inferscale-e2e").glob("*/bin/kube-apiserver"))
    print("== 1/5 local stack: etcd, kube-apiserver, controller-manager, scheduler, kwok, Prometheus")
    if not cached:
        print("   first run: building the control plane from Go modules (about 10 minutes, cached afterwards)")
    if subprocess.run(["bash", str(REPO / "e2e" / "cluster.sh"), "up"], check=False).returncode != 0:
        return 1
    env = {**os.environ, **read_env()}
    env["PATH"] = f"{env['E2E_BIN']}:{VENV}:{os.environ.get('PATH', '')}"

    print("== 2/5 helm install charts/inferscale (CRD, ServiceAccount, RBAC, admission policy)")
    for old in sh("kubectl", "get", "namespaces", "-l", "inferscale.dev/demo", "-o", "name", env=env).split():
        sh("kubectl", "delete", old, "--wait=false", check=False, env=env)
    sh("kubectl", "create", "namespace", NS, env=env)
    sh("kubectl", "label", "namespace", NS, "inferscale.dev/demo=true", env=env)
    sh(
        "helm",
        "upgrade",
        "--install",
        "inferscale",
        str(REPO / "charts" / "inferscale"),
        "-n",
        RELEASE_NS,
        "--create-namespace",
        "--set",
        f"watch.allNamespaces=false,watch.namespaces={{{NS}}}",
        "--wait=false",
        env=env,
    )
    # Simulated nodes run no processes: the chart's operator pod would be an empty shell, so the
    # operator runs here, as the chart's ServiceAccount.
    sh("kubectl", "scale", "deployment", "inferscale", "-n", RELEASE_NS, "--replicas=0", env=env)

    print(f"== 3/5 namespace {NS}: a vLLM Deployment (pods Ready after 20-40 s) and its InferenceService")
    initial = warm_replicas(args.time_scale, args.rate_scale, args.duration)
    sh("kubectl", "apply", "-f", "-", input=json.dumps(deployment(initial, "20s", "40s")), env=env)
    sh("kubectl", "apply", "-f", "-", input=json.dumps(service()), env=env)

    print(
        f"   waiting for the first {initial} replicas to load the model (20-40 s: 4-8 min at 12x); {initial} is what "
        "inferscale's 80% target holds for the replay's first minute (the trace starts mid-traffic)"
    )
    ready = wait_ready(env, initial)
    if ready < initial:
        print(
            f"demo: {ready} of {initial} pods of llama-8b became Ready in {READY_TIMEOUT:.0f} s, so the replay would "
            f"not start warm; see kubectl get pods,events -n {NS}",
            file=sys.stderr,
        )
        return 1
    print("== 4/5 operator (as the chart's ServiceAccount) and emulator (one simulated engine per Ready pod)")
    kc = operator_kubeconfig(env)
    # Both logs stay open for the lifetime of the child processes that write them.
    op_log, em_log = open(OUT / "operator.log", "wb"), open(OUT / "emulator.log", "wb")  # noqa: SIM115
    operator = subprocess.Popen(
        [
            str(VENV / "inferscale"),
            "run",
            "-n",
            NS,
            "--prometheus-url",
            env["PROMETHEUS_URL"],
            "--interval",
            "5s",
            "--metrics-port",
            "18080",
            "--kubeconfig",
            str(kc),
            # as the chart runs it: acting only while it holds the release's Lease
            "--leader-elect",
            "--leader-elect-namespace",
            RELEASE_NS,
            "--leader-elect-lease",
            "inferscale",
        ],
        stdout=op_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    emulator = subprocess.Popen(
        [
            str(VENV / "inferscale"),
            "emulate",
            "-n",
            NS,
            "--deployment",
            "llama-8b",
            "--trace",
            str(TRACE),
            "--time-scale",
            str(args.time_scale),
            "--rate-scale",
            str(args.rate_scale),
            "--duration",
            f"{args.duration:.6f}".rstrip("0").rstrip(".") + "s",
            "--model-name",
            MODEL,
            "--results",
            str(OUT / "emulator.json"),
            "--targets-dir",
            env["E2E_PROMETHEUS_TARGETS"],
        ],
        stdout=em_log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        print("== 5/5 live view (Ctrl-C stops the demo)")
        history, operator_exit = watch(env, operator, emulator, args.duration)
    except KeyboardInterrupt:
        return 130
    if operator_exit is not None:
        print(f"demo: the operator exited with {operator_exit}; see {OUT / 'operator.log'}", file=sys.stderr)
        return 1
    if emulator.returncode != 0:
        print(f"demo: the emulator failed; see {OUT / 'emulator.log'}", file=sys.stderr)
        return 1

    result = json.loads((OUT / "emulator.json").read_text())
    events = json.loads(sh("kubectl", "get", "events", "-n", NS, "-o", "json", env=env))["items"]
    scalings = [f"{e['reason']}: {e['message']}" for e in events if e.get("reason") in ("ScaledUp", "ScaledDown")]
    summary = {k: v for k, v in result.items() if k != "timeline"}
    summary["scale_actions"] = scalings
    # the operator logs each scale, each change of decision and a minute of a missed SLO; this run's lines, unprefixed
    mark = f" {NS}/llama-8b: "
    decisions = [ln.split(mark, 1)[1] for ln in (OUT / "operator.log").read_text().splitlines() if mark in ln]
    summary["decisions"] = decisions
    summary["operator_history"] = history
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2))
    plot(result, history, OUT / "timeline.png")

    if result["finished"] == 0:
        print(
            f"demo: no request finished: {unserved(result, 'llama-8b')}; see {OUT / 'emulator.log'} and kubectl get "
            f"pods -n {NS}",
            file=sys.stderr,
        )
        return 1
    report(result)
    print(f"{len(scalings)} scale actions, e.g.:")
    for line in scalings[:4]:
        print("  " + line)
    print(
        f"{len(decisions)} decisions told (each scale; each hold that is news: metrics missing, a limit, a breach "
        f"that begins or ends; a minute apart while the SLO is missed), from {OUT / 'operator.log'}:"
    )
    for line in decisions[:12]:
        print("  " + (line if len(line) <= 160 else line[:157] + "..."))
    print(
        f"wrote {OUT / 'summary.json'} and {OUT / 'timeline.png'}; the cluster is still up "
        f"(source .e2e/env; kubectl get infsvc -n {NS}); stop it with: make cluster-down"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
