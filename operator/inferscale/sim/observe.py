"""What Prometheus and the operator would see of a simulated fleet, as `scaling.types.Observation`.

A scrape every `scrape_interval` seconds reads each Ready pod's gauges (running, waiting, KV usage)
and the fleet's cumulative counters. Counters include draining pods (Prometheus keeps scraping a pod
until it is gone) and keep the final values of deleted ones, so `increase()` never goes backwards.
The queries mirror the operator's PromQL, without Prometheus's boundary extrapolation (differences of
samples exactly one window apart):

- kv mean = avg of the pods' last gauge; kv max = max over pods of max_over_time[1m];
- waiting, running = sum of the last gauges;
- TTFT P95 = histogram_quantile(0.95, sum by (le) (increase(..._bucket[2m]))), vLLM's buckets;
- ITL mean = increase(_sum[2m]) / increase(_count[2m]);
- TPOT P95 = the same quantile over vllm:request_time_per_output_token_seconds (one sample per request);
- request rate = increase(vllm:request_success_total[1m]) / 60 (completions, as the operator reads it);
- arrival rate = requests routed per second over the same 1m: a frontend's started-requests counter
  (Dynamo's dynamo_frontend_requests_started_total), from the count the replay passes to `scrape`;
- token rates over 1m; gpu_utilization = busy-time fraction, averaged over pods and over 1m.

Work per scrape is O(pods), independent of the number of requests.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from inferscale.scaling.histogram import histogram_quantile
from inferscale.scaling.types import MetricsState, Observation, RateSample
from inferscale.sim.engine import ReplicaEngine
from inferscale.sim.fleet import Fleet
from inferscale.sim.vllm_buckets import ITL_BUCKETS, TTFT_BUCKETS

_LE = (*TTFT_BUCKETS, math.inf)
_TPOT_LE = (*ITL_BUCKETS, math.inf)
# Counter vector layout: scalar counters first, then the TTFT buckets, then the per-request TPOT
# buckets (both non-cumulative).
_SUCCESS, _PROMPT, _GENERATION, _ITL_SUM, _ITL_COUNT, _PREEMPT = range(6)
_N_SCALARS = 6


def _counters(e: ReplicaEngine) -> list[float]:
    return [
        e.request_success_total,
        e.prompt_tokens_total,
        e.generation_tokens_total,
        e.itl_sum,
        e.itl_count,
        e.num_preemptions_total,
        *e.ttft_buckets,
        *e.tpot_buckets,
    ]


class _Scrape:
    __slots__ = ("arrived", "at", "counters", "kv_max", "kv_mean", "pods", "running", "util", "waiting")

    def __init__(self, at: float, counters: list[float], arrived: int | None) -> None:
        self.at = at
        self.counters = counters
        self.arrived = arrived
        self.pods = 0
        self.kv_mean: float | None = None
        self.kv_max: float | None = None
        self.running: float | None = None
        self.waiting: float | None = None
        self.util: float | None = None


class Observer:
    def __init__(
        self,
        scrape_interval: float = 5.0,
        latency_window: float = 120.0,
        rate_window: float = 60.0,
        rate_history_step: float = 60.0,
    ) -> None:
        if scrape_interval <= 0 or latency_window < scrape_interval or rate_window < scrape_interval:
            raise ValueError("windows must be at least one scrape interval, and the interval positive")
        self.scrape_interval = scrape_interval
        self.latency_window = latency_window
        self.rate_window = rate_window
        self.rate_history_step = rate_history_step
        self._scrapes: deque[_Scrape] = deque()
        self._retired = [0.0] * (_N_SCALARS + len(_LE) + len(_TPOT_LE))  # counters of deleted pods
        self._n_retired = 0  # fleet.deleted[:n] are folded into _retired
        self.rate_history: list[RateSample] = []
        self._next_history = 0.0
        self._last_scrape_at: float | None = None  # kept or not: the GPU busy fraction spans one scrape interval

    def scrape(self, now: float, fleet: Fleet, arrived: int | None = None, keep: bool = True) -> None:
        """`arrived`: requests that reached the router by `now` since the start (None: not counted). `keep`
        False: Prometheus stores nothing of this scrape (it is down, or the pods' series are gone), so the
        windows and the rate history after it span only the samples on either side of the gap, as PromQL's
        rate and increase do."""
        for r in fleet.deleted[self._n_retired :]:
            self._retired = [a + b for a, b in zip(self._retired, _counters(r.engine), strict=True)]
        self._n_retired = len(fleet.deleted)
        total = list(self._retired)
        for group in (fleet.ready, fleet.draining):
            for r in group:
                r.engine.advance(now)
                for i, v in enumerate(_counters(r.engine)):
                    total[i] += v
        s = _Scrape(now, total, arrived)
        ready = fleet.ready
        prev_at = self._last_scrape_at
        self._last_scrape_at = now
        if ready:
            kvs = [r.engine.kv_usage for r in ready]
            s.pods = len(ready)
            s.kv_mean = sum(kvs) / len(kvs)
            s.kv_max = max(kvs)
            s.running = float(sum(r.engine.num_running for r in ready))
            s.waiting = float(sum(r.engine.num_waiting for r in ready))
            utils = []
            for r in ready:
                busy = r.engine.busy_seconds
                since = max(r.ready_at, prev_at) if prev_at is not None else r.ready_at
                if now > since:
                    utils.append(min(1.0, max(0.0, busy - r.last_busy) / (now - since)))
                r.last_busy = busy
            s.util = sum(utils) / len(utils) if utils else None
        else:
            for r in fleet.draining:
                r.last_busy = r.engine.busy_seconds
        if not keep:
            return
        self._scrapes.append(s)
        horizon = now - max(self.latency_window, self.rate_window) - self.scrape_interval
        while len(self._scrapes) > 2 and self._scrapes[1].at <= horizon:
            self._scrapes.popleft()
        if now >= self._next_history:
            rate = self._rate(_SUCCESS, self.rate_window)
            if rate is not None:
                self.rate_history.append(RateSample(now, rate))
            self._next_history = now + self.rate_history_step

    def _base(self, window: float) -> _Scrape | None:
        """The sample `window` seconds before the newest (or the oldest kept, early in a run)."""
        if len(self._scrapes) < 2:
            return None
        target = self._scrapes[-1].at - window
        for s in self._scrapes:
            if s.at >= target - 1e-9:
                return s if s is not self._scrapes[-1] else None
        return None

    def _rate(self, index: int, window: float) -> float | None:
        return self._per_second(window, lambda s: s.counters[index])

    def _per_second(self, window: float, counter: Callable[[_Scrape], float | None]) -> float | None:
        base = self._base(window)
        if base is None:
            return None
        last = self._scrapes[-1]
        now, then = counter(last), counter(base)
        if now is None or then is None:
            return None
        return (now - then) / (last.at - base.at)

    def observe(self, now: float, fleet: Fleet) -> Observation:
        """The operator's view at `now`, from the newest scrape at or before it."""
        pending = len(fleet.pending)
        ready = len(fleet.ready)
        # The frontend counts arrivals whether or not a pod is Ready to report anything.
        arrival_rate = self._per_second(self.rate_window, lambda s: s.arrived)
        base_obs = Observation(
            at=now,
            current_replicas=fleet.desired,
            ready_replicas=ready,
            pending_replicas=pending,
            arrival_rate=arrival_rate,
        )
        if not self._scrapes or self._scrapes[-1].pods == 0:
            return base_obs
        last = self._scrapes[-1]
        recent = [s for s in self._scrapes if s.at > last.at - self.rate_window]
        kv_peaks = [s.kv_max for s in recent if s.kv_max is not None]
        utils = [s.util for s in recent if s.util is not None]
        ttft_p95 = itl_mean = tpot_p95 = None
        base = self._base(self.latency_window)
        if base is not None:
            delta = [a - b for a, b in zip(last.counters, base.counters, strict=True)]
            split = _N_SCALARS + len(_LE)
            ttft_p95 = histogram_quantile(0.95, dict(zip(_LE, _cumulative(delta[_N_SCALARS:split]), strict=True)))
            tpot_p95 = histogram_quantile(0.95, dict(zip(_TPOT_LE, _cumulative(delta[split:]), strict=True)))
            if delta[_ITL_COUNT] > 0:
                itl_mean = delta[_ITL_SUM] / delta[_ITL_COUNT]
        return Observation(
            at=now,
            current_replicas=fleet.desired,
            ready_replicas=ready,
            pending_replicas=pending,
            pods_reporting=last.pods,
            state=MetricsState.COMPLETE if last.pods >= ready else MetricsState.PARTIAL,
            kv_cache_utilization=last.kv_mean,
            kv_cache_utilization_max=max(kv_peaks) if kv_peaks else None,
            waiting=last.waiting,
            running=last.running,
            ttft_p95=ttft_p95,
            itl_mean=itl_mean,
            tpot_p95=tpot_p95,
            request_rate=self._rate(_SUCCESS, self.rate_window),
            prompt_token_rate=self._rate(_PROMPT, self.rate_window),
            generation_token_rate=self._rate(_GENERATION, self.rate_window),
            newest_sample_at=last.at,
            gpu_utilization=sum(utils) / len(utils) if utils else None,
            arrival_rate=arrival_rate,
        )


def _cumulative(counts: list[float]) -> list[float]:
    out, acc = [], 0.0
    for c in counts:
        acc += c
        out.append(acc)
    return out
