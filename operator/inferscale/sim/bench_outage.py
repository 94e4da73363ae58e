"""The benchmark's metrics outages: every request-level replay again with its metrics gone for its middle third.

Only the policies an outage reaches run again (`outage.BEHAVIOUR`); one it leaves alone would replay exactly as
without it (same seed, same code path), so its result is the replay's own. inferscale runs through each outage
twice: as it ships (`spec.metrics.podPort` unset, it holds while it cannot see) and with `podPort` set (it reads
the pods' /metrics and scales up on them), so the report shows what the setting buys on each replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from inferscale.scaling.durations import format_duration
from inferscale.sim.cold_start import Log, replay_each
from inferscale.sim.outage import BEHAVIOUR, KINDS, Behaviour, Outage
from inferscale.sim.policies.inferscale import Inferscale
from inferscale.sim.run import RunResult
from inferscale.sim.scenario import Scenario, prepare
from inferscale.sim.scores import share_text

INFERSCALE = Inferscale.name
SPAN = (1 / 3, 2 / 3)  # of the replay: long enough to hold through a ramp, with a third after to recover


@dataclass(frozen=True)
class OutageRun:
    """One kind of outage on one replay: policy name -> result (the replay's own where it is not reached)."""

    outage: Outage
    results: dict[str, RunResult]
    pods: RunResult | None = None  # inferscale with spec.metrics.podPort set (`simulate --read-pods`)


def window(duration: float) -> tuple[float, float]:
    """`SPAN` of a replay of `duration` seconds, on whole minutes."""
    start = max(60.0, 60.0 * round(SPAN[0] * duration / 60.0))
    return start, max(start + 60.0, 60.0 * round(SPAN[1] * duration / 60.0))


def replay(
    scenario: Scenario,
    duration: float,
    base: dict[str, RunResult],
    *,
    workers: int = 1,
    log: Log | None = None,
) -> list[OutageRun]:
    """The policies of `base` through each kind of outage over `window(duration)` of `scenario`."""
    start, end = window(duration)
    outages = [Outage(kind, start, end) for kind in KINDS]
    prepared = [prepare(replace(scenario, outage=o)) for o in outages]
    keys = [
        (i, name) for i, o in enumerate(outages) for name in base if BEHAVIOUR[name][o.kind] is not Behaviour.UNAFFECTED
    ]
    pods = len(prepared)  # the index of the first replay with podPort set
    if INFERSCALE in base:
        prepared += [prepare(replace(scenario, outage=o, reads_pods=True)) for o in outages]
        keys += [(pods + i, INFERSCALE) for i in range(len(outages))]
    if log is not None:
        log(f"  through a metrics outage from {format_duration(start)} to {format_duration(end)}")
    results = replay_each(prepared, keys, workers, log)
    return [
        OutageRun(o, {name: results.get((i, name), base[name]) for name in base}, results.get((pods + i, INFERSCALE)))
        for i, o in enumerate(outages)
    ]


def during(result: RunResult, outage: Outage) -> list[int]:
    """Replicas provisioned at each minute of the timeline inside the outage."""
    return [n for at, n in zip(result.timeline.at, result.timeline.provisioned, strict=True) if outage.covers(at)]


def _cell(result: RunResult, outage: Outage) -> str:
    counts = during(result, outage)
    span = f"; {min(counts)}-{max(counts)} replicas" if counts else ""
    return f"{share_text(result.scores.slo_attainment)} at {result.scores.gpu_hours:,.1f} GPU-h{span}"


def _row(title: str, base: RunResult, cells: Sequence[tuple[Behaviour, RunResult, OutageRun]]) -> str:
    through = [f"{behaviour.name.lower()}: {_cell(result, run.outage)}" for behaviour, result, run in cells]
    return f"| {title} | {_cell(base, cells[0][2].outage)} | " + " | ".join(through) + " |"


def section(runs: Sequence[tuple[str, dict[str, RunResult], list[OutageRun]]]) -> list[str]:
    """The report's section: per replay, each policy without an outage and through each kind."""
    runs = [run for run in runs if run[2]]
    if not runs:
        return []
    lines = [
        "## Through a metrics outage (request level)",
        "",
        "Each request-level replay again, with its metrics gone from the end of its first third to the end of its "
        "second (whole minutes). `prometheus-down`: the server does not answer, every query errors. "
        "`vllm-unscraped`: Prometheus answers, but the vLLM pods' series are gone, so queries on them come back "
        "empty. Each policy lives through it as the component it models does (`sim/outage.py`, from "
        "`reference/peer-autoscalers.md`): *blind* decides on what is left (inferscale on the Observation its "
        "adapter builds with no metric, which holds the count; KEDA's Prometheus trigger reads an empty result as 0 "
        "with `ignoreNullValues` at its default), *hold* skips its rounds as a controller whose fetch errors does "
        "(HPA, KEDA's HPA without a `fallback`, WVA, Dynamo), *unaffected* reads a source the outage leaves "
        "(Knative's queue-proxy, AIBrix's direct pod scrape, the DCGM exporter, Dynamo's frontend, the bounds): "
        "its result is the replay's own. After the outage Prometheus holds no samples for it: the rate history "
        "keeps a gap, and the first rates and latency histograms after it span only what was scraped since (the "
        "first scrape gives no rate at all). The row *inferscale, `podPort` set* is inferscale with "
        "`spec.metrics.podPort` (`simulate --read-pods`): through either kind it reads each Ready pod's /metrics "
        "itself (*pods*), makes rates between its own reads, and scales up on them, never down. Each cell: SLO "
        "attainment, GPU-hours, and the fewest to most replicas provisioned at the minutes inside the outage.",
        "",
    ]
    for name, base, outages in runs:
        start, end = outages[0].outage.start, outages[0].outage.end
        lines += [
            f"### {name}: metrics gone from {format_duration(start)} to {format_duration(end)}",
            "",
            "| policy | without an outage | " + " | ".join(o.outage.kind for o in outages) + " |",
            "|---|---|" + "---|" * len(outages),
        ]
        for policy, result in base.items():
            title = f"**{policy}**" if policy == INFERSCALE else policy
            lines.append(
                _row(title, result, [(BEHAVIOUR[policy][o.outage.kind], o.results[policy], o) for o in outages])
            )
            read = [(Behaviour.PODS, o.pods, o) for o in outages if o.pods is not None]
            if policy == INFERSCALE and len(read) == len(outages):
                lines.append(_row("**inferscale**, `podPort` set", result, read))
        lines.append("")
    return lines
