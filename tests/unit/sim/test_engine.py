from __future__ import annotations

import dataclasses
import math
import random
from bisect import bisect_left

import pytest

from inferscale.perf import replica_profile
from inferscale.sim.engine import EngineConfig, Outcomes, ReplicaEngine
from inferscale.sim.requests import Request
from inferscale.sim.vllm_buckets import ITL_BUCKETS


def run(cfg: EngineConfig, reqs: list[Request], step: float | None = None) -> tuple[ReplicaEngine, Outcomes]:
    """Submit each request at its arrival; advance either in one go or in `step`-second slices."""
    out = Outcomes(len(reqs))
    eng = ReplicaEngine(cfg, out)
    for i, r in enumerate(reqs):
        if step is not None:
            t = eng.now
            while t + step < r.arrival:
                t += step
                eng.advance(t)
        eng.submit(r, r.arrival, i)
    eng.advance(1e6)
    return eng, out


def test_single_request_ttft_is_its_prefill_step_and_itl_one_decode_step(engine_cfg: EngineConfig) -> None:
    eng, out = run(engine_cfg, [Request(0.0, 1000, 11)])
    assert out.ttft[0] == pytest.approx(0.005 + 1000 * 10e-6)
    assert out.itl[0] == pytest.approx(0.005 + 1e-3)
    assert out.finished_at[0] == pytest.approx(out.ttft[0] + 10 * (0.005 + 1e-3))
    assert eng.request_success_total == 1 and eng.generation_tokens_total == 11 and eng.prompt_tokens_total == 1000
    assert eng.idle and eng.kv_used_tokens == 0


def test_long_prompt_is_chunked_by_the_token_budget(engine_cfg: EngineConfig) -> None:
    _, out = run(engine_cfg, [Request(0.0, 5000, 2)])
    # 2048 + 2048 + 904 tokens: three steps, each with its own prefill cost.
    assert out.ttft[0] == pytest.approx(3 * 0.005 + 5000 * 10e-6)


def test_batching_raises_itl_by_c_decode_per_sequence(engine_cfg: EngineConfig) -> None:
    n = 8
    _, out = run(engine_cfg, [Request(0.0, 100, 201) for _ in range(n)])
    # All prefill together in one step, then decode together: one step per token with n sequences.
    assert all(t == pytest.approx(0.005 + n * 100 * 10e-6) for t in out.ttft)
    assert all(i == pytest.approx(0.005 + n * 1e-3) for i in out.itl)


def test_kv_term_lengthens_decode_steps_as_context_grows(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, c_kv=1e-6)
    _, out = run(cfg, [Request(0.0, 1000, 101)])
    # Decode step j reads 1000 + j tokens of context (j = 0..99).
    expected = sum(0.005 + 1e-3 + 1e-6 * (1000 + j) for j in range(100)) / 100
    assert out.itl[0] == pytest.approx(expected, rel=1e-9)


def test_result_does_not_depend_on_how_often_the_engine_is_advanced(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, c_kv=2e-8, kv_capacity_tokens=60_000)
    rng = random.Random(3)
    t, reqs = 0.0, []
    for _ in range(400):
        t += rng.expovariate(40)
        reqs.append(Request(t, rng.randint(10, 3000), rng.randint(1, 300)))
    a, out_a = run(cfg, reqs)
    b, out_b = run(cfg, reqs, step=0.0137)
    assert a.num_preemptions_total == b.num_preemptions_total > 0
    for x, y in ((out_a.ttft, out_b.ttft), (out_a.itl, out_b.itl), (out_a.finished_at, out_b.finished_at)):
        assert [-1 if math.isnan(v) else round(v, 9) for v in x] == [-1 if math.isnan(v) else round(v, 9) for v in y]


def test_kv_exhaustion_preempts_the_newest_which_recomputes_and_still_finishes(engine_cfg: EngineConfig) -> None:
    # Two requests that each fit alone but not together at full length.
    cfg = dataclasses.replace(engine_cfg, kv_capacity_tokens=3000)
    eng, out = run(cfg, [Request(0.0, 1000, 900), Request(0.001, 1000, 900)])
    assert eng.num_preemptions_total >= 1
    assert not any(math.isnan(f) for f in out.finished_at)
    assert out.itl[1] > out.itl[0]  # the victim waited out the other's decode inside its ITL
    assert eng.kv_used_tokens == 0


def test_a_prompt_that_can_never_fit_is_refused_not_queued_forever(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, kv_capacity_tokens=1000)
    eng, out = run(cfg, [Request(0.0, 2000, 5), Request(0.0, 100, 5)])
    assert eng.rejected_total == 1
    assert math.isnan(out.finished_at[0]) and not math.isnan(out.finished_at[1])


