"""Builders shared by the scaling tests: observations, policies and a closed-loop fleet whose total
KV-cache load is a function of time (each ready replica carries load / ready, capped at 100%)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from inferscale.scaling import (
    Decision,
    MetricsState,
    Observation,
    Policy,
    ScalerState,
    decide,
    state_from_status,
    state_to_status,
)


def observe(current: int, kv: float | None = None, waiting: float | None = 0.0, **kw: Any) -> Observation:
    fields: dict[str, Any] = {
        "at": 0.0,
        "current_replicas": current,
        "ready_replicas": current,
        "pods_reporting": current,
        "state": MetricsState.COMPLETE,
        "kv_cache_utilization": kv,
        "waiting": waiting,
    }
    fields.update(kw)
    return Observation(**fields)


def policy(**kw: Any) -> Policy:
    fields: dict[str, Any] = {"min_replicas": 1, "max_replicas": 20}
    fields.update(kw)
    return Policy(**fields)


@dataclass(frozen=True)
class Tick:
    at: float
    replicas: int  # after the decision
    decision: Decision


def run_fleet(
    pol: Policy,
    load: Callable[[float], float],
    start: int,
    until: float,
    *,
    interval: float = 10.0,
    state: ScalerState | None = None,
    restart_at: float | None = None,
    lose_state: bool = False,
    time_to_ready: float = 0.0,
) -> list[Tick]:
    """Tick from t=0 to `until`; a new replica is ready `time_to_ready` after it is created and the
    newest go first on a scale-down. At `restart_at` the state goes through status (an operator
    restart) or, with `lose_state`, is forgotten."""
    st = state or ScalerState()
    created = [-math.inf] * start
    t, out = 0.0, []
    while t <= until:
        if restart_at is not None and t == restart_at:
            st = ScalerState() if lose_state else state_from_status(state_to_status(st))
        current = len(created)
        ready = sum(1 for c in created if t - c >= time_to_ready)
        kv = min(1.0, load(t) / ready) if ready else None
        obs = observe(current, kv=kv, at=t, newest_sample_at=t, ready_replicas=ready, pending_replicas=current - ready)
        d = decide(obs, pol, st, t)
        st = d.state
        created = created[: d.replicas] + [t] * max(d.replicas - current, 0)
        out.append(Tick(t, d.replicas, d))
        t += interval
    return out
