"""Quantiles from Prometheus-style cumulative histogram buckets, with Prometheus's own rule, so the
simulator's TTFT P95 and the operator's are computed the same way as `histogram_quantile`."""

from __future__ import annotations

import math
from collections.abc import Mapping


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """`buckets` maps upper bound `le` (math.inf for +Inf) to a cumulative count or rate.

    Returns None when there were no observations: an empty window says nothing about latency.
    Like Prometheus: linear interpolation inside the bucket holding the rank, the lower edge of the
    first bucket is 0, and a rank in the +Inf bucket returns the highest finite bound.
    """
    if not 0.0 <= q <= 1.0 or not buckets:
        return None
    bounds = sorted(buckets)
    if bounds[-1] != math.inf:
        return None
    counts = [buckets[b] for b in bounds]
    # Rates of cumulative counters can dip by float error; Prometheus enforces monotonicity too.
    for i in range(1, len(counts)):
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if not total > 0.0 or not math.isfinite(total):
        return None
    rank = q * total
    i = next(i for i, c in enumerate(counts) if c >= rank)
    if bounds[i] == math.inf:
        return bounds[-2] if len(bounds) > 1 else None
    lower = bounds[i - 1] if i > 0 else 0.0
    below = counts[i - 1] if i > 0 else 0.0
    in_bucket = counts[i] - below
    if in_bucket <= 0:
        return bounds[i]
    return lower + (bounds[i] - lower) * (rank - below) / in_bucket
