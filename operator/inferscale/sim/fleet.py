"""A Deployment of simulated vLLM replicas behind a least-outstanding-requests router.

Replicas cost GPU time from creation (cold start is paid for) and serve only once Ready, after a
time-to-ready drawn per replica. Scale-down removes pending replicas first, then, for a policy that steers
the ReplicaSet with pod-deletion-cost as the operator does (adapters.deletion_cost), the least-loaded Ready
replicas; otherwise the ReplicaSet's own choice, the most recently Ready. Removed replicas leave the router
at once and drain their in-flight requests, billed until the last one finishes. Requests that arrive while
no replica is Ready wait in the router's queue; that wait is part of their TTFT.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass

from inferscale.scaling.durations import parse_duration
from inferscale.sim.engine import EngineConfig, Outcomes, ReplicaEngine

_INF = math.inf


@dataclass(frozen=True)
class TimeToReady:
    """Seconds from pod creation to Ready: fixed (`180s`) or uniform over a range (`120s-240s`)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (0 <= self.low <= self.high) or not math.isfinite(self.high):
            raise ValueError(f"time-to-ready range must satisfy 0 <= low <= high, got {self.low}..{self.high}")

    @classmethod
    def parse(cls, text: str) -> TimeToReady:
        """`180s` (fixed) or `120s-240s` (uniform); raises ValueError naming the accepted forms."""
        parts = text.split("-")
        if len(parts) > 2:
            raise ValueError(f"invalid time-to-ready {text!r}: use a duration such as '180s' or a range '120s-240s'")
        try:
            values = [parse_duration(p) for p in parts]
        except ValueError as err:
            raise ValueError(
                f"invalid time-to-ready {text!r}: use a duration such as '180s' or a range '120s-240s'"
            ) from err
        low, high = values[0], values[-1]
        if high < low:
            raise ValueError(f"invalid time-to-ready {text!r}: the range's upper end is below its lower end")
        return cls(low, high)

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2

    def sample(self, rng: random.Random) -> float:
        return self.low if self.low == self.high else rng.uniform(self.low, self.high)

    def __str__(self) -> str:
        return f"{self.low:g}s" if self.low == self.high else f"{self.low:g}s-{self.high:g}s"


class Replica:
    __slots__ = ("created_at", "deleted_at", "engine", "last_busy", "ready_at", "removed_at")

    def __init__(self, engine: ReplicaEngine, created_at: float, ready_at: float) -> None:
        self.engine = engine
        self.created_at = created_at
        self.ready_at = ready_at
        self.removed_at: float | None = None  # scaled away: no new requests from then on
        self.deleted_at: float | None = None  # gone: GPU released (after draining, if it was serving)
        self.last_busy = 0.0  # engine busy seconds at the previous scrape (for GPU utilization)


