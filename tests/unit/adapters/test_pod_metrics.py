"""The pods' own /metrics, read while Prometheus cannot answer: the rates between the operator's reads are the
engines', each pod counted once, and `observe` reads the snapshot as Prometheus's, but for a scale-down."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from inferscale.adapters.observation import Workload, observe
from inferscale.adapters.pod_metrics import PodReads, Read, parse, relevant, series_of
from inferscale.scaling.types import PROMETHEUS, MetricsState

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def vllm_page(success: float, prompt: float, generation: float, fast: float, slow: float, waiting: float) -> str:
    """A vLLM /metrics page: two data-parallel engines, finished reasons apart, a TTFT histogram."""
    lines = []
    for engine in ("0", "1"):
        labels = f'engine="{engine}",model_name="{MODEL}"'
        lines += [
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{labels}}} {waiting}",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{labels}}} 8.0",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{labels}}} {0.3 if engine == '0' else 0.5}",
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{{labels},finished_reason="stop"}} {success / 2}',
            f'vllm:request_success_total{{{labels},finished_reason="length"}} {success / 2}',
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{labels}}} {prompt}",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{labels}}} {generation}",
            "# TYPE vllm:time_to_first_token_seconds histogram",
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.5"}} {fast}',
            f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {fast + slow}',
            f"vllm:time_to_first_token_seconds_count{{{labels}}} {fast + slow}",
            f"vllm:time_to_first_token_seconds_sum{{{labels}}} {fast * 0.1 + slow * 2}",
        ]
    # one family per name: the parser wants a family's samples together
    families: dict[str, list[str]] = {}
    for line in lines:
        name = line.split()[2] if line.startswith("# TYPE") else line.split("{")[0]
        base = name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
        families.setdefault(base, []).append(line)
    out = []
    for group in families.values():
        out += [group[0]] + [line for line in group if not line.startswith("#")]
    return "\n".join(out) + "\n"


def test_two_reads_a_minute_apart_give_the_engines_rates_and_the_latest_gauges() -> None:
    first = Read(0.0, {(n, lab): v for n, lab, v in parse(vllm_page(0, 0, 0, 0, 0, waiting=1))})
    # 60 s later, per engine: 120 requests (2/s), 60,000 prompt tokens, 12,000 generated, 90 fast and 30 slow
    second = Read(60.0, {(n, lab): v for n, lab, v in parse(vllm_page(120, 60_000, 12_000, 90, 30, waiting=4))})
    (s,) = series_of("llm", "vllm-7d9f8c6b5-x2x4q", [first, second])
    assert s.model_name == MODEL and s.dialects == {"vllm"}
    v = s.values
    assert (v["requests"], v["prompt_tokens"], v["generation_tokens"]) == pytest.approx((4.0, 2000.0, 400.0))
    assert (v["vllm:num_requests_waiting"], v["vllm:num_requests_running"]) == (8.0, 16.0)  # both engines
    assert v["vllm:kv_cache_usage_perc"] == 0.5 and v["kv_peak"] == 0.5 and v["sample_time"] == 60.0
    assert s.ttft_buckets == pytest.approx({0.5: 3.0, float("inf"): 4.0})
    # one read: the gauges only, no rate yet (unknown, not zero)
    (only,) = series_of("llm", "p", [first])
    assert "requests" not in only.values and not only.ttft_buckets and only.values["vllm:num_requests_waiting"] == 2


def read_at(at: float, page: str, kv: float | None = None) -> Read:
    """A read of `page` at `at`; `kv` replaces engine 0's KV-cache usage."""
    samples = {(n, lab): v for n, lab, v in parse(page)}
    if kv is not None:
        (key,) = [k for k in samples if k[0] == "vllm:kv_cache_usage_perc" and ("engine", "0") in k[1]]
        samples[key] = kv
    return Read(at, samples)


def test_rates_span_the_last_minute_and_histograms_the_last_two_of_reads_kept_longer() -> None:
    # Reads at 0, 30, 75, 100 and 130 s, per engine; the counters grow unevenly, so each base gives its own rate.
    # Requests over 1m end at 130: the oldest read within 60 s is the one at 75 (100 and 130 are later, 30 too
    # old), so (280 - 100) / 55 per engine, on two engines. The TTFT buckets over 2m: the read at 30 (0 is 130 s
    # back), so le=0.5 (210 - 10) / 100 and +Inf (310 - 10) / 100 per engine. KV 0.9 at 30 s, 0.7 at 75 s: the
    # 1-minute peak is 0.7.
    success = {0.0: 0, 30.0: 30, 75.0: 100, 100.0: 200, 130.0: 280}
    fast = {0.0: 0, 30.0: 10, 75.0: 50, 100.0: 120, 130.0: 210}
    slow = {0.0: 0, 30.0: 0, 75.0: 20, 100.0: 60, 130.0: 100}
    kv = {30.0: 0.9, 75.0: 0.7}
    reads = [read_at(t, vllm_page(success[t], 0, 0, fast[t], slow[t], waiting=1), kv.get(t)) for t in success]
    (s,) = series_of("llm", "p", reads)
    assert s.values["requests"] == pytest.approx(2 * 180 / 55)
    assert s.ttft_buckets == pytest.approx({0.5: 2 * 2.0, float("inf"): 2 * 3.0})
    assert s.values["kv_peak"] == 0.7 and s.values["vllm:kv_cache_usage_perc"] == 0.5


