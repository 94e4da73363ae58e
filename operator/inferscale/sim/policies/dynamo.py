"""NVIDIA Dynamo planner, SLA mode, throughput-based (predictive) scaling of an aggregated engine.

Sources: reference/peer-autoscalers.md §3.1-§3.2 (ai-dynamo/dynamo `planner/config/defaults.py`,
`core/throughput_scaling.py`). Defaults: throughput_adjustment_interval 180 s, min_endpoint 1,
load predictor with Kalman defaults q_level 1.0, q_trend 0.1, r 10, min_points 5.
- Every 180 s: observe the last interval's request count and mean ISL/OSL, predict the next
  interval's, and set replicas = max(ceil(predicted_rps / engine_rps), min_endpoint), where engine_rps
  is one engine's rate at the TTFT and ITL SLAs (`find_best_engine_agg_rps`; here the perf model
  stands in for the pre-deployment profile).
- Demand is offered load: the requests started at the frontend over the interval
  (`traffic_metrics.py::get_avg_request_count`, increase(dynamo_frontend_requests_started_total), "so
  throughput planning sees offered load, not only completed responses"), here the observation's
  arrival rate sampled once a minute (it is a 1-minute rate, so three samples tile the interval). A
  saturated fleet completes only what it serves, so completions would hide the demand above capacity.
  Without that signal (the operator's observation has none: vLLM exports no arrival counter) the
  completions of `vllm:request_success_total` stand in, as Dynamo falls back to completed requests
  when the started-requests series is missing.
- Predictor: a documented simplification. Dynamo's default is ARIMA (statsmodels); this uses its
  built-in alternative, the Kalman local-linear-trend predictor with Dynamo's defaults, which needs
  no extra dependency. Below 5 observations it predicts the last value.
- The correction factors (observed / profiled latency) are not modelled; max_gpu_budget is taken
  as the fleet's max replicas (Dynamo's default of 8 GPUs is a single-node demo value).
- NaN/missing metrics: the adjustment is skipped (Dynamo's behaviour, its issue #6985).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.window import Samples

ADJUSTMENT_INTERVAL = 180.0
SAMPLE_INTERVAL = 60.0
MIN_ENDPOINT = 1
KALMAN_Q_LEVEL = 1.0
KALMAN_Q_TREND = 0.1
KALMAN_R = 10.0
KALMAN_MIN_POINTS = 5


class KalmanTrend:
    """Local linear trend Kalman filter: state (level, trend), one-step-ahead prediction."""

    def __init__(self, q_level: float = KALMAN_Q_LEVEL, q_trend: float = KALMAN_Q_TREND, r: float = KALMAN_R) -> None:
        self.q_level, self.q_trend, self.r = q_level, q_trend, r
        self.n = 0
        self.last = 0.0
        self.level = 0.0
        self.trend = 0.0
        self.p = [[1e6, 0.0], [0.0, 1e6]]  # vague prior

    def update(self, y: float) -> None:
        self.n += 1
        self.last = y
        if self.n == 1:
            self.level = y
            return
        # Predict: x = F x, P = F P F' + Q with F = [[1, 1], [0, 1]].
        level, trend = self.level + self.trend, self.trend
        (a, b), (c, d) = self.p
        p00 = a + b + c + d + self.q_level
        p01 = b + d
        p10 = c + d
        p11 = d + self.q_trend
        # Update with H = [1, 0].
        s = p00 + self.r
        k0, k1 = p00 / s, p10 / s
        innovation = y - level
        self.level = level + k0 * innovation
        self.trend = trend + k1 * innovation
        self.p = [[(1 - k0) * p00, (1 - k0) * p01], [p10 - k1 * p00, p11 - k1 * p01]]

    def predict(self) -> float:
        if self.n < KALMAN_MIN_POINTS:
            return self.last
        return self.level + self.trend


class DynamoSLA:
    name = "dynamo-sla"

    def __init__(self, ctx: PolicyContext) -> None:
        self.interval = SAMPLE_INTERVAL
        self.adjustment_interval = ADJUSTMENT_INTERVAL
        self.ctx = ctx
        self._requests = KalmanTrend()
        self._isl = KalmanTrend()
        self._osl = KalmanTrend()
        self._arrivals = Samples(keep=ADJUSTMENT_INTERVAL)
        self._next_run: float | None = None

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        current = obs.current_replicas
        if obs.arrival_rate is not None and math.isfinite(obs.arrival_rate):
            self._arrivals.add(now, obs.arrival_rate)
        if self._next_run is None:  # on the interval's grid from the start, whenever the first sample comes
            self._next_run = math.ceil(now / ADJUSTMENT_INTERVAL - 1e-9) * ADJUSTMENT_INTERVAL
        if now < self._next_run - 1e-9:
            return current
        self._next_run = now + ADJUSTMENT_INTERVAL
        rate = self._demand(obs, now, rate_history)
        if rate is None or obs.request_rate is None or obs.request_rate <= 0:
            return current  # no ISL/OSL without completions: Dynamo skips the adjustment
        if obs.prompt_token_rate is None or obs.generation_token_rate is None:
            return current
        self._requests.update(rate * ADJUSTMENT_INTERVAL)
        self._isl.update(obs.prompt_token_rate / obs.request_rate)
        self._osl.update(obs.generation_token_rate / obs.request_rate)
        demand = max(self._requests.predict(), 0.0) / ADJUSTMENT_INTERVAL
        isl = max(self._isl.predict(), 0.0)
        osl = max(self._osl.predict(), 1.0)
        needed = max(self.ctx.replicas_for(demand, isl, osl), MIN_ENDPOINT)
        return self.ctx.clamp(needed)

    def _demand(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> float | None:
        """Requests/s over the last interval: started at the frontend, else completed."""
        started = self._arrivals.values(now, ADJUSTMENT_INTERVAL)
        if started:
            return sum(started) / len(started)
        done = [s.value for s in rate_history if now - ADJUSTMENT_INTERVAL < s.at <= now and math.isfinite(s.value)]
        return sum(done) / len(done) if done else obs.request_rate