def test_max_num_seqs_holds_the_rest_in_the_waiting_queue(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=2)
    eng = ReplicaEngine(cfg)
    for _ in range(5):
        eng.submit(Request(0.0, 10, 1000), 0.0)
    eng.advance(0.1)
    assert (eng.num_running, eng.num_waiting, eng.outstanding) == (2, 3, 5)
    eng.advance(100.0)
    assert (eng.num_running, eng.num_waiting, eng.request_success_total) == (0, 0, 5)


def test_histograms_count_one_ttft_per_request_and_one_itl_per_later_token(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, c_kv=3e-7)
    reqs = [Request(0.01 * i, 500 + 37 * i, 1 + 13 * i) for i in range(30)]
    eng, out = run(cfg, reqs)
    assert eng.ttft_count == sum(eng.ttft_buckets) == 30
    assert eng.itl_count == sum(eng.itl_buckets) == sum(r.output_tokens - 1 for r in reqs)
    assert eng.ttft_sum == pytest.approx(sum(out.ttft))
    per_request_itl = sum(i * (r.output_tokens - 1) for i, r in zip(out.itl, reqs, strict=True) if r.output_tokens > 1)
    assert eng.itl_sum == pytest.approx(per_request_itl)


def test_a_run_of_growing_steps_lands_in_the_buckets_each_step_belongs_to(engine_cfg: EngineConfig) -> None:
    eng = ReplicaEngine(engine_cfg)
    first, slope, k, n = 0.004, 0.0007, 200, 3
    eng._observe_itl_run(first, slope, k, n)
    expected = [0] * (len(ITL_BUCKETS) + 1)
    for j in range(k):
        expected[bisect_left(ITL_BUCKETS, first + slope * j)] += n
    assert eng.itl_buckets == expected


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="kv_capacity_tokens"):
        EngineConfig(0, 10, 100, 16, 0.005, 1e-5, 1e-3)
    with pytest.raises(ValueError, match="max_num_seqs"):
        EngineConfig(1000, 200, 100, 16, 0.005, 1e-5, 1e-3)


def test_the_waiting_gauge_leaves_out_arrivals_during_the_step_in_flight(engine_cfg: EngineConfig) -> None:
    # vLLM's core reads arrivals from its input queue between steps; num_requests_waiting counts only what
    # the scheduler left waiting
    eng = ReplicaEngine(engine_cfg)
    eng.submit(Request(0.0, 2000, 50), 0.0)
    eng.advance(0.001)  # the first prefill step (25 ms) is in flight
    eng.submit(Request(0.001, 100, 50), 0.001)
    assert eng.num_waiting == 0 and eng.outstanding == 2
    eng.advance(eng.now + 1e-9)  # the next step admits it
    assert eng.num_waiting == 0 and eng.num_running == 2


def test_the_waiting_gauge_counts_what_scheduling_could_not_admit(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=2)
    eng = ReplicaEngine(cfg)
    for _ in range(5):
        eng.submit(Request(0.0, 100, 500), 0.0)
    assert eng.num_waiting == 0  # not yet scheduled
    eng.advance(0.5)
    assert eng.num_running == 2 and eng.num_waiting == 3


def test_inter_token_gaps_add_up_to_each_requests_decode_time_across_preemptions(engine_cfg: EngineConfig) -> None:
    # two requests that outgrow a 1,000-token KV cache: the newer is preempted and resumed; its gap on
    # resuming runs from its last token, not its first
    cfg = dataclasses.replace(engine_cfg, kv_capacity_tokens=1000)
    reqs = [Request(0.0, 300, 300), Request(0.0, 300, 300)]
    eng, out = run(cfg, reqs)
    assert eng.num_preemptions_total >= 1
    decode_time = sum(out.finished_at[i] - (r.arrival + out.ttft[i]) for i, r in enumerate(reqs))
    assert eng.itl_sum == pytest.approx(decode_time, rel=1e-9)
    assert eng.itl_count == sum(r.output_tokens - 1 for r in reqs)


def test_requests_beyond_the_models_context_are_refused(engine_cfg: EngineConfig) -> None:
    cfg = dataclasses.replace(engine_cfg, max_model_len=4096)
    eng, out = run(cfg, [Request(0.0, 4000, 96), Request(0.0, 4000, 97)])
    assert eng.rejected_total == 1 and math.isnan(out.finished_at[1]) and not math.isnan(out.finished_at[0])
    assert EngineConfig.from_profile(replica_profile("llama-3.1-8b", "h100-80gb")).max_model_len == 131_072


def _profile(model: str) -> object:
    from inferscale.perf import replica_profile

    return replica_profile(model, "h100-80gb")
