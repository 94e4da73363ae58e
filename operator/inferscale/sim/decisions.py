"""What a simulated policy decided and why, in the words the operator would use in its Events and status.

A replay that only scores a policy says how well it did, not why: an SRE checking inferscale on their
own trace before turning it on wants to read, at the minute TTFT rose, what it saw and which rule held it
back. Policies that explain themselves (inferscale's own, whose `Decision` carries a reason and a
message) leave a record of the ticks worth reading: every change of the replica count, and every tick
whose reason differs from the one before (a hold starting, a rate limit, a dead-band). A steady run of
identical holds is one record, not one per tick, so a 14-day replay stays readable; while the SLO is
missed it is one a minute, as the operator logs it (`scaling.telling`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from inferscale.scaling.telling import Told, worth_telling
from inferscale.scaling.types import Decision, Observation


@runtime_checkable
class Explaining(Protocol):
    """A policy whose last decision can be read after `decide`."""

    last_decision: Decision | None


@dataclass(frozen=True)
class DecisionRecord:
    at: float
    current: int
    replicas: int
    ready: int
    pending: int
    reason: str
    message: str
    forecast_rps: float | None
    forecast_method: str | None
    horizon: float
    recommendations: tuple[tuple[str, int], ...]  # (signal, replicas) in the decision's order
    limits: tuple[str, ...]
    slo_met: bool | None = None  # None when the latency was unknown

    @property
    def changed(self) -> bool:
        return self.replicas != self.current

    def to_json(self, policy: str) -> dict[str, Any]:
        return {
            "policy": policy,
            "at_s": _finite(self.at),
            "from": self.current,
            "to": self.replicas,
            "ready": self.ready,
            "pending": self.pending,
            "reason": self.reason,
            "message": self.message,
            "forecast_rps": _finite(self.forecast_rps),
            "forecast_method": self.forecast_method,
            "horizon_s": _finite(self.horizon),
            "recommendations": [{"signal": s, "replicas": n} for s, n in self.recommendations],
            "limits": list(self.limits),
            "slo_met": self.slo_met,
        }


class DecisionLog:
    """Collects a policy's decisions during a replay; collects nothing for a policy that does not explain."""

    def __init__(self, policy: object) -> None:
        self._policy = policy if isinstance(policy, Explaining) else None
        self.records: list[DecisionRecord] = []

    def after_decide(self, obs: Observation, now: float) -> None:
        """Called right after the policy's `decide(obs, now, ...)`."""
        if self._policy is None or (d := self._policy.last_decision) is None:
            return
        last = self.records[-1] if self.records else None
        told = Told(last.reason, last.replicas, last.slo_met, last.at) if last else None
        if not worth_telling(d, told, now):
            return
        self.records.append(
            DecisionRecord(
                at=now,
                current=d.current,
                replicas=d.replicas,
                ready=obs.ready_replicas,
                pending=obs.pending_replicas,
                reason=d.reason.value,
                message=d.message,
                forecast_rps=d.forecast_rps,
                forecast_method=d.forecast_method,
                horizon=d.horizon,
                recommendations=tuple((r.signal.value, r.replicas) for r in d.recommendations),
                limits=tuple(r.value for r in d.limits),
                slo_met=d.slo_met,
            )
        )


def write_jsonl(path: Path, logs: Iterable[tuple[str, list[DecisionRecord]]]) -> int:
    """One JSON object per line, policy by policy in time order; returns the lines written."""
    n = 0
    with path.open("w") as f:
        for policy, records in logs:
            for r in records:
                f.write(json.dumps(r.to_json(policy), allow_nan=False) + "\n")
                n += 1
    return n


def _finite(x: float | None) -> float | None:
    # JSON has no NaN or Infinity; a number that is not finite is not known
    return x if x is not None and math.isfinite(x) else None
