"""The operator's side of leader election: wait for the Lease, renew it, and stop acting as soon as it cannot
be renewed in time, so that two operators never scale the same Deployment at once.

The timings are client-go's defaults. A leader stops acting `renew_deadline` (10 s) after its last renewal,
while a standby waits a whole `duration` (15 s) after it saw that renewal before taking over: the 5 s between
them cover a tick that was already writing. On a clean exit the leader releases the Lease (holder emptied,
duration 1 s), so a rolling update hands over within one `retry` instead of a lease duration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from inferscale.adapters.kube import KubeApi, KubeError
from inferscale.adapters.lease import LeaseRecord, Seen, lease_spec, may_take, micro_time, observe

log = logging.getLogger("inferscale.leader")


@dataclass
class Elector:
    kube: KubeApi
    namespace: str
    name: str
    identity: str
    duration: int = 15
    renew_deadline: float = 10.0
    retry: float = 2.0
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    seen: Seen | None = None
    leader: bool = False
    _announced: str | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    @property
    def holder(self) -> str:
        return self.seen.record.holder if self.seen is not None else ""

    async def try_once(self) -> bool:
        """One read of the Lease and, where this candidate may, one write of itself into it. A write that
        loses a race to another candidate (409 on the resourceVersion) is a plain no."""
        now = self.clock()
        try:
            lease = await self.kube.get(self.path)
        except KubeError as e:
            if e.status != 404:
                raise
            return await self._create(now)
        record = LeaseRecord.from_object(lease)
        self.seen = observe(self.seen, record, now)
        if not may_take(self.seen, self.identity, now):
            return False
        patch = {
            "metadata": {"resourceVersion": record.resource_version},
            "spec": lease_spec(self.identity, self.duration, self.wall(), record),
        }
        try:
            answer = await self.kube.merge_patch(self.path, patch)
        except KubeError as e:
            if e.status == 409:
                return False
            raise
        self.seen = Seen(LeaseRecord.from_object(answer), now)
        return True

    async def _create(self, now: float) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": lease_spec(self.identity, self.duration, self.wall(), None),
        }
        try:
            created = await self.kube.create(f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", body)
        except KubeError as e:
            if e.status == 409:
                return False  # another candidate created it first
            raise
        self.seen = Seen(LeaseRecord.from_object(created), now)
        return True

    async def _attempt(self, within: float) -> bool:
        try:
            return await asyncio.wait_for(self.try_once(), max(0.1, within))
        except (KubeError, TimeoutError) as e:
            log.warning("lease %s/%s: %s", self.namespace, self.name, e or "no answer in time")
            return False
        except (ValueError, TypeError, KeyError) as e:  # a Lease that is not what a Lease should be
            log.warning("lease %s/%s: unreadable (%s: %s)", self.namespace, self.name, type(e).__name__, e)
            return False

    async def acquire(self) -> None:
        """Returns once this candidate holds the Lease."""
        while not await self._attempt(self.renew_deadline):
            if self.holder and self.holder != self._announced:
                self._announced = self.holder
                log.info("standing by: the lease %s/%s is held by %s", self.namespace, self.name, self.holder)
            await asyncio.sleep(self.retry)
        self.leader = True
        log.info("holding the lease %s/%s as %s", self.namespace, self.name, self.identity)

    async def hold(self) -> str:
        """Renews the Lease every `retry` seconds; returns why leadership ended: another holder took it, or
        no renewal succeeded for `renew_deadline`."""
        last = self.clock()
        while True:
            await asyncio.sleep(self.retry)
            if await self._attempt(self.renew_deadline - (self.clock() - last)):
                last = self.clock()
                continue
            if self.holder not in ("", self.identity):
                self.leader = False
                return f"{self.holder} holds the lease now"
            if self.clock() - last >= self.renew_deadline:
                self.leader = False
                return f"the lease could not be renewed for {self.renew_deadline:g}s"

    async def release(self) -> None:
        """Empties the Lease this candidate holds, so a standby takes it at its next try."""
        if not self.leader or self.seen is None:
            return
        self.leader = False
        wall = micro_time(self.wall())
        patch = {
            "metadata": {"resourceVersion": self.seen.record.resource_version},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": wall, "acquireTime": wall},
        }
        try:
            await asyncio.wait_for(self.kube.merge_patch(self.path, patch), self.retry * 2)
            log.info("released the lease %s/%s", self.namespace, self.name)
        except (KubeError, TimeoutError) as e:  # the standby takes over when it expires instead
            log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, e)
