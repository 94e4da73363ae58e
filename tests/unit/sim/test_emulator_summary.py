"""The live emulator's sizing references and its account of the misses (no cluster: the pure parts)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from inferscale.emulator import Emulator, EmulatorConfig, busiest_minute_replicas
from inferscale.perf import replica_capacity_rps, replica_profile
from inferscale.sim.scores import score
from inferscale.sim.traces import RequestArrays

PROFILE = replica_profile("llama-3.1-8b", "h100-80gb")
SLO_TTFT, SLO_ITL = 0.5, 0.05
CAP = replica_capacity_rps(PROFILE, 1000.0, 200.0, SLO_TTFT, SLO_ITL)


def _requests(rates: list[float]) -> RequestArrays:
    """One minute per rate, evenly spaced arrivals, 1,000 prompt and 200 output tokens each."""
    arrival = np.concatenate([m * 60.0 + np.arange(int(r * 60)) / r for m, r in enumerate(rates) if r > 0])
    n = arrival.size
    return RequestArrays(arrival, np.full(n, 1000, np.int64), np.full(n, 200, np.int64))


def test_the_busiest_minute_sets_the_count_and_the_span_limits_which_minutes_count() -> None:
    reqs = _requests([2 * CAP, 5 * CAP, 3 * CAP])
    assert busiest_minute_replicas(reqs, PROFILE, SLO_TTFT, SLO_ITL, 180.0) == 5
    assert busiest_minute_replicas(reqs, PROFILE, SLO_TTFT, SLO_ITL, 60.0) == 2  # the first minute alone


def test_a_utilization_below_one_keeps_headroom() -> None:
    reqs = _requests([2 * CAP])
    assert busiest_minute_replicas(reqs, PROFILE, SLO_TTFT, SLO_ITL, 60.0, utilization=0.8) == math.ceil(2 / 0.8)


def test_no_request_in_the_span_is_no_count_not_zero() -> None:
    reqs = _requests([0.0, 3 * CAP])
    assert busiest_minute_replicas(reqs, PROFILE, SLO_TTFT, SLO_ITL, 60.0) is None


@pytest.mark.parametrize(
    ("ttft", "itl", "ttft_misses", "itl_misses"),
    [
        ([0.1, 0.9, 0.1, math.nan], [0.01, 0.01, 0.08, math.nan], 2, 1),  # unfinished counts on TTFT
        ([0.1, 0.2], [math.nan, 0.06], 0, 1),  # a one-token output has no ITL to miss
        ([0.9], [0.08], 1, 0),  # both missed: counted once, on TTFT
    ],
)
def test_the_summary_says_which_target_each_miss_broke(
    tmp_path: Path, ttft: list[float], itl: list[float], ttft_misses: int, itl_misses: int
) -> None:
    n = len(ttft)
    reqs = RequestArrays(np.arange(n, dtype=np.float64), np.full(n, 100, np.int64), np.full(n, 10, np.int64))
    cfg = EmulatorConfig("ns", "dep", "m", PROFILE, reqs, 60.0, tmp_path, SLO_TTFT, SLO_ITL)
    emu = Emulator(cfg, kube=None)  # type: ignore[arg-type]  # summary() reads no cluster
    emu.outcomes.ttft, emu.outcomes.itl = list(ttft), list(itl)
    emu.outcomes.finished_at = [math.nan if math.isnan(x) else 10.0 for x in ttft]
    summary = emu.summary()
    assert (summary["missed_ttft"], summary["missed_itl_only"]) == (ttft_misses, itl_misses)
    assert summary["slo_attainment"] == pytest.approx((n - ttft_misses - itl_misses) / n)


def test_the_summary_scores_the_outcomes_as_the_simulator_does(tmp_path: Path) -> None:
    """A request cut off mid-stream (a first token, no last) is unfinished and a miss, not a one-token output
    within the SLO; one that never started counts its wait so far in the TTFT percentiles."""
    reqs = RequestArrays(np.array([0.0, 1.0, 2.0, 3.0]), np.full(4, 100, np.int64), np.full(4, 2000, np.int64))
    cfg = EmulatorConfig("ns", "dep", "m", PROFILE, reqs, 60.0, tmp_path, SLO_TTFT, SLO_ITL)
    emu = Emulator(cfg, kube=None)  # type: ignore[arg-type]  # summary() reads no cluster
    emu.ended = 120.0
    emu.outcomes.ttft = [0.1, 0.1, 0.9, math.nan]  # the second was cut off mid-stream; the last never started
    emu.outcomes.itl = [0.01, math.nan, 0.01, math.nan]
    emu.outcomes.finished_at = [30.0, math.nan, 40.0, math.nan]
    summary = emu.summary()
    scored = score(emu.outcomes, reqs.arrival, 120.0, SLO_TTFT, SLO_ITL, 0.0, 0)
    assert (summary["finished"], summary["unfinished"]) == (2, 2) == (4 - scored.unfinished, scored.unfinished)
    assert summary["slo_attainment"] == scored.slo_attainment == 0.25
    assert (summary["ttft_p95_s"], summary["ttft_p99_s"]) == (scored.ttft_p95_s, scored.ttft_p99_s)
    assert summary["ttft_p99_s"] > 100  # the one that never started has waited 117 s
    assert (summary["missed_ttft"], summary["missed_itl_only"], summary["missed_unfinished"]) == (2, 0, 1)


def test_a_summary_without_requests_is_nulls_not_nans(tmp_path: Path) -> None:
    empty = RequestArrays(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    cfg = EmulatorConfig("ns", "dep", "m", PROFILE, empty, 60.0, tmp_path, SLO_TTFT, SLO_ITL)
    summary = Emulator(cfg, kube=None).summary()  # type: ignore[arg-type]
    assert summary["requests"] == 0 and summary["slo_attainment"] is None and summary["ttft_p95_s"] is None
