"""Benchmark, not a test: `decide` and `forecast` cost per call, as the simulator pays them.

Run: .venv/bin/python -m tests.unit.scaling.bench_decide
"""

from __future__ import annotations

import math
import time

from inferscale.scaling import MetricsState, Observation, Policy, RateSample, ScalerState, Schedule, decide, forecast

DAY = 86400.0


def main() -> None:
    pol = Policy(1, 64, capacity_prior_rps=2.0, schedules=(Schedule("0 9 * * 1-5", 9 * 3600.0, 4),))
    for days in (0, 1, 14):
        history = [RateSample(t, 20 + 10 * math.sin(2 * math.pi * t / DAY)) for t in range(0, int(days * DAY), 60)]
        start = history[-1].at + 60.0 if history else 0.0
        state, current, n = ScalerState(), 4, 20_000
        t0 = time.perf_counter()
        for i in range(n):
            now = start + 10.0 * i
            rate = 20 + 10 * math.sin(2 * math.pi * now / DAY)
            obs = Observation(
                at=now,
                current_replicas=current,
                ready_replicas=current,
                pods_reporting=current,
                state=MetricsState.COMPLETE,
                kv_cache_utilization=min(1.0, rate / 8.0 / current),
                kv_cache_utilization_max=min(1.0, rate / 7.0 / current),
                waiting=0.0,
                ttft_p95=0.2,
                itl_mean=0.02,
                request_rate=rate,
                newest_sample_at=now,
            )
            d = decide(obs, pol, state, now, history)
            state, current = d.state, d.replicas
        per_decide = (time.perf_counter() - t0) / n * 1e6
        t0 = time.perf_counter()
        for i in range(n):
            forecast(history, start + 10.0 * i, 180.0)
        per_forecast = (time.perf_counter() - t0) / n * 1e6
        print(
            f"history {days:>2} days ({len(history):>5} samples): decide {per_decide:6.1f} us/call, "
            f"forecast {per_forecast:6.1f} us/call over {n} ticks; final replicas {current}"
        )


if __name__ == "__main__":
    main()
