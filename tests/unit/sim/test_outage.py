from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from inferscale.perf import replica_profile
from inferscale.scaling.types import MetricsState, Observation, RateSample
from inferscale.sim.bench_outage import during
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import TimeToReady
from inferscale.sim.fluid import run_fluid
from inferscale.sim.outage import BEHAVIOUR, KINDS, PROMETHEUS_DOWN, VLLM_UNSCRAPED, Behaviour, Outage, OutageView
from inferscale.sim.policies import POLICY_NAMES
from inferscale.sim.run import RunConfig, RunResult, run_policy
from inferscale.sim.scenario import Scenario, prepare
from inferscale.sim.traces import RatePoint


class Recorder:
    def __init__(self, replicas: int = 7) -> None:
        self.calls: list[tuple[Observation, float, Sequence[RateSample]]] = []
        self.replicas = replicas

    def __call__(self, obs: Observation, now: float, history: Sequence[RateSample]) -> int:
        self.calls.append((obs, now, list(history)))
        return self.replicas


def seen(now: float) -> Observation:
    return Observation(
        at=now,
        current_replicas=5,
        ready_replicas=4,
        pending_replicas=1,
        pods_reporting=4,
        state=MetricsState.COMPLETE,
        kv_cache_utilization=0.5,
        waiting=3.0,
        running=40.0,
        ttft_p95=0.2,
        itl_mean=0.02,
        request_rate=30.0,
        newest_sample_at=now,
        gpu_utilization=0.7,
        arrival_rate=31.0,
    )


def history_until(now: float) -> list[RateSample]:
    return [RateSample(float(t), 30.0) for t in range(60, int(now) + 1, 60)]


OUTAGE_DOWN = Outage(PROMETHEUS_DOWN, 300.0, 600.0)


def test_every_policy_lives_through_every_kind_of_outage_in_a_stated_way() -> None:
    assert set(BEHAVIOUR) == set(POLICY_NAMES)
    assert all(set(kinds) == set(KINDS) for kinds in BEHAVIOUR.values())


def test_without_an_outage_the_policy_sees_what_the_replay_sees() -> None:
    view, decide = OutageView(None, "a policy of a test"), Recorder()
    obs, history = seen(400.0), history_until(400.0)
    assert view.replicas(decide, obs, 400.0, history) == 7
    assert decide.calls == [(obs, 400.0, history)]


def test_a_policy_reading_another_source_is_not_touched() -> None:
    view, decide = OutageView(OUTAGE_DOWN, "knative-kpa"), Recorder()
    obs, history = seen(400.0), history_until(400.0)
    assert view.replicas(decide, obs, 400.0, history) == 7
    assert decide.calls == [(obs, 400.0, history)]


def test_a_controller_whose_fetch_errors_skips_its_rounds() -> None:
    view, decide = OutageView(OUTAGE_DOWN, "wva-saturation"), Recorder()
    for now in range(60, 901, 60):
        asked = view.replicas(decide, seen(float(now)), float(now), history_until(float(now)))
        assert (asked is None) == (300 <= now < 600)
        assert view.keeps(float(now)) == (not 300 <= now < 600)
    assert [now for _, now, _ in decide.calls] == [60, 120, 180, 240, 600, 660, 720, 780, 840, 900]
    assert OutageView(OUTAGE_DOWN, "knative-kpa").keeps(420.0)  # its queue-proxy is scraped apart


def test_inferscale_decides_on_what_the_adapter_builds_when_prometheus_does_not_answer() -> None:
    view, decide = OutageView(OUTAGE_DOWN, "inferscale"), Recorder()
    assert view.replicas(decide, seen(420.0), 420.0, history_until(300.0)) == 7
    obs, _, history = decide.calls[0]
    assert obs == Observation(
        at=420.0, current_replicas=5, ready_replicas=4, pending_replicas=1, state=MetricsState.MISSING
    )
    # the range query failed too: the history the operator holds, as it stood at the outage's start (the
    # forecast reads nothing of it once it is forecast.HISTORY_STALE old)
    assert history == history_until(300.0)


