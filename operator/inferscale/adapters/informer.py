"""A list-then-watch cache of one kind in one scope: client-go's reflector, reduced to what a tick needs.

Pods and Deployments barely change between ticks, yet listing them for a thousand services moved
~7 MB of JSON through the API server and the operator every tick. The cache lists once, then
follows a watch from the list's resourceVersion; a tick reads the cache while it is in sync and
lists as before when it is not, so a broken watch costs a list, never a stale view. In sync means:
listed, no failure since, and heard from within STALE_AFTER seconds: an event, or a watch the server
ended cleanly at its timeout (randomized between WATCH_TIMEOUT and twice that, so a quiet watch proves
the connection alive at least that often). A connection that stalls without a reset is resumed after
WATCH_IDLE seconds of silence and is not mistaken for a quiet one for longer than STALE_AFTER.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from inferscale.adapters.kube import KubeApi, KubeError, collection_path

Obj = dict[str, Any]
WATCH_TIMEOUT = 60  # seconds the server keeps one watch open, at least (client-go: 5-10 minutes)
WATCH_IDLE = 2 * WATCH_TIMEOUT + 15.0  # seconds of silence after which a connection has stalled
STALE_AFTER = WATCH_IDLE + 15.0  # seconds without a word from the server before the cache is out of sync
MIN_WATCH = 1.0  # seconds: a watch that ends sooner without an event was not a clean server-side end
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)  # seconds before retrying after a failure


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class Expired(Exception):
    """The watch's resourceVersion is older than the server keeps (HTTP 410): list again."""


class Informer:
    """For kinds every cluster serves (pods, Deployments): a list without a resourceVersion, a 404
    included, is a failure to retry, not an empty kind."""

    def __init__(
        self,
        kube: KubeApi,
        group_version: str,
        plural: str,
        namespace: str | None,
        keep: Callable[[Obj], Obj] | None = None,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube, self.group_version, self.plural, self.namespace = kube, group_version, plural, namespace
        self.keep = keep
        self.log = logger or logging.getLogger("inferscale.informer")
        self.sleep, self.clock = sleep, clock
        self.store: dict[tuple[str, str], Obj] = {}
        self.synced = False  # listed, and no failure since
        self.heard = -float("inf")  # when the server last said something (list, event, bookmark)
        self.resource_version: str | None = None
        self.idle = WATCH_IDLE
        # lists by why they were needed: "start", "expired" (a 410: the server no longer keeps the
        # version the watch would resume from), "failed" (the cache could not be trusted)
        self.lists: Counter[str] = Counter()
        self._why = "start"
        self._task: asyncio.Task[None] | None = None

    def items(self) -> list[Obj] | None:
        """The cached objects, or None while the cache is not in sync (the caller lists instead)."""
        if not self.synced or self.clock() - self.heard > STALE_AFTER:
            return None
        return list(self.store.values())

    def start(self) -> None:
        self._task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                if await self._watch():
                    failures = 0  # resume from the last version
                    continue
                # Ended at once without a word: a proxy or a draining server; back off, do not spin.
            except (Expired, KubeError) as e:
                if isinstance(e, Expired) or e.status == 410:
                    # The version is older than the server keeps: list again, at once the first time.
                    self.log.info("watch of %s expired at version %s (%s); listing again", self.plural,
                                  self.resource_version, e)  # fmt: skip
                    self.synced, self.resource_version, self._why = False, None, "expired"
                    if failures == 0:
                        failures = 1
                        continue
                else:
                    # The connection failed or stalled: the next watch resumes from the last version
                    # (the server replays what was missed, or answers 410); out of sync until heard from.
                    self.synced = False
                    self.log.warning("watching %s failed (%s); resuming", self.plural, e)
            except Exception as e:  # whatever else broke, a cache that stopped following must say so
                self.synced, self.resource_version, self._why = False, None, "failed"
                self.log.warning("watching %s failed (%s); listing again", self.plural, e)
            await self.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])
            failures += 1

    async def _list(self) -> None:
        items, version = await self.kube.list_versioned(self.group_version, self.plural, self.namespace, self.keep)
        if version is None:
            raise KubeError(404, f"{self.plural} listed without a resourceVersion")
        self.store = {_key(o): o for o in items}
        self.resource_version, self.synced, self.heard = version, True, self.clock()
        self.lists[self._why] += 1

    async def _watch(self) -> bool:
        """Follows one watch connection; whether it said anything (an event, or a clean end after at
        least MIN_WATCH seconds)."""
        assert self.resource_version is not None
        path = collection_path(self.group_version, self.plural, self.namespace)
        timeout = int(WATCH_TIMEOUT * (1 + random.random()))
        started, heard = self.clock(), False
        async for event in self.kube.watch(path, self.resource_version, timeout, self.idle):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Expired(obj.get("message", ""))
                # the server did answer, so no code is not "no answer" (0): a transient error all the same
                raise KubeError(int(obj.get("code") or 500), str(obj.get("message", "watch error")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED"):
                self.store[_key(obj)] = self.keep(obj) if self.keep else obj
            elif kind == "DELETED":
                self.store.pop(_key(obj), None)
            if version:
                self.resource_version = version
            heard = True
            self.synced, self.heard = True, self.clock()
        if heard or self.clock() - started >= MIN_WATCH:
            self.synced, self.heard = True, self.clock()
            return True
        return False