class Fleet:
    def __init__(
        self,
        cfg: EngineConfig,
        gpus_per_replica: int,
        time_to_ready: TimeToReady,
        seed: int = 0,
        outcomes: Outcomes | None = None,
        least_loaded_victims: bool = True,
    ) -> None:
        self.cfg = cfg
        self.least_loaded_victims = least_loaded_victims
        self.gpus = gpus_per_replica
        self.ttr = time_to_ready
        self.outcomes = outcomes
        self._rng = random.Random(seed)
        self.replicas: list[Replica] = []  # every replica ever created, in creation order
        self.pending: list[Replica] = []  # created, not Ready, not removed
        self.ready: list[Replica] = []  # serving
        self.draining: list[Replica] = []  # removed while serving, still finishing requests
        self.deleted: list[Replica] = []  # in deletion order
        self._ready_engines: list[ReplicaEngine] = []  # mirrors `ready`, for the router's hot loop
        self._ready_heap: list[tuple[float, int, Replica]] = []
        self.queue: deque[tuple[float, int, int, int]] = deque()  # router queue: arrival, in, out, rid
        self.scale_actions = 0

    # -- supply ---------------------------------------------------------------------------------------

    @property
    def desired(self) -> int:
        """The Deployment's spec.replicas: pending + ready."""
        return len(self.pending) + len(self.ready)

    @property
    def provisioned(self) -> int:
        """Replicas holding GPUs: pending, ready and draining."""
        return len(self.pending) + len(self.ready) + len(self.draining)

    @property
    def next_ready_at(self) -> float:
        heap = self._ready_heap
        while heap and heap[0][2].removed_at is not None:
            heapq.heappop(heap)
        return heap[0][0] if heap else _INF

    def start(self, replicas: int, now: float = 0.0) -> None:
        """Replicas that exist and are Ready before the replay starts (a warm fleet)."""
        for _ in range(replicas):
            r = Replica(ReplicaEngine(self.cfg, self.outcomes, now), now, now)
            self.replicas.append(r)
            self._make_ready(r)

    def scale_to(self, n: int, now: float) -> bool:
        """Set spec.replicas to `n` at `now`; True when that changed it."""
        n = max(0, n)
        current = self.desired
        if n == current:
            return False
        self.scale_actions += 1
        if n > current:
            for _ in range(n - current):
                ready_at = now + self.ttr.sample(self._rng)
                r = Replica(ReplicaEngine(self.cfg, self.outcomes, now), now, ready_at)
                self.replicas.append(r)
                self.pending.append(r)
                heapq.heappush(self._ready_heap, (ready_at, len(self.replicas), r))
            return True
        # A ReplicaSet removes pods that are not Ready first (controller.ActivePods ranking), then those of
        # the lowest pod-deletion-cost (the least loaded, when the policy sets it), then the most recently Ready.
        steered = self.least_loaded_victims
        candidates = sorted(self.pending, key=lambda r: -r.created_at)
        candidates += sorted(
            self.ready, key=lambda r: (r.engine.outstanding if steered else 0, -r.ready_at, -r.created_at)
        )
        for r in candidates[: current - n]:
            self._remove(r, now)
        return True

    def _remove(self, r: Replica, now: float) -> None:
        r.removed_at = now
        if r in self.pending:
            self.pending.remove(r)
            self._delete(r, now)
            return
        i = self.ready.index(r)
        del self.ready[i]
        del self._ready_engines[i]
        r.engine.advance(now)
        if r.engine.idle:
            self._delete(r, now)
        else:
            self.draining.append(r)

    def promote(self, now: float) -> None:
        """Make every replica whose time-to-ready has elapsed by `now` Ready, then serve the router queue."""
        while self.next_ready_at <= now:
            _, _, r = heapq.heappop(self._ready_heap)
            self.pending.remove(r)
            self._make_ready(r)
            r.engine.advance(r.ready_at)
        queue = self.queue
        while queue and self.ready:
            arrival, inp, out, rid = queue.popleft()
            self.route(arrival, inp, out, rid, now)

    def _delete(self, r: Replica, at: float) -> None:
        r.deleted_at = at
        self.deleted.append(r)

    def _make_ready(self, r: Replica) -> None:
        self.ready.append(r)
        self._ready_engines.append(r.engine)

    def reap(self, now: float) -> None:
        """Delete draining replicas that have finished their last request."""
        still = []
        for r in self.draining:
            e = r.engine
            e.advance(now)
            if e.idle:
                last = e.last_finish_at
                self._delete(r, max(r.removed_at or now, last if last is not None else now))
            else:
                still.append(r)
        self.draining = still

    # -- demand ---------------------------------------------------------------------------------------

    def route(self, arrival: float, input_tokens: int, output_tokens: int, rid: int, now: float) -> None:
        """Least outstanding requests over Ready replicas (the oldest wins ties); queue when none is Ready."""
        best = None
        least = 1 << 62
        for e in self._ready_engines:
            if e.horizon <= now:
                e.advance(now)
            o = e.outstanding_at(now)
            if o < least:
                least = o
                best = e
        if best is None:
            self.queue.append((arrival, input_tokens, output_tokens, rid))
        else:
            best.submit_tokens(arrival, input_tokens, output_tokens, now, rid)

    def advance_all(self, until: float) -> None:
        for r in self.ready:
            r.engine.advance(until)
        for r in self.draining:
            r.engine.advance(until)

    # -- accounting -----------------------------------------------------------------------------------

    def gpu_seconds(self, end: float) -> float:
        """Σ replica lifetime within [0, end] × GPUs: creation to deletion (or `end` if still there)."""
        total = 0.0
        for r in self.replicas:
            stop = end if r.deleted_at is None else min(r.deleted_at, end)
            total += max(0.0, stop - r.created_at)
        return total * self.gpus