def test_keda_reads_empty_vllm_series_while_the_history_before_them_stays() -> None:
    outage = Outage(VLLM_UNSCRAPED, 300.0, 600.0)
    view, decide = OutageView(outage, "keda-queue"), Recorder()
    assert BEHAVIOUR["keda-queue"][VLLM_UNSCRAPED] is Behaviour.BLIND
    view.replicas(decide, seen(420.0), 420.0, history_until(240.0))
    obs, _, history = decide.calls[0]
    assert obs.waiting is None and obs.state is MetricsState.MISSING
    assert [s.at for s in history] == [60, 120, 180, 240]


@pytest.mark.parametrize(
    ("kind", "start", "end", "match"),
    [("dns-down", 0.0, 60.0, "unknown outage kind 'dns-down'"), (PROMETHEUS_DOWN, 60.0, 60.0, "start < end")],
)
def test_an_outage_that_means_nothing_is_refused(kind: str, start: float, end: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Outage(kind, start, end)


def test_a_policy_without_a_stated_behaviour_cannot_live_through_an_outage() -> None:
    with pytest.raises(ValueError, match="no outage behaviour is known for policy 'mystery'"):
        OutageView(OUTAGE_DOWN, "mystery")


# -- through a replay ---------------------------------------------------------------------------------------


def falling(tmp_path: Path) -> Path:
    """Ten minutes: 8 requests/s for four, then 1/s."""
    lines, t = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"], 0.0
    while t < 600.0:
        m, s = divmod(t, 60)
        lines.append(f"2023-11-16 18:{10 + int(m):02d}:{s:09.6f},{300 + int(t * 7) % 350},{20 + int(t) % 40}\n")
        t += 0.125 if t < 240.0 else 1.0
    path = tmp_path / "falling.csv"
    path.write_text("".join(lines))
    return path


def replay(trace: Path, name: str, outage: Outage | None) -> RunResult:
    prepared = prepare(Scenario(trace, rate_scale=60.0, time_to_ready=TimeToReady.parse("60s"), outage=outage))
    return run_policy(prepared.workload, prepared.policy(name), prepared.run_config)


def test_empty_vllm_series_scale_keda_down_and_inferscale_holds(azure_trace: Path) -> None:
    outage = Outage(VLLM_UNSCRAPED, 120.0, 540.0)
    keda, keda_blind = replay(azure_trace, "keda-queue", None), replay(azure_trace, "keda-queue", outage)
    # ignoreNullValues: 0 waiting per replica, so HPA's recommendation falls to the minimum after its 5-minute window
    assert min(during(keda_blind, outage)) == 1 < min(during(keda, outage))
    assert keda_blind.scores.slo_attainment < keda.scores.slo_attainment


@pytest.mark.parametrize("kind", KINDS)
def test_inferscale_never_shrinks_in_the_dark_where_it_would_have_seen_the_load_fall(tmp_path: Path, kind: str) -> None:
    trace, outage = falling(tmp_path), Outage(kind, 180.0, 600.0)
    seeing, blind = replay(trace, "inferscale", None), replay(trace, "inferscale", outage)
    assert min(during(seeing, outage)) < max(during(seeing, outage))  # with its metrics it follows the load down
    counts = during(blind, outage)
    assert counts == sorted(counts) and counts[0] > 1  # unknown is never zero
    in_outage = [d for d in blind.decisions if outage.covers(d.at)]
    assert in_outage and {d.reason for d in in_outage} == {"MetricsMissing"}


@pytest.mark.parametrize("name", ["wva-saturation", "knative-kpa"])
def test_the_rate_history_keeps_the_outage_s_gap_for_a_policy_reading_prometheus(azure_trace: Path, name: str) -> None:
    outage = Outage(PROMETHEUS_DOWN, 120.0, 360.0)
    ttr = TimeToReady.parse("60s")
    prepared = prepare(Scenario(azure_trace, rate_scale=60.0, time_to_ready=ttr, outage=outage))
    policy = Shrinking(name)
    run_policy(prepared.workload, policy, prepared.run_config)  # type: ignore[arg-type]
    inside = [at for at in policy.history if outage.covers(at)]
    assert policy.history[-1] > 480.0 and bool(inside) == (name == "knative-kpa")  # Knative reads its queue-proxy


@pytest.mark.parametrize("kind", KINDS)
def test_the_rate_history_goes_on_through_an_outage_only_reading_the_pods(azure_trace: Path, kind: str) -> None:
    outage = Outage(kind, 120.0, 480.0)
    inside: dict[bool, list[float]] = {}
    for reads_pods in (False, True):
        prepared = prepare(
            Scenario(azure_trace, rate_scale=60.0, time_to_ready=TimeToReady.parse("60s"), outage=outage)
        )
        policy = Shrinking("inferscale")
        policy.reads_pods = reads_pods
        run_policy(prepared.workload, policy, prepared.run_config)  # type: ignore[arg-type]
        inside[reads_pods] = [at for at in policy.history if outage.covers(at)]
    assert inside[False] == []  # Prometheus stored nothing; the operator's history stops at the outage's start
    gaps = {round(b - a) for a, b in pairwise(inside[True])}  # its own reads, one a minute
    assert len(inside[True]) >= 5 and gaps == {60}


def test_with_prometheus_down_keda_holds_its_count_as_its_hpa_does_on_a_metric_error(azure_trace: Path) -> None:
    outage = Outage(PROMETHEUS_DOWN, 120.0, 540.0)
    counts = during(replay(azure_trace, "keda-queue", outage), outage)
    assert len(set(counts)) == 1


def test_the_outage_reaches_the_replays_description(azure_trace: Path) -> None:
    outage = Outage(PROMETHEUS_DOWN, 60.0, 120.0)
    s = replace(Scenario(azure_trace), outage=outage)
    assert s.describe()["metrics_outage"] == {"kind": PROMETHEUS_DOWN, "start_s": 60.0, "end_s": 120.0}
    assert Scenario(azure_trace).describe()["metrics_outage"] is None


class Shrinking:
    """Asks for 2 replicas (or `replicas`) whatever it sees, under a registered policy's name."""

    interval = 10.0

    def __init__(self, name: str, replicas: int = 2) -> None:
        self.name = name
        self.replicas = replicas
        self.seen: list[Observation] = []
        self.history: list[float] = []  # when the samples of the last history it was given were taken
        self.reads_pods = False  # spec.metrics.podPort, for the name "inferscale"

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        self.seen.append(obs)
        self.history = [s.at for s in rate_history]
        return self.replicas


PROFILE = replica_profile("llama-3.1-8b", "h100-80gb")
STEADY = [RatePoint(600.0 * i, 5.0, 500.0, 100.0) for i in range(2)]  # 5 req/s for 20 minutes


def fluid_config(outage: Outage) -> RunConfig:
    return RunConfig(
        EngineConfig.from_profile(PROFILE), 1, 0.5, 0.05, TimeToReady.parse("60s"), 4, warmup=10.0, outage=outage
    )


def test_the_fluid_replay_lives_through_an_outage_as_the_request_level_one_does() -> None:
    profile, curve = PROFILE, STEADY
    outage = Outage(PROMETHEUS_DOWN, 0.0, 1800.0)
    cfg = fluid_config(outage)
    holding = Shrinking("wva-saturation")
    held = run_fluid(curve, 1200.0, holding, profile, cfg)
    assert holding.seen == [] and held.scores.gpu_hours == pytest.approx(4 * 1200 / 3600)  # no round while blind
    blind = Shrinking("keda-queue")
    run_fluid(curve, 1200.0, blind, profile, replace(cfg, outage=replace(outage, kind=VLLM_UNSCRAPED)))
    assert blind.seen and all(o.state is MetricsState.MISSING and o.waiting is None for o in blind.seen)


def test_the_fluid_rate_history_goes_on_through_an_outage_only_reading_the_pods() -> None:
    profile, curve = PROFILE, STEADY
    outage = Outage(PROMETHEUS_DOWN, 300.0, 900.0)
    cfg = fluid_config(outage)
    inside: dict[bool, list[float]] = {}
    for reads_pods in (False, True):
        policy = Shrinking("inferscale", 4)
        policy.reads_pods = reads_pods
        run_fluid(curve, 1200.0, policy, profile, cfg)
        inside[reads_pods] = [at for at in policy.history if outage.covers(at)]
    assert inside[False] == [] and inside[True] == [300.0 + 60.0 * i for i in range(10)]


def test_after_an_outage_the_fluid_windows_hold_only_what_was_scraped_since() -> None:
    profile = replica_profile("llama-3.1-8b", "h100-80gb")
    curve = [RatePoint(0.0, 5.0, 500.0, 100.0), RatePoint(600.0, 40.0, 500.0, 100.0)]
    cfg = RunConfig(EngineConfig.from_profile(profile), 1, 0.5, 0.05, TimeToReady.parse("60s"), 4, warmup=10.0)
    first: dict[str, Observation] = {}
    for name, outage in (("gapped", Outage(PROMETHEUS_DOWN, 300.0, 620.0)), ("whole", None)):
        policy = Shrinking("keda-queue", 4)  # Prometheus down: it holds, then reads Prometheus's windows
        run_fluid(curve, 1200.0, policy, profile, replace(cfg, outage=outage))
        first[name] = next(o for o in policy.seen if o.at >= 620.0)
    assert first["gapped"].at == first["whole"].at < 660.0
    assert first["gapped"].request_rate == pytest.approx(40.0)  # the steps since the outage: all at 40 req/s
    whole_rate = first["whole"].request_rate
    assert whole_rate is not None and whole_rate < 30.0  # a minute that reaches back to the 5 req/s before 600


def test_inferscale_reading_the_pods_sees_their_gauges_then_their_rates_and_names_prometheus_failed() -> None:
    view, decide = OutageView(OUTAGE_DOWN, "inferscale", reads_pods=True), Recorder()
    for now in (240.0, 300.0, 310.0):
        view.replicas(decide, seen(now), now, history_until(now))  # the replay keeps the pods' reads in it
    before, first, second = (obs for obs, _, _ in decide.calls)
    assert before == seen(240.0)  # before the outage, Prometheus's
    # the first read: the gauges alone; a counter's rate needs a second read
    assert (first.waiting, first.kv_cache_utilization, first.pods_reporting) == (3.0, 0.5, 4)
    assert first.request_rate is None and first.ttft_p95 is None and first.failed_queries == {"prometheus"}
    assert second == replace(seen(310.0), failed_queries=frozenset({"prometheus"}))
    assert decide.calls[2][2] == history_until(310.0)
    # a controller that skips its rounds is not made to read the pods
    assert OutageView(OUTAGE_DOWN, "wva-saturation", reads_pods=True).behaviour is Behaviour.HOLD


def test_through_an_outage_a_rise_reading_the_pods_scales_up_and_never_down(tmp_path: Path) -> None:
    trace = tmp_path / "rise.csv"  # 1 request/s for 3 minutes, 12/s for 5, then 1/s again
    lines, t = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"], 0.0
    while t < 720.0:
        m, s = divmod(t, 60)
        lines.append(f"2023-11-16 18:{10 + int(m):02d}:{s:09.6f},{300 + int(t * 7) % 350},{20 + int(t) % 40}\n")
        t += 1 / 12 if 180.0 <= t < 480.0 else 1.0
    trace.write_text("".join(lines))
    outage = Outage(PROMETHEUS_DOWN, 150.0, 700.0)

    def run(reads_pods: bool) -> RunResult:
        scenario = Scenario(trace, rate_scale=30.0, time_to_ready=TimeToReady.parse("60s"), outage=outage)
        prepared = prepare(replace(scenario, reads_pods=reads_pods))
        return run_policy(prepared.workload, prepared.policy("inferscale"), prepared.run_config)

    holding, reading = run(False), run(True)
    counts = during(reading, outage)
    assert max(counts) > max(during(holding, outage)) == counts[0]  # the rise seen through the pods alone
    assert counts == sorted(counts)  # and no step down while Prometheus is away
    assert reading.scores.slo_attainment > holding.scores.slo_attainment
