"""Kubernetes HPA (autoscaling/v2) on GPU utilization: the "CPU-style" baseline.

Source: reference/peer-autoscalers.md §4.5 and DESIGN §1 ("Why CPU-based HPA fails").
- Metric: `obs.gpu_utilization`, the DCGM busy fraction averaged over pods (a Pods metric through
  prometheus-adapter), target average 60 %. Why 60 %: a GPU running even one sequence reads busy,
  so the metric is close to bimodal (idle ~0, serving ~1) and any target between ~30 % and ~90 %
  behaves alike; 60 % is the middle of that range and the headroom usually configured for GPUs.
- Sync period 15 s, tolerance 0.1, default behavior (scale-down window 300 s, 100 % per 15 s;
  scale-up 100 % or 4 pods per 15 s, the larger).
- Metric pipeline lag 15 s: the HPA acts on the sample from one sync earlier (exporter -> Prometheus
  -> adapter; the "HPA scrape delay: 15 s in production" of BLIS, reference/serving-metrics §1.4).
- Pending pods count as 0 % on a scale-up and are left out on a scale-down (`groupPods` puts a
  Pending-phase pod with the unready ones); Ready pods without a sample count as 0 % on a scale-up
  and 100 % on a scale-down.
- No metric at all: the HPA cannot compute (ScalingActive=False) and keeps the current count.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferscale.scaling.types import Observation, RateSample
from inferscale.sim.policies.context import PolicyContext
from inferscale.sim.policies.hpa_behavior import SYNC_PERIOD, HPABehavior, pods_metric_replicas
from inferscale.sim.policies.window import Samples

TARGET_UTILIZATION = 0.6
METRIC_LAG = 15.0


class HPAGpuUtil:
    name = "hpa-gpu-util"

    def __init__(self, ctx: PolicyContext, target: float | None = None, metric_lag: float = METRIC_LAG) -> None:
        self.interval = SYNC_PERIOD
        self.target = target if target is not None else ctx.given_target(self.name) or TARGET_UTILIZATION
        self.metric_lag = metric_lag
        self._behavior = HPABehavior(max(ctx.min_replicas, 1), ctx.max_replicas)
        self._util = Samples(keep=metric_lag + 4 * SYNC_PERIOD)
        self._reporting = Samples(keep=metric_lag + 4 * SYNC_PERIOD)

    def decide(self, obs: Observation, now: float, rate_history: Sequence[RateSample]) -> int:
        current = obs.current_replicas
        if obs.gpu_utilization is not None:
            self._util.add(now, obs.gpu_utilization)
            self._reporting.add(now, float(obs.pods_reporting or obs.ready_replicas))
        usage = self._util.latest(now, self.metric_lag)
        reporting = self._reporting.latest(now, self.metric_lag)
        if usage is None or reporting is None or reporting < 1 or current == 0:
            return current
        ready = obs.ready_replicas
        n_reporting = min(int(reporting), ready) if ready else int(reporting)
        missing = max(ready - n_reporting, 0)
        desired = pods_metric_replicas(usage, self.target, current, n_reporting, missing, obs.pending_replicas)
        return self._behavior.apply(desired, current, now)
