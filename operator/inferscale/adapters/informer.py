"""A list-then-watch cache of one kind in one scope: client-go's reflector, reduced to what a tick needs.

Pods and Deployments barely change between ticks, yet listing them for a thousand services moved
~7 MB of JSON through the API server and the operator every tick. The cache lists once, then
follows a watch from the list's resourceVersion; a tick reads the cache while it is in sync and
lists as before when it is not (the watch broke and has not resumed), so a broken watch costs a
list, never a stale view.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from inferscale.adapters.kube import KubeApi, KubeError, collection_path

Obj = dict[str, Any]
WATCH_TIMEOUT = 300  # seconds a server keeps one watch open; client-go picks 5-10 minutes
WATCH_IDLE = 90.0  # seconds without an event or a bookmark before a watch is resumed on a new connection
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)  # seconds before retrying after a failure


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class Expired(Exception):
    """The watch's resourceVersion is older than the server keeps (HTTP 410): list again."""


class Informer:
    def __init__(
        self,
        kube: KubeApi,
        group_version: str,
        plural: str,
        namespace: str | None,
        keep: Callable[[Obj], Obj] | None = None,
        logger: logging.Logger | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.kube, self.group_version, self.plural, self.namespace = kube, group_version, plural, namespace
        self.keep = keep
        self.log = logger or logging.getLogger("inferscale.informer")
        self.sleep = sleep
        self.store: dict[tuple[str, str], Obj] = {}
        self.synced = False  # the store follows the server: listed, and the watch is open
        self.served = True  # False: the kind does not exist here (e.g. KEDA not installed)
        self.resource_version: str | None = None
        self.idle = WATCH_IDLE
        self._task: asyncio.Task[None] | None = None

    def items(self) -> list[Obj] | None:
        """The cached objects, or None while the cache is not in sync (the caller lists instead)."""
        return list(self.store.values()) if self.synced else None

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
                if not self.served:
                    return
                await self._watch()
                failures = 0  # the server ended the watch on time: resume from where it stopped
            except Expired:
                self.synced, self.resource_version = False, None
            except Exception as e:  # whatever broke, a cache that stopped following must say so
                # Events may have been missed: list again rather than trust the store.
                self.synced, self.resource_version = False, None
                self.log.warning("watching %s failed (%s); listing again", self.plural, e)
                await self.sleep(BACKOFF[min(failures, len(BACKOFF) - 1)])
                failures += 1

    async def _list(self) -> None:
        items, version = await self.kube.list_versioned(self.group_version, self.plural, self.namespace, self.keep)
        if version is None:
            self.served, self.synced, self.store = False, True, {}
            return
        self.store = {_key(o): o for o in items}
        self.resource_version, self.synced = version, True

    async def _watch(self) -> None:
        assert self.resource_version is not None
        path = collection_path(self.group_version, self.plural, self.namespace)
        async for event in self.kube.watch(path, self.resource_version, WATCH_TIMEOUT, self.idle):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Expired(obj.get("message", ""))
                raise KubeError(int(obj.get("code") or 0), str(obj.get("message", "watch error")))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if kind in ("ADDED", "MODIFIED"):
                self.store[_key(obj)] = self.keep(obj) if self.keep else obj
            elif kind == "DELETED":
                self.store.pop(_key(obj), None)
            if version:
                self.resource_version = version
