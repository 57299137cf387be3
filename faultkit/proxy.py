"""A small asyncio TCP proxy that delays bytes: latency without ``sch_netem``.

:class:`DelayProxy` listens on ``127.0.0.1:<ephemeral>`` and forwards each connection to
``upstream``. Bytes from the upstream (the node's answers) are held for
``delay_s + uniform(-jitter_s, +jitter_s)`` (never below 0) before being written to the
client, in order; bytes from the client go through at once. That is the same one-way delay
``tc netem delay`` on the container's egress gives: time to first byte grows by ``delay_s``.
Times are monotonic.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time


class DelayProxy:
    """Run with ``await start()`` / ``await stop()``; ``port`` is known after start."""

    def __init__(self, upstream: tuple[str, int], delay_s: float, jitter_s: float = 0.0,
                 *, seed: int | None = None, mark: int | None = None) -> None:
        self.upstream = upstream
        #: ``SO_MARK`` of the upstream connections (needs CAP_NET_ADMIN): lets a REDIRECT of
        #: the upstream's own address skip the proxy's connections
        self.mark = mark
        self.delay_s = delay_s
        self.jitter_s = jitter_s
        self.port = 0
        self.connections = 0
        self._rng = random.Random(seed)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self, drain_s: float = 10.0) -> None:
        """Stop accepting, let open connections finish for up to ``drain_s``, then cut them.

        Cutting a connection mid-answer would turn the revert itself into a fault (the
        client sees a reset), so in-flight requests get to complete first.
        """
        if self._server is not None:
            self._server.close()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=drain_s)
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def pass_through(self) -> None:
        """Stop delaying: bytes read from now on are forwarded at once (queued ones keep
        their due time, at most one delay away). A revert calls this first, so the fault
        ends for every connection at once, including keep-alive ones still open through
        the proxy."""
        self.delay_s = 0.0
        self.jitter_s = 0.0

    def _delay(self) -> float:
        jitter = self._rng.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0
        return max(0.0, self.delay_s + jitter)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await self._connect()
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer, delayed=False),
                self._pipe(up_reader, writer, delayed=True),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() cancels open connections; ending normally keeps asyncio's stream
            # callback from logging the cancellation as an error
            pass
        finally:
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.mark is None:
            return await asyncio.open_connection(*self.upstream)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, self.mark)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, self.upstream)
        except BaseException:
            sock.close()
            raise
        return await asyncio.open_connection(sock=sock)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *,
                    delayed: bool) -> None:
        if not delayed:
            while chunk := await src.read(65536):
                dst.write(chunk)
                await dst.drain()
            with contextlib.suppress(OSError):
                dst.write_eof()
            return
        # delayed direction: a reader stamps chunks, a writer releases each at its due time
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def release() -> None:
            last_due = 0.0
            while True:
                due, chunk = await queue.get()
                due = max(due, last_due)  # keep order even with jitter
                last_due = due
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not chunk:
                    with contextlib.suppress(OSError):
                        dst.write_eof()
                    return
                dst.write(chunk)
                await dst.drain()

        releaser = asyncio.ensure_future(release())
        try:
            while True:
                chunk = await src.read(65536)
                queue.put_nowait((time.monotonic() + self._delay(), chunk))
                if not chunk:
                    break
            await releaser
        finally:
            releaser.cancel()
