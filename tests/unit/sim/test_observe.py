from __future__ import annotations

import pytest

from inferscale.scaling.types import MetricsState
from inferscale.sim.engine import EngineConfig
from inferscale.sim.fleet import Fleet, TimeToReady
from inferscale.sim.observe import Observer
from inferscale.sim.requests import Request
from inferscale.sim.vllm_buckets import ITL_BUCKETS, TTFT_BUCKETS


def test_no_ready_pod_means_missing_data_never_zero(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.scale_to(2, 0.0)
    obs_ = Observer()
    obs_.scrape(0.0, fleet)
    obs = obs_.observe(1.0, fleet)
    assert obs.state == MetricsState.MISSING and obs.pending_replicas == 2 and obs.current_replicas == 2
    assert obs.waiting is None and obs.kv_cache_utilization is None and obs.request_rate is None


def test_ttft_p95_interpolates_like_prometheus_over_the_two_minute_increase(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(2)
    observer = Observer()
    a, b = (r.engine for r in fleet.ready)
    a.ttft_buckets[TTFT_BUCKETS.index(0.1)] += 500  # before the window: must not count
    observer.scrape(0.0, fleet)
    for t in range(5, 125, 5):
        observer.scrape(float(t), fleet)
    # In the window: 60 in (0.08, 0.1], 30 in (0.1, 0.25], 10 in (0.25, 0.5] across two pods.
    a.ttft_buckets[TTFT_BUCKETS.index(0.1)] += 40
    b.ttft_buckets[TTFT_BUCKETS.index(0.1)] += 20
    b.ttft_buckets[TTFT_BUCKETS.index(0.25)] += 30
    a.ttft_buckets[TTFT_BUCKETS.index(0.5)] += 10
    a.request_success_total += 90
    observer.scrape(125.0, fleet)
    obs = observer.observe(126.0, fleet)
    # rank 95 of 100 falls in (0.25, 0.5] holding ranks 91..100: 0.25 + 0.25 · (95 − 90) / 10.
    assert obs.ttft_p95 == pytest.approx(0.375)
    assert obs.request_rate == pytest.approx(90 / 60)
    assert obs.state == MetricsState.COMPLETE and obs.pods_reporting == 2 and obs.newest_sample_at == 125.0
    assert obs.itl_mean is None  # no inter-token observations in the window: unknown, not zero


def test_gauges_sum_and_kv_peak_spans_the_last_minute(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(2)
    observer = Observer()
    for i in range(40):  # 40 long requests, 20 per replica
        fleet.route(0.0, 2000, 2000, i, 0.0)
    observer.scrape(0.0, fleet)
    observer.scrape(5.0, fleet)
    peak = max(r.engine.kv_usage for r in fleet.ready)
    assert peak > 0
    for r in fleet.ready:
        r.engine.advance(1000.0)  # everything finishes
    for t in range(10, 60, 5):
        observer.scrape(float(t), fleet)
    obs = observer.observe(60.0, fleet)
    assert obs.kv_cache_utilization == 0.0 and obs.running == 0.0 and obs.waiting == 0.0
    assert obs.kv_cache_utilization_max == pytest.approx(peak)
    assert obs.request_rate == pytest.approx(40 / 55)  # only 55 s of history so far
    assert obs.gpu_utilization is not None and 0.0 < obs.gpu_utilization <= 1.0
    # a minute on, the peak scraped at 5 s is out of the window: only the idle scrapes since remain
    for t in (60, 65, 70):
        observer.scrape(float(t), fleet)
    assert observer.observe(70.0, fleet).kv_cache_utilization_max == 0.0


def test_rate_history_has_one_sample_per_minute(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(1)
    observer = Observer()
    for t in range(0, 305, 5):
        observer.scrape(float(t), fleet)
    assert [s.at for s in observer.rate_history] == [60.0, 120.0, 180.0, 240.0, 300.0]
    assert all(s.value == 0.0 for s in observer.rate_history)
    assert observer.observe(300.0, fleet).arrival_rate is None  # no arrival count given: unknown, not zero


def test_tpot_p95_is_over_requests_not_tokens(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(1)
    observer = Observer()
    e = fleet.ready[0].engine
    observer.scrape(0.0, fleet)
    # 90 requests stream at (10, 25] ms per token, 10 at (75, 100] ms: P95 sits in the slow bucket
    # whatever their lengths, while a token-weighted mean would follow the long fast ones.
    e.tpot_buckets[ITL_BUCKETS.index(0.025)] += 90
    e.tpot_buckets[ITL_BUCKETS.index(0.1)] += 10
    observer.scrape(5.0, fleet)
    assert observer.observe(6.0, fleet).tpot_p95 == pytest.approx(0.075 + 0.025 * (95 - 90) / 10)


def test_an_engine_counts_each_finished_request_once_at_its_mean_itl(engine_cfg: EngineConfig) -> None:
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(1)
    e = fleet.ready[0].engine
    for i in range(8):
        e.submit(Request(arrival=0.0, input_tokens=200, output_tokens=1 + 20 * i), now=0.0)
    e.advance(60.0)
    assert e.request_success_total == 8
    # every finished request is observed, the one-token answer (no inter-token gap) as 0, as vLLM does
    assert sum(e.tpot_buckets) == 8 and e.tpot_buckets[0] >= 1
    assert 0 < e.tpot_sum / 7 <= e.itl_sum / e.itl_count * 1.5


def test_arrival_rate_counts_requests_routed_over_the_last_minute(engine_cfg: EngineConfig) -> None:
    """The frontend's started-requests counter: arrivals, whether or not they completed, and even while
    no pod is Ready to report anything else."""
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(1)
    observer = Observer()
    for t in range(0, 125, 5):
        observer.scrape(float(t), fleet, arrived=3 * t)  # 3 requests/s reach the router
    obs = observer.observe(125.0, fleet)
    assert obs.arrival_rate == pytest.approx(3.0)
    assert obs.request_rate == 0.0  # none was served: completions cannot tell the demand
    starting = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    starting.scale_to(1, 0.0)
    cold = Observer()
    for t in range(0, 65, 5):
        cold.scrape(float(t), starting, arrived=2 * t)
    obs = cold.observe(60.0, starting)
    assert obs.arrival_rate == pytest.approx(2.0) and obs.request_rate is None


def test_after_a_gap_the_windows_span_only_what_was_scraped_since(engine_cfg: EngineConfig) -> None:
    """Scrapes Prometheus did not store (an outage) leave a hole: the first samples after it give no rate, then
    rates and histograms over the samples since, as PromQL's rate and increase over a range with a hole."""
    fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
    fleet.start(1)
    e = fleet.ready[0].engine
    gapped, whole = Observer(), Observer()
    for t in range(0, 305, 5):
        e.request_success_total += 10  # 2 requests/s until the outage ends
        if t <= 195:
            e.ttft_buckets[TTFT_BUCKETS.index(2.5)] += 10  # slow before and inside it
        else:
            e.ttft_buckets[TTFT_BUCKETS.index(0.1)] += 10  # fast after it
        if t == 200:
            e.request_success_total += 400  # a burst counted at the first scrape after it
        keep = not 50 <= t < 200  # longer than the 2-m latency window
        gapped.scrape(float(t), fleet, arrived=None, keep=keep)
        whole.scrape(float(t), fleet)
        if t == 200:
            first, seen = gapped.observe(200.0, fleet), whole.observe(200.0, fleet)
            assert first.request_rate is None and first.ttft_p95 is None  # one sample: no increase yet
            assert first.running == 0.0 and first.kv_cache_utilization is not None  # gauges read at once
            assert seen.request_rate is not None and seen.ttft_p95 is not None
        if t == 230:
            after = gapped.observe(230.0, fleet)
            assert after.request_rate == pytest.approx(2.0)  # the 30 s since the first sample, not the burst
            assert after.ttft_p95 is not None and after.ttft_p95 <= 0.1  # the slow ones were before the hole
            assert whole.observe(230.0, fleet).ttft_p95 > 1.0  # without the hole the window holds them
    assert [s.at for s in gapped.rate_history] == [260.0]  # at 200 the rate had one sample
    assert [s.at for s in whole.rate_history] == [60.0, 120.0, 180.0, 240.0, 300.0]


def test_gpu_busy_after_a_gap_spans_the_last_scrape_interval_not_the_gap(engine_cfg: EngineConfig) -> None:
    fleets = []
    for _ in range(2):  # one each: the busy fraction is read off the replicas, scrape to scrape
        fleet = Fleet(engine_cfg, 1, TimeToReady(60, 60))
        fleet.start(1)
        for i in range(400):  # busy for the whole test
            fleet.route(0.0, 2000, 8000, i, 0.0)
        fleets.append(fleet)
    gapped, whole = Observer(), Observer()
    for t in range(0, 205, 5):
        gapped.scrape(float(t), fleets[0], keep=not 50 <= t < 200)
        whole.scrape(float(t), fleets[1])
    busy = whole.observe(200.0, fleets[1]).gpu_utilization
    assert busy is not None and busy > 0.9
    assert gapped.observe(200.0, fleets[0]).gpu_utilization == pytest.approx(busy, abs=0.05)
