"""Timeline plots of a replay: load, replicas per policy, observed TTFT P95 against the SLO."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from matplotlib.figure import Figure

from inferscale.sim.run import Timeline

# the references (they know what no policy can) are drawn apart from the policies
_REFERENCE_STYLES: dict[str, dict[str, str]] = {
    "oracle": {"ls": "--", "color": "black"},
    "reactive-oracle": {"ls": ":", "color": "gray"},
}


def plot_formats() -> frozenset[str]:
    """File suffixes (without the dot) `plot_timelines` can write: matplotlib picks the format from it. Not
    PGF, which needs a LaTeX installation to write: it would fail after the whole replay."""
    return frozenset(Figure().canvas.get_supported_filetypes()) - {"pgf"}


def plot_timelines(path: Path, timelines: Mapping[str, Timeline], slo_ttft: float, title: str) -> None:
    """Three stacked panels sharing the time axis (hours); writes a PNG to `path`."""
    fig = Figure(figsize=(11, 9))  # no pyplot: no global backend state, safe in worker processes
    load_ax, rep_ax, ttft_ax = fig.subplots(3, 1, sharex=True)
    first = next(iter(timelines.values()), None)
    if first is not None:
        load_ax.plot([t / 3600 for t in first.at], first.load_rps, color="black", lw=1)
    load_ax.set_ylabel("load (req/s)")
    load_ax.set_title(title)
    for name, tl in timelines.items():
        hours = [t / 3600 for t in tl.at]
        style = _REFERENCE_STYLES.get(name, {})
        rep_ax.step(hours, tl.provisioned, where="post", lw=1.2, label=name, **style)
        ttft_ax.plot(hours, [v if v is not None else float("nan") for v in tl.ttft_p95], lw=1, label=name, **style)
    rep_ax.set_ylabel("replicas provisioned")
    rep_ax.legend(fontsize=7, ncol=3, loc="upper left")
    ttft_ax.axhline(slo_ttft, color="red", lw=1, ls=":", label="SLO")
    ttft_ax.set_yscale("log")
    ttft_ax.set_ylabel("observed TTFT P95 (s)")
    ttft_ax.set_xlabel("time (h)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
