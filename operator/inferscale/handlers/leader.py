"""The operator's side of leader election: wait for the Lease, renew it, and stop acting as soon as it cannot
be renewed in time, so that two operators never scale the same Deployment at once.

The timings are client-go's defaults. A leader may write for `renew_deadline` (10 s) from the moment it
*sent* its last successful renewal (`may_write`, which the tick's client checks before every write), while a
standby waits a whole `duration` (15 s) from the moment its read *returned* that renewal: the 5 s between
them cover a renewal answered late and a slow read. The elector talks to the API server through a client of
its own, so a tick with hundreds of requests in flight cannot hold a renewal up. On a clean exit the leader
releases the Lease (holder emptied, duration 1 s), so a rolling update hands over within one `retry`.
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
    kube: KubeApi  # its own client: see the module's docstring
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
    renewed: float | None = None  # when the last successful write of the Lease was sent
    answered: float | None = None  # when the API server last answered about the Lease at all
    closing: bool = False
    began: float | None = None  # when this candidate first tried
    _said: str | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/{self.name}"

    @property
    def holder(self) -> str:
        return self.seen.record.holder if self.seen is not None else ""

    def may_write(self) -> bool:
        """Whether this process still holds the Lease for certain: a standby takes over no sooner than
        `duration` after the last renewal, and this stops `duration - renew_deadline` before that."""
        return self.leader and self.renewed is not None and self.clock() - self.renewed < self.renew_deadline

    async def try_once(self) -> bool:
        """One attempt to hold the Lease. The holder renews with a single write carrying the version it last
        wrote (client-go's fast path) and reads only when that is refused; a standby reads, and writes itself
        in where it may. A write that loses a race (409 on the resourceVersion) is a plain no."""
        sent = self.clock()
        seen = self.seen
        if self.leader and seen is not None and seen.record.holder == self.identity:
            try:
                if await self._write(seen.record, sent):
                    return True
            except KubeError as e:
                if e.status != 404:
                    raise
                # The Lease was deleted (with its namespace, by hand): a standby creates it at its next try, so
                # this stops acting now, and leads on only if its own create comes first.
                self.renewed = None
        try:
            lease = await self.kube.get(self.path)
        except KubeError as e:
            if e.status != 404:
                raise
            return await self._create(sent)
        now = self.clock()  # the record is dated when the read returned: the later, the safer for a standby
        self.answered = now
        record = LeaseRecord.from_object(lease)
        self.seen = observe(self.seen, record, now)
        if not may_take(self.seen, self.identity, now):
            return False
        return await self._write(record, sent)

    async def _write(self, record: LeaseRecord, sent: float) -> bool:
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
        self._held(answer, sent)
        return True

    async def _create(self, sent: float) -> bool:
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
        self._held(created, sent)
        return True

    def _held(self, lease: dict[str, object], sent: float) -> None:
        self.answered = self.clock()
        self.seen = Seen(LeaseRecord.from_object(lease), self.answered)
        self.renewed = sent

    async def _attempt(self, within: float) -> bool:
        try:
            async with asyncio.timeout(max(0.05, within)):  # wait_for can swallow a cancellation on 3.11
                return await self.try_once()
        except (KubeError, TimeoutError) as e:
            self._warn(str(e) or f"no answer within {within:.1f}s")
        except (ValueError, TypeError, KeyError) as e:  # a Lease that is not what a Lease should be
            self._warn(f"unreadable ({type(e).__name__}: {e})")
        return False

    def _warn(self, what: str) -> None:
        if what != self._said:  # every 2 s, the same refusal (a 403) would bury the rest of the log
            self._said = what
            log.warning("lease %s/%s: %s", self.namespace, self.name, what)

    def _stop_if_closing(self) -> None:
        if self.closing:
            raise asyncio.CancelledError  # cleanup asked: a cancellation lost on the way must not keep us here

    async def acquire(self) -> None:
        """Returns once this candidate holds the Lease."""
        announced: str | None = None
        self.began = self.clock()
        while not await self._attempt(self.renew_deadline):
            self._stop_if_closing()
            if self.holder and self.holder != announced:
                announced = self.holder
                log.info("standing by: the lease %s/%s is held by %s", self.namespace, self.name, self.holder)
            await asyncio.sleep(self.retry)
            self._stop_if_closing()
        self.leader = True
        self._said = None
        log.info("holding the lease %s/%s as %s", self.namespace, self.name, self.identity)

    async def hold(self) -> str:
        """Renews the Lease every `retry` seconds; returns why leadership ended: another holder took it, or
        no renewal succeeded within `renew_deadline` of the last one sent."""
        while True:
            assert self.renewed is not None
            left = self.renew_deadline - (self.clock() - self.renewed)
            await asyncio.sleep(max(0.0, min(self.retry, left)))
            self._stop_if_closing()
            left = self.renew_deadline - (self.clock() - self.renewed)
            if left > 0 and await self._attempt(left):
                continue
            self._stop_if_closing()
            if self.holder not in ("", self.identity):
                self.leader = False
                return f"{self.holder} holds the lease now"
            if self.renewed is None:
                self.leader = False
                return "the lease was deleted, and another candidate created it again first"
            if not self.may_write():
                self.leader = False
                return f"the lease could not be renewed for {self.renew_deadline:g}s"

    def standby_healthy(self) -> bool:
        """A standby whose reads of the Lease fail (a 403 without the Role, no API server) could never take
        over: after three lease durations without an answer it reports so on /healthz."""
        last = self.answered if self.answered is not None else self.began
        return last is None or self.clock() - last < 3 * self.duration

    async def release(self) -> None:
        """Empties the Lease this candidate holds, so a standby takes it at its next try."""
        if not self.may_write() or self.seen is None:
            self.leader = False
            return
        self.leader = False
        wall = micro_time(self.wall())
        patch = {
            "metadata": {"resourceVersion": self.seen.record.resource_version},
            "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": wall, "acquireTime": wall},
        }
        try:
            async with asyncio.timeout(self.retry * 2):
                await self.kube.merge_patch(self.path, patch)
            log.info("released the lease %s/%s", self.namespace, self.name)
        except (KubeError, TimeoutError) as e:  # the standby takes over when it expires instead
            log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, e)
