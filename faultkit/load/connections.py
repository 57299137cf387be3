"""Connection reuse that never costs a request: a pooled connection is proven open first.

HTTP/1.1 lets a client send its next request on the connection of the previous one, and
that is most of a load client's speed (docs/architecture.md, ``load/``). The hazard is a
server that closes a kept-alive connection without saying so: llama.cpp's server answers a
streamed request with ``Keep-Alive: timeout=5, max=100`` and then closes the connection.
A client that reuses it writes the next request into a socket the server has already
closed and records a ``reset`` the node never caused.

:class:`CheckedReuseConnector` keeps aiohttp's pool, with two rules on top:

1. **Reuse only a connection proven open.** Before a pooled connection is handed to a
   request, its socket is polled (no wait): an idle HTTP/1.1 connection has nothing to
   read, so *any* readiness — the server's FIN, a reset, stray bytes — means it is not
   reusable, and it is closed unused. Not one byte of the request has been written to it.
2. **A server that closes behind our back gets fresh connections from then on.** The first
   pooled connection found closed marks that server (host, port), and so does the first
   request to it that fails as ``reset`` before any byte of its response
   (:meth:`CheckedReuseConnector.stop_reusing`): every later connection to it is closed
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
   for the proof after its warm-up (:meth:`CheckedReuseConnector.prove`), so a run with a
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
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.connector import Connection

from faultkit.load.rxstamps import stamp_arrivals

__all__ = [
    "IDLE_REUSE_S",
    "PROOF_S",
    "UNPROVEN_POOL",
    "CheckedReuseConnector",
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


class CheckedReuseConnector(aiohttp.TCPConnector):
    """aiohttp's TCP connector with the two rules of this module's docstring; every new
    connection's reads are dated by the kernel (:mod:`faultkit.load.rxstamps`).

    ``reuse=False`` closes every connection after its response (one connection per
    request), as the fault experiments want (docs/definitions.md, "Connections").
    """

    def __init__(self, *, limit: int = 0, reuse: bool = True) -> None:
        super().__init__(
            limit=limit,
            force_close=not reuse,
            keepalive_timeout=IDLE_REUSE_S if reuse else None,
            enable_cleanup_closed=True,
        )
        self.stats = ReuseStats()
        #: (host, port) of the servers in ``stats.no_reuse``, for the per-release check
        self._no_reuse: set[tuple[str, int | None]] = set()
        #: (host, port) of the servers in ``stats.proven`` (rule 3)
        self._proven: set[tuple[str, int | None]] = set()

    def _oldest(self, key: Any) -> tuple[Any, float] | None:
        """The pool's oldest idle connection for ``key`` and how long it has been idle.

        aiohttp keeps ``(protocol, released at)`` pairs, oldest first; anything else
        (another aiohttp) reads as None, and then no server is ever proven: no reuse.
        """
        try:
            conns = self._conns.get(key)
            if not conns:
                return None
            protocol, released = conns[0]
            return protocol, time.monotonic() - float(released)
        except (TypeError, IndexError, KeyError, ValueError):
            return None

    def _try_prove(self, key: Any) -> bool:
        """Rule 3: prove the server of ``key`` by its oldest pooled connection, or find it
        closing; True once proven."""
        server = (key.host, key.port)
        if server in self._proven:
            return True
        oldest = self._oldest(key)
        if server in self._no_reuse or oldest is None:
            return False
        protocol, idle_s = oldest
        transport = protocol.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if not protocol.is_connected() or sock is None or peer_closed(sock.fileno()):
            # closed already, however young: the server closes behind our back (rule 2)
            self.stats.found_closed += 1
            self.stop_reusing(key.host, key.port)
            return False
        if idle_s < PROOF_S:
            return False
        self._proven.add(server)
        self.stats.proven = (*self.stats.proven, f"{key.host}:{key.port}")
        return True

    async def prove(self, host: str, port: int | None) -> bool:
        """Wait until the oldest pooled connection to ``host:port`` is :data:`PROOF_S`
        old and decide (rule 3); True if the server is proven. False at once when reuse
        is off, the server is marked, or nothing is pooled (no response yet)."""
        for key in list(self._conns):
            if (key.host, key.port) == (host, port):
                oldest = self._oldest(key)
                if oldest is not None and oldest[1] < PROOF_S:
                    await asyncio.sleep(PROOF_S - oldest[1])
                return self._try_prove(key)
        return (host, port) in self._proven

    async def _get(self, key: Any, traces: list[Any]) -> Connection | None:
        if (key.host, key.port) not in self._proven and not self._try_prove(key):
            return None  # rule 3: not proven yet, a fresh connection
        while True:
            conn = await super()._get(key, traces)
            if conn is None:
                return None
            transport = conn.transport
            sock = transport.get_extra_info("socket") if transport is not None else None
            if sock is not None and not peer_closed(sock.fileno()):
                self.stats.reused += 1
                return conn
            self.stats.found_closed += 1
            self.stop_reusing(key.host, key.port)
            conn.close()

    def stop_reusing(self, host: str, port: int | None) -> None:
        """Close every later connection to ``host:port`` after its response."""
        if (host, port) not in self._no_reuse:
            self._no_reuse.add((host, port))
            self.stats.no_reuse = (*self.stats.no_reuse, f"{host}:{port}")

    async def _create_connection(
        self, req: Any, traces: list[Any], timeout: Any  # noqa: ASYNC109 (aiohttp's signature)
    ) -> ResponseHandler:
        protocol = await super()._create_connection(req, traces, timeout)
        stamp_arrivals(protocol.transport)  # date every read by the kernel (rxstamps)
        return protocol

    def _release(
        self, key: Any, protocol: ResponseHandler, *, should_close: bool = False
    ) -> None:
        # every response passes here: no string work unless a server was marked
        server = (key.host, key.port)
        close = should_close or (bool(self._no_reuse) and server in self._no_reuse)
        if not close and server not in self._proven:
            pool = self._conns.get(key)  # rule 3: keep only the oldest few, to prove it by
            close = pool is not None and len(pool) >= UNPROVEN_POOL
        super()._release(key, protocol, should_close=close)
