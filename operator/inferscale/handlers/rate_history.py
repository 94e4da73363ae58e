"""The forecaster's rate history of one Deployment: two arrays of doubles, read in place as a sequence of
`RateSample`s.

Held as a deque of (time, rate) tuples, two days of one-minute points cost about 130 bytes each (376 MB
for 1000 services), and copying them into RateSamples for the forecaster cost 2.9 s per tick at 1000
services: past the operator's budget of 300 MB and a 2 s tick after two days up. The forecaster reads a
few dozen points by binary search, so a view costs it next to nothing and the arrays 16 bytes a point.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import overload

from inferscale.scaling.types import RateSample


class RateHistory(Sequence[RateSample]):
    """The newest `maxlen` points, oldest first."""

    def __init__(self, maxlen: int) -> None:
        if maxlen < 1:
            raise ValueError(f"a rate history holds at least one point, got maxlen={maxlen}")
        self.maxlen = maxlen
        self._at = array("d")
        self._value = array("d")

    def extend(self, points: Iterable[tuple[float, float]]) -> None:
        """Appends the points (oldest first) newer than the newest held, then forgets the oldest beyond
        `maxlen`: the incremental range query's first point repeats the last one of the previous query."""
        last = self._at[-1] if self._at else float("-inf")
        for at, value in points:
            if at > last:
                self._at.append(at)
                self._value.append(value)
                last = at
        excess = len(self._at) - self.maxlen
        if excess > 0:
            del self._at[:excess]
            del self._value[:excess]

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, index: int) -> RateSample: ...

    @overload
    def __getitem__(self, index: slice) -> list[RateSample]: ...

    def __getitem__(self, index: int | slice) -> RateSample | list[RateSample]:
        if isinstance(index, slice):
            return [RateSample(a, v) for a, v in zip(self._at[index], self._value[index], strict=True)]
        return RateSample(self._at[index], self._value[index])
