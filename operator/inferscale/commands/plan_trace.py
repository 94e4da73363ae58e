"""`inferscale plan --trace`: size for real traffic instead of one rate and one request length."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from inferscale.commands.replay_options import trace_window
from inferscale.perf import ReplicaProfile
from inferscale.scaling.durations import format_duration
from inferscale.sim.scenario import Scenario, expected_requests
from inferscale.sim.sizing import CurveSizing, mean_lengths, size_curve
from inferscale.sim.traces import RatePoint


@dataclass(frozen=True)
class TraceLoad:
    scenario: Scenario
    curve: list[RatePoint]
    span: float
    mean_lengths: tuple[int, int]  # request-weighted, whole tokens, for the plan's one-request tables


def load(
    trace: Path, fmt: str | None, rate_scale: float, time_scale: float, start: str | None, duration: str | None
) -> TraceLoad:
    """The trace's rate curve as `simulate --mode fluid` replays it. Raises InputError, or a ValueError
    (TraceError among them) with a message, also when the selected part holds no request."""
    scenario = trace_window(trace, fmt, rate_scale, time_scale, start, duration)
    curve, span, total = expected_requests(scenario)
    if total < 1:  # sized, it read 0 replicas
        raise ValueError(
            f"the selected part of the trace holds no request; nothing to size ({total:.3g} expected at "
            f"--rate-scale {rate_scale:g})"
        )
    mean_in, mean_out = mean_lengths(curve, span)
    return TraceLoad(scenario, curve, span, (max(1, round(mean_in)), max(1, round(mean_out))))


def section(
    loaded: TraceLoad, profile: ReplicaProfile, slo_ttft: float | None, slo_itl: float | None, replica_cost: float
) -> tuple[dict[str, Any], CurveSizing]:
    sizing = size_curve(profile, loaded.curve, loaded.span, slo_ttft, slo_itl)
    s, peak = loaded.scenario, sizing.peak
    following, at_peak = sizing.replica_hours_following, sizing.replica_hours_at_peak
    return {
        "path": str(s.trace),
        "format": s.fmt,
        "rate_scale": s.rate_scale,
        "time_scale": s.time_scale,
        "start_s": s.start,
        "duration_s": sizing.span,
        "windows": len(sizing.windows),
        "window_s": sizing.windows[0].length if len(sizing.windows) > 1 else sizing.span,
        "requests": sizing.requests,
        "mean_rps": sizing.requests / sizing.span,
        "mean_input_tokens": sizing.mean_input_tokens,
        "mean_output_tokens": sizing.mean_output_tokens,
        "peak": {
            "at_s": peak.t,
            "rps": peak.rate_rps,
            "input_tokens": peak.input_tokens,
            "output_tokens": peak.output_tokens,
            "replicas": peak.replicas,
            # the top-level replica_capacity_rps is at the trace's mean request; the peak is sized at its own
            "replica_capacity_rps": peak.capacity_rps,
        },
        "unattainable_windows": len(sizing.unattainable),
        "replica_hours_following_need": following,
        "replica_hours_at_peak": at_peak,
        "gpu_hours_following_need": None if following is None else following * profile.gpus,
        "gpu_hours_at_peak": None if at_peak is None else at_peak * profile.gpus,
        "cost_following_need": None if following is None else following * replica_cost,
        "cost_at_peak": None if at_peak is None else at_peak * replica_cost,
    }, sizing


def render(plan: dict[str, Any], console: Console) -> None:
    tr = plan["trace"]
    peak = tr["peak"]
    t = Table(title=f"traffic: {Path(tr['path']).name}")
    t.add_column("item")
    t.add_column("value", justify="right")
    since = f"--start {format_duration(tr['start_s'])}" if tr["start_s"] else "the trace's start"
    t.add_row("replayed", f"{format_duration(tr['duration_s'])} from {since}")
    t.add_row("windows", f"{tr['windows']:,} of {format_duration(tr['window_s'])}")
    t.add_row("requests", f"{tr['requests']:,.0f} ({tr['mean_rps']:,.2f} req/s on average)")
    t.add_row("mean request", f"{tr['mean_input_tokens']:,.0f} in / {tr['mean_output_tokens']:,.0f} out")
    if peak["replicas"] is not None:
        lengths = (
            f" of {peak['input_tokens']:,.0f} in / {peak['output_tokens']:,.0f} out"
            if peak["input_tokens"] is not None and peak["output_tokens"] is not None
            else ""
        )
        count = f"{peak['replicas']} replica{'' if peak['replicas'] == 1 else 's'}"
        t.add_row(
            "the window needing the most replicas",
            f"{peak['rps']:,.2f} req/s{lengths} at {format_duration(peak['at_s']) if peak['at_s'] else '0s'}: {count}",
        )
    t.add_row("held at that need", _hours(tr["gpu_hours_at_peak"], tr["cost_at_peak"]))
    at_peak, following = tr["gpu_hours_at_peak"], tr["gpu_hours_following_need"]
    share = f" ({following / at_peak:.0%} of holding the most)" if at_peak and following is not None else ""
    t.add_row("following each window's need", _hours(following, tr["cost_following_need"]) + share)
    console.print(t)
    console.print(
        "Following each window's need exactly, with no cold start and no headroom, is the least any autoscaler "
        "spends; `inferscale tune` replays the trace with inferscale to show what it spends at the SLO."
    )
    if tr["unattainable_windows"]:
        served = (
            "the figures above leave them out, so they are a lower bound"
            if at_peak is not None
            else ("no window can be served, so there is no figure to give")
        )
        console.print(
            f"note: in {tr['unattainable_windows']:,} of {tr['windows']:,} windows no replica count serves the "
            "requests: at their mean lengths one replica carries no load within the SLO and the engine's limits, "
            f"or they are longer than the model's context window; {served}.",
            style="yellow",
        )


def _hours(gpu_hours: float | None, cost: float | None) -> str:
    if gpu_hours is None or cost is None:
        return "n/a: no window can be served"
    return f"{gpu_hours:,.1f} GPU-h, ${cost:,.2f}"
