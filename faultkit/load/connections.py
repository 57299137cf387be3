"""Connection reuse that never costs a request: a pooled connection is proven open first.

HTTP/1.1 lets a client send its next request on the connection of the previous one, and
that is most of a load client's speed (docs/architecture.md, ``load/``). The hazard is a
server that closes a kept-alive connection without saying so: llama.cpp's server answers a
streamed request with ``Keep-Alive: timeout=5, max=100`` and then closes the connection.
A client that reuses it writes the next request into a socket the server has already
closed and records a ``reset`` the node never caused.

:class:`ConnectionPool` keeps the load client's connections
(:class:`faultkit.load.http1.Http1Connection`, one per request in flight) and reuses
them by three rules:

1. **Reuse only a connection proven open.** Before a pooled connection is handed to a
   request, its socket is polled (no wait): an idle HTTP/1.1 connection has nothing to
   read, so *any* readiness — the server's FIN, a reset, stray bytes — means it is not
   reusable, and it is closed unused. Not one byte of the request has been written to it.
2. **A server that closes behind our back gets fresh connections from then on.** The first
   pooled connection found closed marks that server (host, port), and so does the first
   request to it that fails as ``reset`` before any byte of its response
   (:meth:`ConnectionPool.stop_reusing`): every later connection to it is closed
   after its response, as without reuse. A server's idle timeout cannot mark it: the pool
   drops a connection itself after :data:`IDLE_REUSE_S` unused, well under the idle
   timeouts of uvicorn (5 s: vLLM, SGLang), llama.cpp (5 s) and nginx (75 s).

3. **A server proves it keeps connections before any is reused.** A poll right after a
   response proves little: a server closes *after* its last byte, by as long as its own
   event loop takes to get there — milliseconds on a busy machine — while this client
   polls microseconds after that byte. Reusing then writes into a closing socket, and
   every stream in flight can hit that window before the first failure marks the server
   (measured against the fake server closing after each stream while the machine was
   busy: 2–7 of 8 streams' second requests reset). So a server is *proven* only when one
   of its connections has stayed open :data:`PROOF_S` after its response: until then no
   connection to it is reused (each request gets a fresh one, and the pool keeps only the
   :data:`UNPROVEN_POOL` oldest, to be looked at at each request), and a server whose FIN
   follows its response by less than :data:`PROOF_S` is found closing and marked (rule 2)
   before any request risks it — as soon as the FIN is there. ``LoadGenerator`` waits
   for the proof after its warm-up (:meth:`ConnectionPool.prove`), so a run with a
   warm-up reuses from its first request; without one, from ``PROOF_S`` in.

A connection a proven server closes just as it is reused (a server that keeps connections
for a while, then closes one at that moment) remains possible; such a request fails as
``reset`` like any other and is never retried, so the ledger never hides a failure — and
the server gets no reuse from then on.
``bench/load_client.py`` measures both the speed and the false failures against a server
that closes after every stream (``close_after`` in :mod:`faultkit.load.fakeserver`) and
against llama.cpp's own server.
"""

from __future__ import annotations

import asyncio
import select
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultkit.load.dialer import Dialer, Server
from faultkit.load.http1 import Http1Connection

__all__ = [
    "IDLE_REUSE_S",
    "PROOF_S",
    "UNPROVEN_POOL",
    "ConnectionPool",
    "ReuseStats",
    "peer_closed",
]

#: A pooled connection unused for this long is closed by the client, not reused.
IDLE_REUSE_S = 2.0
#: A server is proven (rule 3) by a connection still open this long after its response.
PROOF_S = 0.25
#: Before its proof, the pool keeps at most this many connections to a server.
UNPROVEN_POOL = 8

_ANY_INPUT = select.POLLIN | select.POLLPRI | select.POLLRDHUP


