"""The `inferscale` command. Each subcommand lives in inferscale.commands.<name>."""

from __future__ import annotations

import errno
import sys

import typer

app = typer.Typer(
    name="inferscale",
    help="SLO-aware autoscaling of LLM inference servers on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Registration: one line per subcommand module (keep sorted).
from inferscale.commands import crd as _crd; app.command("crd")(_crd.crd)  # noqa: E402, E702, I001  # fmt: skip
from inferscale.commands import emulate as _emulate; app.command("emulate")(_emulate.emulate)  # noqa: E402, E702, I001  # fmt: skip
from inferscale.commands import export_trace as _export_trace; app.command("export-trace")(_export_trace.export_trace)  # noqa: E402, E702, I001  # fmt: skip
from inferscale.commands import plan as _plan; app.command("plan")(_plan.plan)  # noqa: E402, E702, I001  # fmt: skip
from inferscale.commands import run as _run; app.command("run")(_run.run)  # noqa: E402, E702, I001  # fmt: skip
from inferscale.commands import simulate as _simulate; app.command("simulate")(_simulate.simulate)  # noqa: E402, E702, I001  # fmt: skip
from inferscale.commands import tune as _tune; app.command("tune")(_tune.tune)  # noqa: E402, E702, I001  # fmt: skip


def main() -> None:
    try:
        app()
    except OSError as e:  # a reader that left (EPIPE) is click's to handle: exit 1, no message
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise
        # a full disk under a redirected stdout: one line, not a traceback
        print(f"inferscale: cannot write the output: {e.strerror}", file=sys.stderr)
        raise SystemExit(1) from None
