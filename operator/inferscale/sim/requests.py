"""Requests as the simulator replays them. Trace loaders produce these; the engine consumes them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    arrival: float  # seconds since the start of the trace
    input_tokens: int
    output_tokens: int  # >= 1


@dataclass(frozen=True)
class Trace:
    name: str  # e.g. "azure-conv", shown in reports
    requests: tuple[Request, ...]  # sorted by arrival
    duration: float  # seconds covered (>= last arrival)
