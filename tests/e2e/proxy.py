"""A TCP proxy between the operator and the API server, for network faults without tc or iptables
(reference/reliability-testing.md §5.2): bytes pass through unchanged (TLS included: the API server's
certificate names 127.0.0.1), and `stall` freezes the connections open at that moment, as a NAT or a
load balancer that dropped them without a reset would: no byte in either direction, no FIN, no RST.
Connections opened later pass, so a client that gives up on a silent connection and dials again recovers.
`partition` cuts the link both ways: the connections open then and every one dialled until it ends pass
nothing, as a node cut off from the API server sees it; what was sent meanwhile is delivered when it ends,
as TCP retransmits it, and a client's close that came meanwhile reaches the server only after its answer
(or 5 s): a request sent into a partition is then carried out by the server, however late.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class Proxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.stalled_connections = 0  # how many connections the last stall or partition froze
        self.late_answered = 0  # bytes held by a partition that the server answered once it healed
        self._loop = asyncio.new_event_loop()
        self._frozen: set[int] = set()  # ids of connections frozen by a stall or a partition
        self._partitioned = False
        self._cut: set[int] = set()  # ids of connections a partition held, for as long as they are open
        self._answered: dict[int, asyncio.Event] = {}  # ... and whether the server has answered since
        self._open: set[int] = set()
        self._next_id = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Proxy:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @contextmanager
    def stall(self) -> Iterator[int]:
        """Inside the block every connection open when it began passes nothing; yields how many that is."""
        frozen = asyncio.run_coroutine_threadsafe(self._freeze(), self._loop).result(10)
        try:
            yield frozen
        finally:
            asyncio.run_coroutine_threadsafe(self._thaw(), self._loop).result(10)

    @contextmanager
    def partition(self) -> Iterator[int]:
        """Inside the block no connection, old or new, passes anything; yields how many were open."""
        frozen = asyncio.run_coroutine_threadsafe(self._freeze(partition=True), self._loop).result(10)
        try:
            yield frozen
        finally:
            asyncio.run_coroutine_threadsafe(self._thaw(), self._loop).result(10)

    async def _freeze(self, partition: bool = False) -> int:
        self._frozen = set(self._open)
        self._partitioned = partition
        if partition:
            self._cut |= self._frozen
            for conn in self._frozen:
                self._answered[conn].clear()  # an answer from before the partition answers nothing sent in it
        self.stalled_connections = len(self._frozen)
        return self.stalled_connections

    async def _thaw(self) -> None:
        self._frozen = set()
        self._partitioned = False

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self._next_id
        self._next_id += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self._open.add(conn)
        self._answered[conn] = asyncio.Event()
        if self._partitioned:
            self._frozen.add(conn)
            self._cut.add(conn)
        try:
            await asyncio.gather(self._pump(conn, reader, up_writer), self._pump(conn, up_reader, writer, answer=True))
        finally:
            self._open.discard(conn)
            self._cut.discard(conn)
            self._answered.pop(conn, None)
            for w in (writer, up_writer):
                w.close()

    async def _pump(
        self, conn: int, src: asyncio.StreamReader, dst: asyncio.StreamWriter, answer: bool = False
    ) -> None:
        try:
            while True:
                data = await src.read(65536)
                held = conn in self._frozen
                if answer and not held:
                    self._answered[conn].set()
                while conn in self._frozen:  # held, not dropped: a frozen link that comes back delivers it
                    await asyncio.sleep(0.2)
                if not data:
                    break
                dst.write(data)
                await dst.drain()
                if held and not answer and conn in self._cut and await self._await_answer(conn):
                    # what the client sent next (its close, a TLS close_notify) waited for the server's answer,
                    # as behind an L7 load balancer that carries a request out once it has all of it
                    self.late_answered += 1
        except (ConnectionError, OSError):
            pass
        finally:
            if not answer and conn in self._cut:
                await self._await_answer(conn)
            if dst.can_write_eof():
                with suppress(OSError):
                    dst.write_eof()

    async def _await_answer(self, conn: int) -> bool:
        """Whether the server answered within 5 s; once it has not, the connection waits no more."""
        answered = self._answered[conn]
        try:
            async with asyncio.timeout(5):
                await answered.wait()
            return True
        except TimeoutError:
            answered.set()
            return False
