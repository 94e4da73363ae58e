"""`inferscale run`: the operator."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from inferscale.scaling.durations import parse_duration


def run(
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="Watch this namespace (repeatable).")
    ] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Watch every namespace.")] = False,
    prometheus_url: Annotated[
        str, typer.Option(help="Prometheus base URL.", envvar="PROMETHEUS_URL")
    ] = "http://prometheus-operated.monitoring.svc:9090",
    interval: Annotated[
        str,
        typer.Option(
            help="Tick: how often the cluster and Prometheus are read, and the decision interval "
            "for services that set none."
        ),
    ] = "10s",
    metrics_port: Annotated[int, typer.Option(help="Port of /metrics and /healthz.")] = 8080,
    kubeconfig: Annotated[
        str | None, typer.Option(help="Kubeconfig to use instead of KUBECONFIG or the in-cluster account.")
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Run the operator: read engine metrics, decide replicas, scale, explain."""
    import kopf

    from inferscale.handlers import operator as _handlers  # noqa: F401 - registers the kopf handlers
    from inferscale.handlers.operator import OperatorConfig

    if bool(namespace) == all_namespaces:
        typer.echo("inferscale run: give --all-namespaces or at least one --namespace", err=True)
        raise typer.Exit(2)
    try:
        tick = parse_duration(interval)
    except ValueError as e:
        typer.echo(f"inferscale run: --interval: {e}", err=True)
        raise typer.Exit(2) from None
    if tick <= 0:
        typer.echo("inferscale run: --interval must be positive", err=True)
        raise typer.Exit(2)
    if not 0 < metrics_port < 65536:
        typer.echo(f"inferscale run: --metrics-port {metrics_port} is not a TCP port", err=True)
        raise typer.Exit(2)
    if kubeconfig:
        import os

        os.environ["KUBECONFIG"] = kubeconfig  # kopf's own login reads it too
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
    )
    kopf.run(
        standalone=True,
        clusterwide=all_namespaces,
        namespaces=list(namespace or []),
        memo=kopf.Memo(config=config),
    )
