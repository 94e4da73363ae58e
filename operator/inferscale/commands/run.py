"""`inferscale run`: the operator."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from inferscale.commands.prometheus_options import (
    BearerTokenFileOpt,
    CaFileOpt,
    HeaderOpt,
    PasswordFileOpt,
    PrometheusUrlOpt,
    TimeoutOpt,
    UsernameOpt,
)

T = TypeVar("T")
M_ARENA_MAX = -8  # glibc mallopt parameter


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """glibc gives threads that allocate their own malloc arenas (up to 8 per core) and seldom returns
    their memory, so the PromQL answers parsed in worker threads would keep every arena's peak
    resident (about 30 MB at 1000 services). Same as MALLOC_ARENA_MAX=2, which wins when set;
    a no-op where the C library is not glibc."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError):
        return False


def _checked(check: Callable[..., T], *args: Any) -> T:
    """`check(*args)` from commands.checks, or exit 2 with its one line: past this point kopf would log a
    traceback for bad credentials and retry forever."""
    from inferscale.commands.checks import InputError

    try:
        return check(*args)
    except InputError as e:
        typer.echo(f"inferscale run: {e}", err=True)
        raise typer.Exit(2) from None


def run(
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="Watch this namespace (repeatable).")
    ] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Watch every namespace.")] = False,
    prometheus_url: PrometheusUrlOpt = "http://prometheus-operated.monitoring.svc:9090",
    prometheus_bearer_token_file: BearerTokenFileOpt = None,
    prometheus_username: UsernameOpt = None,
    prometheus_password_file: PasswordFileOpt = None,
    prometheus_ca_file: CaFileOpt = None,
    prometheus_header: HeaderOpt = None,
    interval: Annotated[
        str,
        typer.Option(
            help="Tick: how often the cluster and Prometheus are read, and the decision interval "
            "for services that set none; at least 1s."
        ),
    ] = "10s",
    prometheus_timeout: TimeoutOpt = "10s",
    metrics_port: Annotated[int, typer.Option(help="Port of /metrics and /healthz.")] = 8080,
    kubeconfig: Annotated[
        str | None, typer.Option(help="Kubeconfig to use instead of KUBECONFIG or the in-cluster account.")
    ] = None,
    pod_deletion_cost: Annotated[
        bool,
        typer.Option(
            help="Before a scale-down, set controller.kubernetes.io/pod-deletion-cost on the target's Ready pods "
            "to the requests each holds, so the ReplicaSet removes the idlest (needs patch on pods)."
        ),
    ] = True,
    leader_elect: Annotated[
        bool,
        typer.Option(
            help="Act only while holding a coordination.k8s.io Lease, so that a second replica can stand by "
            "and take over once the Lease expires (15 s; 16-18 s in the e2e test); the process exits when it loses "
            "the Lease."
        ),
    ] = False,
    leader_elect_namespace: Annotated[
        str | None,
        typer.Option(
            help="Namespace of the Lease (default: POD_NAMESPACE, else the pod's own namespace).",
            envvar="POD_NAMESPACE",
        ),
    ] = None,
    leader_elect_lease: Annotated[str, typer.Option(help="Name of the Lease.")] = "inferscale",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the operator: read engine metrics, decide replicas, scale, explain."""
    import kopf

    from inferscale.handlers import operator as _handlers  # noqa: F401 - registers the kopf handlers
    from inferscale.handlers.operator import OperatorConfig

    if namespace and all_namespaces:
        typer.echo("inferscale run: --all-namespaces and --namespace exclude each other; give one", err=True)
        raise typer.Exit(2)
    if not namespace and not all_namespaces:
        typer.echo("inferscale run: give --all-namespaces or at least one --namespace", err=True)
        raise typer.Exit(2)
    from inferscale.commands import checks

    for ns in namespace or []:
        _checked(checks.namespace_name, "--namespace", ns)
    # twice watched, each service would be decided twice a tick and its pending pods counted twice
    _checked(checks.given_once, "--namespace", namespace or [])
    _checked(checks.http_url, "--prometheus-url", prometheus_url)
    access = _checked(
        checks.prometheus_access,
        prometheus_bearer_token_file,
        prometheus_username,
        prometheus_password_file,
        prometheus_ca_file,
        prometheus_header or [],
    )
    tick = _checked(checks.tick, "--interval", interval)
    query_timeout = _checked(checks.positive_duration, "--prometheus-timeout", prometheus_timeout)
    if not 0 < metrics_port < 65536:
        typer.echo(f"inferscale run: --metrics-port {metrics_port} is not a TCP port", err=True)
        raise typer.Exit(2)
    lease = _checked(checks.lease, leader_elect, leader_elect_namespace, leader_elect_lease)
    limit_malloc_arenas()  # before kopf and asyncio start any thread
    _checked(checks.credentials, kubeconfig)
    if kubeconfig:  # once it loads: kopf's own login reads it too
        os.environ["KUBECONFIG"] = kubeconfig
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    config = OperatorConfig(
        prometheus_url=prometheus_url.rstrip("/"),
        interval=tick,
        namespaces=None if all_namespaces else list(namespace or []),
        metrics_port=metrics_port,
        kubeconfig=kubeconfig,
        prometheus_timeout=query_timeout,
        pod_deletion_cost=pod_deletion_cost,
        prometheus_access=access,
        lease=lease,
    )
    # an asyncio.Event binds to kopf's loop when first awaited; kopf waits for a threading.Event in a thread
    # that nothing would release on a SIGTERM, which keeps the process from exiting
    memo = kopf.Memo(config=config, stop=asyncio.Event())
    kopf.run(
        standalone=True,
        clusterwide=all_namespaces,
        namespaces=list(namespace or []),
        memo=memo,
        stop_flag=memo.stop,
    )
    loop = getattr(memo, "loop", None)
    if loop is not None and loop.lost is not None:
        typer.echo(f"inferscale run: lost the leader lease ({loop.lost}); exiting", err=True)
        raise typer.Exit(1)
