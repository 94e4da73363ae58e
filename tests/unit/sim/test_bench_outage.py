from __future__ import annotations

from pathlib import Path

import pytest

from inferscale.sim.bench_outage import OutageRun, during, replay, section, window
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.outage import KINDS, PROMETHEUS_DOWN, VLLM_UNSCRAPED, Outage
from inferscale.sim.run import RunResult, Timeline, run_policy
from inferscale.sim.scenario import Scenario, prepare
from inferscale.sim.scores import Scores


@pytest.mark.parametrize(
    ("duration", "expected"),
    [(3502.0, (1140.0, 2340.0)), (1200.0, (420.0, 780.0)), (90.0, (60.0, 120.0))],
)
def test_the_outage_is_the_middle_third_on_whole_minutes(duration: float, expected: tuple[float, float]) -> None:
    assert window(duration) == expected


def test_only_the_policies_an_outage_reaches_run_again(azure_trace: Path) -> None:
    scenario = Scenario(azure_trace, rate_scale=30.0, time_to_ready=TimeToReady.parse("60s"))
    prepared = prepare(scenario)
    base = {
        n: run_policy(prepared.workload, prepared.policy(n), prepared.run_config)
        for n in ("static-peak", "inferscale", "hpa-gpu-util")
    }
    runs = replay(scenario, prepared.workload.duration, base)
    assert [r.outage for r in runs] == [Outage(kind, 180.0, 420.0) for kind in KINDS]
    down, unscraped = runs
    assert (
        down.results["static-peak"] is base["static-peak"] and unscraped.results["static-peak"] is base["static-peak"]
    )
    assert down.results["inferscale"] is not base["inferscale"]
    assert unscraped.results["hpa-gpu-util"] is base["hpa-gpu-util"]  # DCGM is scraped apart from vLLM
    # HPA whose metrics API errors keeps its count through the outage
    assert len(set(during(down.results["hpa-gpu-util"], down.outage))) == 1
    # inferscale again with podPort set, on each kind: blind, it holds on missing metrics; reading the pods, never
    for run in runs:
        assert run.pods is not None and run.pods.policy == "inferscale"
        assert "MetricsMissing" in reasons(run.results["inferscale"], run.outage)
        assert "MetricsMissing" not in reasons(run.pods, run.outage)


def reasons(result: RunResult, outage: Outage) -> set[str]:
    return {d.reason for d in result.decisions if outage.covers(d.at)}


def test_without_inferscale_nothing_reads_the_pods(azure_trace: Path) -> None:
    scenario = Scenario(azure_trace, rate_scale=30.0, time_to_ready=TimeToReady.parse("60s"))
    prepared = prepare(scenario)
    base = {"hpa-gpu-util": run_policy(prepared.workload, prepared.policy("hpa-gpu-util"), prepared.run_config)}
    assert all(run.pods is None for run in replay(scenario, prepared.workload.duration, base))


def result(name: str, attainment: float, gpu_hours: float, provisioned: list[int]) -> RunResult:
    timeline = Timeline(at=[60.0 * (i + 1) for i in range(len(provisioned))], provisioned=provisioned)
    return RunResult(name, Scores(attainment, gpu_hours, 0.1, 0.2, 0.02, 3, 100, 0), timeline, 1.0)


def test_the_section_gives_each_policy_its_behaviour_and_what_it_did_inside_the_outage() -> None:
    base = {"inferscale": result("inferscale", 0.995, 10.0, [4, 5, 6, 5]), "keda-queue": result("k", 0.9, 9.0, [3] * 4)}
    down, unscraped = Outage(PROMETHEUS_DOWN, 60.0, 180.0), Outage(VLLM_UNSCRAPED, 60.0, 180.0)
    runs = [
        OutageRun(down, {"inferscale": result("i", 0.97, 10.5, [4, 4, 4, 6]), "keda-queue": base["keda-queue"]}),
        OutageRun(unscraped, {"inferscale": base["inferscale"], "keda-queue": result("k", 0.5, 4.0, [3, 1, 2, 2])}),
    ]
    text = "\n".join(section([("azure", base, runs)]))
    assert "### azure: metrics gone from 1m to 3m" in text
    assert "| policy | without an outage | prometheus-down | vllm-unscraped |" in text
    assert (
        "| **inferscale** | 99.50% at 10.0 GPU-h; 4-5 replicas | blind: 97.00% at 10.5 GPU-h; 4-4 replicas "
        "| blind: 99.50% at 10.0 GPU-h; 4-5 replicas |"
    ) in text
    assert "| keda-queue | 90.00% at 9.0 GPU-h; 3-3 replicas | hold: 90.00% at 9.0 GPU-h; 3-3 replicas " in text
    assert "blind: 50.00% at 4.0 GPU-h; 1-3 replicas |" in text
    assert "| **inferscale**, `podPort` set |" not in text  # no replay read the pods
    assert section([("azure", base, [])]) == []


def test_the_section_gives_inferscale_reading_the_pods_a_row_of_its_own() -> None:
    base = {"inferscale": result("inferscale", 0.995, 10.0, [4, 5, 6, 5]), "keda-queue": result("k", 0.9, 9.0, [3] * 4)}
    runs = [
        OutageRun(
            Outage(kind, 60.0, 180.0),
            {"inferscale": result("i", 0.97, 10.5, [4, 4, 4, 6]), "keda-queue": base["keda-queue"]},
            result("i", 0.99, 11.0, [4, 6, 7, 6]),
        )
        for kind in KINDS
    ]
    lines = section([("azure", base, runs)])
    pods = "pods: 99.00% at 11.0 GPU-h; 4-6 replicas"
    row = f"| **inferscale**, `podPort` set | 99.50% at 10.0 GPU-h; 4-5 replicas | {pods} | {pods} |"
    assert lines[lines.index(row) - 1].startswith("| **inferscale** | 99.50% at 10.0 GPU-h")