def test_a_pod_keeps_its_reads_in_order_and_only_for_a_window() -> None:
    reads = PodReads()
    page = vllm_page(0, 0, 0, 0, 0, waiting=1)
    for at in (0.0, 100.0):
        reads.keep("llm", "p", read_at(at, page))
    reads.keep("llm", "p", read_at(90.0, page))  # a read that arrives out of order is not the newest
    assert [r.at for r in reads._kept[("llm", "p")]] == [0.0, 100.0]
    # a read is kept 2.5 minutes (the 2-minute histogram window and 30 s): at 150 s the one at 0 still is, at 151 s not
    reads.keep("llm", "p", read_at(150.0, page))
    assert [r.at for r in reads._kept[("llm", "p")]] == [0.0, 100.0, 150.0]
    reads.keep("llm", "p", read_at(151.0, page))
    assert [r.at for r in reads._kept[("llm", "p")]] == [100.0, 150.0, 151.0]


def test_a_counter_that_went_back_is_an_engine_restart_counted_from_zero() -> None:
    before = Read(0.0, {(n, lab): v for n, lab, v in parse(vllm_page(10_000, 0, 0, 0, 0, waiting=0))})
    after = Read(60.0, {(n, lab): v for n, lab, v in parse(vllm_page(60, 0, 0, 0, 0, waiting=0))})
    (s,) = series_of("llm", "p", [before, after])
    assert s.values["requests"] == pytest.approx(2.0)  # 60 per engine since the restart, not -9,940


