"""The `inferscale` command. Each subcommand lives in inferscale.commands.<name>."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="inferscale",
    help="SLO-aware autoscaling of LLM inference servers on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Registration: one line per subcommand module (keep sorted).


def main() -> None:
    app()
