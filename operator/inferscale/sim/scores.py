"""A policy's score on one replay: SLO attainment, GPU-hours, scale actions, latency percentiles."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from inferscale.sim.engine import Outcomes


@dataclass(frozen=True)
class Scores:
    slo_attainment: float  # share of requests with TTFT <= target and mean ITL <= target; unfinished miss
    gpu_hours: float  # Σ replica lifetime (creation -> deletion or drained) × GPUs per replica
    # over the requests the engines accepted; one without a first token counts its wait so far (a request refused as
    # longer than the model's context got vLLM's 400 at once: no wait, so left out, and a miss in attainment)
    ttft_p95_s: float
    ttft_p99_s: float
    itl_mean_s: float | None  # mean of per-request mean ITL over finished multi-token requests
    scale_actions: int  # changes of spec.replicas
    requests: int
    unfinished: int

    def as_json(self) -> dict[str, float | int | None]:
        return asdict(self)


def share_text(x: float) -> str:
    """A share, rounded down to hundredths of a percent: an attainment below a goal never prints as it."""
    return "–" if math.isnan(x) else f"{math.floor(10_000 * x + 1e-9) / 100:.2f}%"


def score(
    outcomes: Outcomes,
    arrivals: np.ndarray,
    end: float,
    slo_ttft: float,
    slo_itl: float,
    gpu_seconds: float,
    scale_actions: int,
    refused: np.ndarray | None = None,
) -> Scores:
    """`end` is when the replay stopped waiting for in-flight requests; `refused` marks the requests the engines
    refused (longer than the model's context)."""
    n = len(outcomes.ttft)
    if n == 0:
        return Scores(math.nan, gpu_seconds / 3600, math.nan, math.nan, None, scale_actions, 0, 0)
    ttft = np.asarray(outcomes.ttft, dtype=np.float64)
    itl = np.asarray(outcomes.itl, dtype=np.float64)
    finished = ~np.isnan(np.asarray(outcomes.finished_at, dtype=np.float64))
    # No inter-token gap (one output token) passes the ITL target by definition.
    itl_ok = np.isnan(itl) | (itl <= slo_itl)
    met = finished & (ttft <= slo_ttft) & itl_ok
    waited = np.where(np.isnan(ttft), end - arrivals, ttft)
    if refused is not None:
        waited = waited[~refused]
    p95, p99 = np.percentile(waited, [95, 99]) if waited.size else (math.nan, math.nan)
    known_itl = itl[finished & ~np.isnan(itl)]
    return Scores(
        slo_attainment=float(met.mean()),
        gpu_hours=gpu_seconds / 3600,
        ttft_p95_s=float(p95),
        ttft_p99_s=float(p99),
        itl_mean_s=float(known_itl.mean()) if known_itl.size else None,
        scale_actions=scale_actions,
        requests=n,
        unfinished=int(n - finished.sum()),
    )
