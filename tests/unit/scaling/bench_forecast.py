"""Benchmark, not a test: forecast accuracy on the ServeGen 14-day rate curves (10-minute windows).

For every window after the first day, forecast the rate one horizon ahead from the windows seen so
far and compare with what came. Zero-rate windows are collection gaps (traces/README.md): they are
left out of the history and not scored. Prints, per method actually used: how often the forecast
was below the actual rate, the shortfall (sum of actual - forecast where below, over the sum of
actual rates: costs SLO) and the excess (the same for forecast - actual: costs GPU).

Run: .venv/bin/python -m tests.unit.scaling.bench_forecast [traces-folder]
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

from tests.paths import TRACES

from inferscale.scaling import RateSample, forecast


def load(path: Path) -> list[RateSample]:
    with path.open() as f:
        return [
            RateSample(float(row["window_start_s"]), float(row["total_rate_rps"]))
            for row in csv.DictReader(f)
            if float(row["total_rate_rps"]) > 0
        ]


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else TRACES
    for name in ("m-mid_aggregate_10min.csv", "m-small_aggregate_10min.csv"):
        samples = load(folder / name)
        for horizon in (600.0, 1800.0):
            scored: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (forecast, actual)
            actual_at = {s.at: s.value for s in samples}
            for i, s in enumerate(samples):
                target = actual_at.get(s.at + horizon)
                if s.at < 86400.0 or target is None:
                    continue
                f = forecast(samples[: i + 1], now=s.at, horizon=horizon)
                assert f.rps is not None
                scored[f.method].append((f.rps, target))
                scored["naive(last)"].append((s.value, target))
            for method, pairs in sorted(scored.items()):
                total = sum(a for _, a in pairs)
                below = sum(1 for f, a in pairs if f < a) / len(pairs)
                shortfall = sum(max(a - f, 0.0) for f, a in pairs) / total
                excess = sum(max(f - a, 0.0) for f, a in pairs) / total
                print(
                    f"{name:28s} h={horizon:5.0f}s {method:11s} n={len(pairs):4d} below {100 * below:5.1f}% "
                    f"shortfall {100 * shortfall:5.1f}% excess {100 * excess:5.1f}%"
                )


if __name__ == "__main__":
    main()
