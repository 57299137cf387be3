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

A connection the server closes *after* the poll and before it reads the request remains
possible (a window of microseconds on loopback against llama.cpp, whose FIN follows the
last chunk at once); such a request fails as ``reset`` like any other and is never
retried, so the ledger never hides a failure — and the server gets no reuse from then on,
so it can happen at most once per server and run.
``bench/load_client.py`` measures both the speed and the false failures against a server
that closes after every stream (``close_after`` in :mod:`faultkit.load.fakeserver`) and
against llama.cpp's own server.
"""

from __future__ import annotations

import select
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.connector import Connection

from faultkit.load.rxstamps import stamp_arrivals

__all__ = ["IDLE_REUSE_S", "CheckedReuseConnector", "ReuseStats", "peer_closed"]

#: A pooled connection unused for this long is closed by the client, not reused.
IDLE_REUSE_S = 2.0

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

    def to_json(self) -> dict[str, Any]:
        return {
            "reused": self.reused,
            "found_closed": self.found_closed,
            "no_reuse": list(self.no_reuse),
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

    async def _get(self, key: Any, traces: list[Any]) -> Connection | None:
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
        closes_behind_our_back = bool(self._no_reuse) and (key.host, key.port) in self._no_reuse
        super()._release(key, protocol, should_close=should_close or closes_behind_our_back)
