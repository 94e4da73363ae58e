"""Figure-only status writes, paced over the idle part of the interval.

A status that says something new (a count, a reason, a condition, the scaler's record) is written in
the tick, before the next decision can read it. A status whose only change is fresher figures
(latency, KV, rates) is queued here instead and sent at an even pace until shortly before the next
tick: a thousand services refreshing every 30 s would otherwise land on the API server and etcd as a
burst of ~500 writes in the tick's first seconds, and the tick would wait for all of them.

The next tick starts only after every write sent here has returned, and each carries the
resourceVersion the tick read as a precondition, so a refresh can never overwrite a newer status,
even one that landed late: the API server refuses it (409) and it counts as dropped. Whatever was
not sent by the next tick is dropped too (that tick computes fresher figures anyway).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from inferscale.handlers import metrics

Send = Callable[[str, Mapping[str, Any]], Awaitable[bool]]  # True when written


class Refresher:
    def __init__(self, send: Send, concurrency: int = 4, clock: Callable[[], float] = time.monotonic) -> None:
        self.send = send
        self.concurrency = concurrency
        self.clock = clock
        # path -> (when its figures were last written, body); a newer body replaces an older one
        self.pending: dict[str, tuple[float, Mapping[str, Any]]] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._pacing: asyncio.Task[None] | None = None

    def submit(self, path: str, body: Mapping[str, Any], written: float) -> None:
        """`written`: when the status's figures were last written (-inf: never). The stalest go first, so
        a service whose refresh was dropped is not dropped again for being late in the list."""
        self.pending[path] = (written, body)

    def start(self, until: float) -> None:
        """Sends what is queued, spread evenly until `until` (a `clock` time)."""
        self._pacing = asyncio.create_task(self._pace(until))

    async def _pace(self, until: float) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        for path in sorted(self.pending, key=lambda p: self.pending[p][0]):
            await slots.acquire()
            _, body = self.pending.pop(path)
            task = asyncio.create_task(self._send(path, body, slots))
            self._inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            left = until - self.clock()
            if self.pending and left > 0:
                await asyncio.sleep(left / (len(self.pending) + 1))

    async def _send(self, path: str, body: Mapping[str, Any], slots: asyncio.Semaphore) -> None:
        try:
            written = await self.send(path, body)
            metrics.STATUS_WRITES.labels("refreshed" if written else "dropped").inc()
        finally:
            slots.release()

    async def finish(self) -> int:
        """Stops pacing, waits for the writes in flight, drops the rest; returns how many were dropped."""
        if self._pacing is not None:
            self._pacing.cancel()
            await asyncio.gather(self._pacing, return_exceptions=True)
            self._pacing = None
        await asyncio.gather(*self._inflight, return_exceptions=True)
        dropped = len(self.pending)
        self.pending.clear()
        if dropped:
            metrics.STATUS_WRITES.labels("dropped").inc(dropped)
        return dropped
