"""An in-process HTTP server standing in for the API server, and a KubeApi pointed at it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from inferscale.adapters.kube import Credentials, KubeApi


@contextlib.asynccontextmanager
async def local_api(app: web.Application, timeout: float = 30.0) -> AsyncIterator[KubeApi]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = KubeApi(Credentials(host=f"http://127.0.0.1:{port}", ssl=False, token=None, token_file=None), timeout)
    try:
        yield kube
    finally:
        await kube.close()
        await runner.cleanup()