def peer_closed(fd: int) -> bool:
    """True when an idle HTTP/1.1 connection on socket ``fd`` can no longer be reused.

    Polls without waiting. Nothing is pending on a healthy idle connection, so any event —
    end of stream (the server's FIN), a reset, an error, unexpected bytes — means no.
    """
    poller = select.poll()
    poller.register(fd, _ANY_INPUT)
    return bool(poller.poll(0))


@dataclass(slots=True)
class ReuseStats:
    """What the pool did with connections over one run (reported by the load summary)."""

    #: requests sent on a pooled connection that was proven open
    reused: int = 0
    #: pooled connections found closed by the server and discarded before any use
    found_closed: int = 0
    #: servers (``host:port``) that close kept-alive connections: no reuse for them since
    no_reuse: tuple[str, ...] = ()
    #: servers proven to keep idle connections open (rule 3): reuse allowed
    proven: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "reused": self.reused,
            "found_closed": self.found_closed,
            "no_reuse": list(self.no_reuse),
            "proven": list(self.proven),
        }


class ConnectionPool:
    """The load client's connections, reused by the rules of this module's docstring.

    ``reuse=False`` closes every connection after its response (one connection per
    request), as the fault experiments want (docs/definitions.md, "Connections").
    ``limit`` caps the connections in use at once (0: no cap); a request over it waits,
    and ``acquire``'s ``on_wait`` tells its caller so (the wait is the client's doing).
    ``checked=False`` drops rules 1–3 (plain reuse, as most clients do) and
    ``kernel_stamps=False`` dates reads by the consumer's clock: both exist to show what
    the checks and stamps prevent (tests, ``bench/``). ``local_addr`` binds the client end.
    New connections come from a :class:`~faultkit.load.dialer.Dialer`.
    """

    def __init__(
        self,
        *,
        reuse: bool = True,
        limit: int = 0,
        checked: bool = True,
        kernel_stamps: bool = True,
        local_addr: tuple[str, int] | None = None,
    ) -> None:
        self.reuse = reuse
        self.limit = limit
        self.stats = ReuseStats()
        self._checked = checked
        self._dialer = Dialer(kernel_stamps=kernel_stamps, local_addr=local_addr)
        #: idle connections per server with the time each was released, oldest first
        self._idle: dict[Server, deque[tuple[Http1Connection, float]]] = {}
        self._in_use: set[Http1Connection] = set()
        #: connections in use or being opened (what ``limit`` caps)
        self._busy = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._no_reuse: set[Server] = set()
        self._proven: set[Server] = set()
        self._closed = False

    # -- acquire and release ------------------------------------------------------------

    async def acquire(
        self,
        server: Server,
        connect_timeout_s: float,
        on_wait: Callable[[bool], None] | None = None,
    ) -> Http1Connection:
        """A connection to ``server`` for one request: a pooled one proven open, else new.

        Raises :class:`~faultkit.load.dialer.ConnectError` /
        :class:`~faultkit.load.dialer.ConnectTimeout` for a new connection that
        cannot be made. With a ``limit``, waits for a free slot first, calling
        ``on_wait(True)`` before and ``on_wait(False)`` after the wait.
        """
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        if self.limit and self._busy >= self.limit:
            await self._wait_for_slot(on_wait)
        self._busy += 1
        conn = self._pooled(server)
        if conn is None:
            try:
                conn = await self._dialer.connect(server, connect_timeout_s)
            except BaseException:
                self._busy -= 1
                self._wake_one()  # the slot this request took is free again
                raise
        else:
            self.stats.reused += 1
        self._in_use.add(conn)
        return conn

    def release(self, server: Server, conn: Http1Connection, *, reusable: bool) -> None:
        """Give ``conn`` back after its exchange; ``reusable``: the response was complete
        and neither side asked to close. Anything else closes it."""
        if conn in self._in_use:
            self._in_use.discard(conn)
            self._busy -= 1
        keep = reusable and self.reuse and not conn.closed and not self._closed
        if keep and self._checked:
            if server in self._no_reuse:
                keep = False
            elif server not in self._proven:
                # rule 3: keep only the oldest few, to prove the server by
                idle = self._idle.get(server)
                keep = idle is None or len(idle) < UNPROVEN_POOL
        if keep:
            self._idle.setdefault(server, deque()).append((conn, time.monotonic()))
        else:
            conn.close()
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _wait_for_slot(self, on_wait: Callable[[bool], None] | None) -> None:
        loop = asyncio.get_running_loop()
        if on_wait is not None:
            on_wait(True)  # stays set if the wait is cancelled: the caller's deadline
        while self.limit and self._busy >= self.limit:
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done():
                    waiter.cancel()
        if on_wait is not None:
            on_wait(False)

    def _pooled(self, server: Server) -> Http1Connection | None:
        """An idle connection to reuse now (rules 1–3), or None for a fresh one."""
        if not self.reuse:
            return None
        idle = self._idle.get(server)
        if not idle:
            return None
        now = time.monotonic()
        while idle and now - idle[0][1] >= IDLE_REUSE_S:
            idle.popleft()[0].close()  # unused too long: ours to close, says nothing
        if not self._checked:
            while idle:
                conn = idle.pop()[0]
                if not conn.closed:
                    return conn
            return None
        if server not in self._proven and not self._try_prove(server):
            return None  # rule 3: not proven yet, a fresh connection
        while idle:
            conn = idle.pop()[0]
            if not _closed_by_peer(conn):
                return conn
            self.stats.found_closed += 1
            self.stop_reusing(server)
            conn.close()
        return None

    def _try_prove(self, server: Server) -> bool:
        """Rule 3: prove ``server`` by its oldest pooled connection, or find it closing;
        True once proven."""
        if server in self._proven:
            return True
        idle = self._idle.get(server)
        if server in self._no_reuse or not idle:
            return False
        conn, released = idle[0]
        if _closed_by_peer(conn):
            # closed already, however young: the server closes behind our back (rule 2)
            self.stats.found_closed += 1
            self.stop_reusing(server)
            idle.popleft()
            conn.close()
            return False
        if time.monotonic() - released < PROOF_S:
            return False
        self._proven.add(server)
        self.stats.proven = (*self.stats.proven, str(server))
        return True

    async def prove(self, server: Server) -> bool:
        """Wait until the oldest pooled connection to ``server`` is :data:`PROOF_S` old and
        decide (rule 3); True if the server is proven. False at once when reuse is off,
        the server is marked, or nothing is pooled (no response yet)."""
        if not self.reuse or not self._checked:
            return False
        idle = self._idle.get(server)
        if idle:
            age = time.monotonic() - idle[0][1]
            if age < PROOF_S:
                await asyncio.sleep(PROOF_S - age)
        return self._try_prove(server)

    def stop_reusing(self, server: Server) -> None:
        """Close every later connection to ``server`` after its response (rule 2)."""
        if server not in self._no_reuse:
            self._no_reuse.add(server)
            self.stats.no_reuse = (*self.stats.no_reuse, str(server))

    # -- closing ----------------------------------------------------------------------

    def close(self) -> None:
        """Close every connection, idle or in use; the pool takes no more requests."""
        self._closed = True
        for idle in self._idle.values():
            for conn, _ in idle:
                conn.close()
        self._idle.clear()
        for conn in self._in_use:
            conn.close()
        self._in_use.clear()
        self._busy = 0
        for waiter in self._waiters:
            if not waiter.done():
                waiter.cancel()


def _closed_by_peer(conn: Http1Connection) -> bool:
    """Rule 1's poll: the connection ended, or its socket has anything to read."""
    transport = conn.transport
    if conn.closed or transport is None or transport.is_closing():
        return True
    sock = transport.get_extra_info("socket")
    return sock is None or peer_closed(sock.fileno())
