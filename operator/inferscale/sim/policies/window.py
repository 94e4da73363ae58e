"""Timestamped samples that a policy keeps between its decisions (metric windows, pipeline lag)."""

from __future__ import annotations

from collections import deque


class Samples:
    """Values recorded at decision times; queries look at (now - lag - span, now - lag]."""

    def __init__(self, keep: float) -> None:
        self.keep = keep
        self._data: deque[tuple[float, float]] = deque()

    def add(self, at: float, value: float) -> None:
        self._data.append((at, value))
        while self._data and self._data[0][0] <= at - self.keep:
            self._data.popleft()

    def values(self, now: float, span: float, lag: float = 0.0) -> list[float]:
        end = now - lag
        return [v for t, v in self._data if end - span < t <= end]

    def mean(self, now: float, span: float, lag: float = 0.0) -> float | None:
        vs = self.values(now, span, lag)
        return sum(vs) / len(vs) if vs else None

    def max(self, now: float, span: float, lag: float = 0.0) -> float | None:
        vs = self.values(now, span, lag)
        return max(vs) if vs else None

    def latest(self, now: float, lag: float = 0.0) -> float | None:
        """The newest value at least `lag` seconds old, or None."""
        for t, v in reversed(self._data):
            if t <= now - lag:
                return v
        return None