def _free_loopback(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def serving(pages: dict[str, Callable[[], str]], port: int) -> AsyncIterator[None]:
    """Each host's page on `port`: one address per pod, as pod IPs are."""
    runners = []
    for host, page in pages.items():

        async def metrics(_: web.Request, page: Callable[[], str] = page) -> web.Response:
            return web.Response(text=page())

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        runners.append(runner)
    try:
        yield
    finally:
        for runner in runners:
            await runner.cleanup()


def test_the_pods_read_over_http_make_a_snapshot_observe_reads_but_never_for_a_scale_down() -> None:
    port = _free_loopback("127.0.0.2")
    counters = {"127.0.0.2": [0.0], "127.0.0.3": [0.0]}

    def page(host: str) -> Callable[[], str]:
        return lambda: vllm_page(counters[host][0], 0, 0, counters[host][0], 0, waiting=10)

    pods = {
        "vllm-7d9f8c6b5-x2x4q": "127.0.0.2",
        "vllm-7d9f8c6b5-b7kqz": "127.0.0.3",
        "vllm-7d9f8c6b5-zz9zz": "127.0.0.4",
    }
    targets = [("llm", pod, f"http://{ip}:{port}/metrics") for pod, ip in pods.items()]
    workload = Workload("llm", 3, frozenset(pods))
    reads = PodReads(timeout=2.0)

    async def scenario() -> None:
        async with serving({h: page(h) for h in counters}, port):
            snap, errors = await reads.snapshot(100.0, targets)
            assert len(errors) == 1 and errors[0].startswith("vllm-7d9f8c6b5-zz9zz: cannot connect")
            obs, _ = observe(snap, workload, MODEL, 60.0)
            assert obs.state is MetricsState.PARTIAL and obs.pods_reporting == 2 and obs.waiting == 40.0
            assert obs.request_rate is None  # one read: no rate yet
            for c in counters.values():
                c[0] = 300.0  # 300 per engine in 30 s: 10/s per engine, 20/s per pod
            snap, _ = await reads.snapshot(130.0, targets)
            obs, _ = observe(snap, workload, MODEL, 60.0)
            assert obs.request_rate == pytest.approx(40.0, rel=1e-3) and obs.ttft_p95 is not None
            assert PROMETHEUS in obs.failed_queries  # Prometheus is named failed: decide holds every scale-down

    asyncio.run(scenario())


def test_a_page_that_is_not_metrics_is_said_and_left_out() -> None:
    port = _free_loopback("127.0.0.2")

    async def scenario() -> None:
        async with serving({"127.0.0.2": lambda: "<html>login</html>\n"}, port):
            snap, errors = await PodReads().snapshot(0.0, [("llm", "p", f"http://127.0.0.2:{port}/metrics")])
        assert not snap.pods and len(errors) == 1 and "is not an engine's metrics page" in errors[0]

    asyncio.run(scenario())


def _filler(lines: int) -> str:
    """What else an engine's /metrics carries (Python's, the HTTP server's): nothing the operator reads."""
    return "# TYPE http_requests counter\n" + "".join(
        f'http_requests_total{{handler="/v1/route/{i}",method="POST",status="2xx"}} {i}\n' for i in range(lines)
    )


@asynccontextmanager
async def streaming(host: str, port: int, parts: Callable[[], list[str]]) -> AsyncIterator[None]:
    """A page written in several parts with a pause between them, as a large page crosses a network."""

    async def metrics(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
        await answer.prepare(request)
        for part in parts():
            await answer.write(part.encode())
            await asyncio.sleep(0.05)
        await answer.write_eof()
        return answer

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    try:
        yield
    finally:
        await runner.cleanup()


def test_a_page_that_arrives_in_parts_is_read_whole_and_each_read_is_timed_when_it_arrived() -> None:
    port = _free_loopback("127.0.0.2")
    success = [0.0]
    # 300 KB of other metrics first, then the engine's: a read of what has arrived would stop in the filler
    parts = lambda: [_filler(3000), vllm_page(success[0], 0, 0, 0, 0, waiting=3)]  # noqa: E731
    target = [("llm", "p", f"http://127.0.0.2:{port}/metrics")]
    reads = PodReads(timeout=5.0)

    async def scenario() -> None:
        async with streaming("127.0.0.2", port, parts):
            snap, errors = await reads.snapshot(100.0, target)
            assert not errors and snap.pods[("llm", "p", MODEL)].values["vllm:num_requests_waiting"] == 6.0
            success[0] = 600.0  # 600 per engine
            # the tick began 20 s before this read (it waited out a hung Prometheus): the read is 20 s after 130
            snap, errors = await reads.snapshot(130.0, target, began=time.monotonic() - 20.0)
        assert not errors
        (s,) = snap.pods.values()
        assert s.values["sample_time"] >= 150.0
        assert s.values["requests"] == pytest.approx(1200 / (s.values["sample_time"] - 100.0), rel=0.01)
        assert s.values["requests"] < 1200 / 40.0  # not 1200 over the 30 s between the ticks' stamps

    asyncio.run(scenario())


def test_a_pod_whose_page_breaks_the_parser_is_said_and_the_others_still_read() -> None:
    port = _free_loopback("127.0.0.2")
    bad = vllm_page(0, 0, 0, 0, 0, waiting=1).replace(
        "vllm:num_requests_waiting{", 'vllm:num_requests_waiting{b="c", ="e",', 1
    )
    odd_bucket = vllm_page(0, 0, 0, 0, 0, waiting=1).replace('le="0.5"', 'le="fast"', 1).replace('le="0.5"', 'le="NaN"')
    pages = {"127.0.0.2": lambda: bad, "127.0.0.3": lambda: odd_bucket}
    targets = [("llm", "bad", f"http://127.0.0.2:{port}/metrics"), ("llm", "good", f"http://127.0.0.3:{port}/metrics")]
    reads = PodReads(timeout=2.0)

    async def scenario() -> None:
        async with serving(pages, port):
            await reads.snapshot(0.0, targets)
            snap, errors = await reads.snapshot(60.0, targets)
        assert len(errors) == 1 and errors[0].startswith("bad: ") and "is not a metrics page" in errors[0]
        (s,) = snap.pods.values()
        assert s.pod == "good" and set(s.ttft_buckets) == {float("inf")}  # the bucket without a number left out

    asyncio.run(scenario())


def test_only_the_engine_metrics_lines_are_parsed() -> None:
    text = _filler(3) + vllm_page(1, 2, 3, 4, 5, waiting=6)
    kept = relevant(text)
    assert "http_requests" not in kept and "vllm:num_requests_waiting" in kept
    assert {name for name, _, _ in parse(text)} == {name for name, _, _ in parse(kept)}


def test_a_figure_no_engine_can_report_is_left_out_of_the_page() -> None:
    page = (
        'vllm:num_requests_waiting{model_name="m"} -6\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 1.5\n'
        'vllm:num_requests_running{model_name="m"} 4\n'
        'sglang:token_usage{model_name="m"} 0.5\n'
        'vllm:request_success_total{model_name="m",finished_reason="stop"} -1\n'
    )
    assert {name: value for name, _, value in parse(page)} == {
        "vllm:num_requests_running": 4.0,
        "sglang:token_usage": 0.5,
    }
