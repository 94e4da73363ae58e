"""Errors of the performance model. All are ValueErrors, so callers that validate input catch one type."""

from __future__ import annotations


class PerfError(ValueError):
    """Base of every error the perf model raises on bad input."""


class UnknownModel(PerfError):
    pass


class UnknownGPU(PerfError):
    pass


class InvalidParallelism(PerfError):
    pass


class DoesNotFit(PerfError):
    """The weights (plus the per-GPU reserve) exceed the memory vLLM may use."""
