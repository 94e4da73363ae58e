"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

Only the holder of the Lease runs the tick, so a second replica can stand by and take over in about one
lease duration when the leader's node dies, instead of the minutes before a lost node's pod is replaced.
Whether a Lease has expired is judged by this candidate's own monotonic clock from the moment it saw the
record last change, never by comparing the holder's `renewTime` with the local wall clock: two nodes'
clocks may disagree by more than a lease.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LeaseRecord:
    holder: str  # "" when released
    duration: float  # leaseDurationSeconds
    renew_time: str  # as the holder wrote it: identifies a renewal, not compared with any clock
    transitions: int
    acquire_time: str
    resource_version: str

    @classmethod
    def from_object(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration=float(spec.get("leaseDurationSeconds") or 0),
            renew_time=str(spec.get("renewTime") or ""),
            transitions=int(spec.get("leaseTransitions") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )

    def same_term(self, other: LeaseRecord | None) -> bool:
        """Whether `other` is this record unchanged (the holder has not renewed since). The resourceVersion
        changes with every write, so a renewal whose renewTime reads the same (a wall clock stepped back)
        still counts as one."""
        mine = (self.holder, self.renew_time, self.transitions, self.resource_version)
        return other is not None and mine == (other.holder, other.renew_time, other.transitions, other.resource_version)


@dataclass(frozen=True)
class Seen:
    record: LeaseRecord
    at: float  # this candidate's monotonic time when the record last changed


def observe(previous: Seen | None, record: LeaseRecord, now: float) -> Seen:
    """What the candidate knows after reading `record` at `now`: the time is kept while the record is
    unchanged, so a holder that stopped renewing is seen to expire one lease duration after its last renewal
    was first seen."""
    if previous is not None and record.same_term(previous.record):
        return Seen(record, previous.at)
    return Seen(record, now)


def may_take(seen: Seen, me: str, now: float) -> bool:
    """Whether `me` may write itself into the Lease: it is released, its own, or its holder has not
    renewed it for a whole lease duration."""
    record = seen.record
    return record.holder in ("", me) or now >= seen.at + record.duration


def micro_time(at: float) -> str:
    """A MicroTime, as the API server wants it in a Lease."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_spec(me: str, duration: int, wall: float, previous: LeaseRecord | None) -> dict[str, Any]:
    """The Lease's spec with `me` holding it from `wall`: a renewal keeps the acquire time, a takeover
    counts one more transition."""
    renewing = previous is not None and previous.holder == me
    transitions = 0 if previous is None else previous.transitions + (0 if renewing else 1)
    return {
        "holderIdentity": me,
        "leaseDurationSeconds": duration,
        "acquireTime": previous.acquire_time if renewing and previous is not None else micro_time(wall),
        "renewTime": micro_time(wall),
        "leaseTransitions": transitions,
    }
