"""The Prometheus options `run` and `export-trace` share: one reader of the same server, with the same
credentials, for the operator and for the traffic a user exports from it."""

from __future__ import annotations

from typing import Annotated

import typer

PrometheusUrlOpt = Annotated[str, typer.Option(help="Prometheus base URL.", envvar="PROMETHEUS_URL")]
BearerTokenFileOpt = Annotated[
    str | None,
    typer.Option(
        help="Send this file's token as 'Authorization: Bearer' (read again when the file changes, as the "
        "kubelet rotates service-account tokens); OpenShift's thanos-querier takes the pod's own "
        "/var/run/secrets/kubernetes.io/serviceaccount/token.",
        envvar="PROMETHEUS_BEARER_TOKEN_FILE",
    ),
]
UsernameOpt = Annotated[
    str | None,
    typer.Option(
        help="Basic-auth user for Prometheus (with --prometheus-password-file).", envvar="PROMETHEUS_USERNAME"
    ),
]
PasswordFileOpt = Annotated[
    str | None,
    typer.Option(
        help="File holding the basic-auth password (read again when it changes).", envvar="PROMETHEUS_PASSWORD_FILE"
    ),
]
CaFileOpt = Annotated[
    str | None,
    typer.Option(
        help="PEM CA bundle to verify Prometheus's TLS certificate with, instead of the system's CAs.",
        envvar="PROMETHEUS_CA_FILE",
    ),
]
HeaderOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="Extra header on every query, 'Name: value' (repeatable), e.g. 'X-Scope-OrgID: team-a' for Mimir."
    ),
]
TimeoutOpt = Annotated[
    str,
    typer.Option(
        help="How long one PromQL query may take; a tick against a Prometheus that does not answer "
        "fails its queries after this and holds every service's count."
    ),
]
