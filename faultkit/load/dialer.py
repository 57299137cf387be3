"""Opening the load client's connections: addresses, TLS, kernel stamps, connect errors.

:class:`Dialer` opens one :class:`~faultkit.load.http1.Http1Connection` to a
:class:`Server` within a timeout. A host name is resolved once per dialer, and its
addresses are tried in turn (a name like ``localhost`` may resolve to ``::1`` before the
``127.0.0.1`` the server listens on); the address that took the connection is tried first
from then on. Every plain TCP connection reads with the kernel's receive stamps
(:mod:`faultkit.load.rxstamps`). Failures are :class:`ConnectError` (the OS said no: the
first address's reason) or :class:`ConnectTimeout`; ``faultkit.load.classify`` maps them
to error classes. Whether a connection is reused is the pool's business
(:mod:`faultkit.load.connections`), not this module's.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from faultkit.load.http1 import Http1Connection
from faultkit.load.rxstamps import stamp_arrivals

__all__ = ["ConnectError", "ConnectTimeout", "Dialer", "Server"]


@dataclass(frozen=True, slots=True)
class Server:
    """Where connections go: ``host:port``, over TLS or not."""

    host: str
    port: int
    tls: bool = False

    @classmethod
    def of_url(cls, url: str) -> Server:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        tls = parts.scheme == "https"
        return cls(parts.hostname, parts.port or (443 if tls else 80), tls)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class ConnectError(OSError):
    """The TCP (or TLS) connection to ``server`` could not be made; ``os_error`` says why."""

    def __init__(self, server: Server, os_error: OSError) -> None:
        super().__init__(os_error.errno, f"cannot connect to {server}: {os_error}")
        self.server = server
        self.os_error = os_error


class ConnectTimeout(Exception):
    """No connection to ``server`` within the connect timeout."""

    def __init__(self, server: Server, timeout_s: float) -> None:
        super().__init__(f"connect to {server} timed out after {timeout_s:g} s")
        self.server = server


class Dialer:
    """Opens connections (module docstring). ``kernel_stamps=False`` leaves reads to the
    consumer's clock (to show what the stamps prevent); ``local_addr`` binds the client end."""

    def __init__(
        self, *, kernel_stamps: bool = True, local_addr: tuple[str, int] | None = None
    ) -> None:
        self._stamps = kernel_stamps
        self._local_addr = local_addr
        #: each host's addresses, the one that last took a connection first
        self.addresses: dict[str, list[str]] = {}
        self._tls: ssl.SSLContext | None = None

    async def connect(self, server: Server, timeout_s: float) -> Http1Connection:
        """A new connection to ``server`` within ``timeout_s``."""
        try:
            async with asyncio.timeout(timeout_s):
                conn = await self._open(server)
        except TimeoutError:
            raise ConnectTimeout(server, timeout_s) from None
        except OSError as exc:
            raise ConnectError(server, exc) from exc
        if self._stamps:
            stamp_arrivals(conn.transport)  # date every read by the kernel (rxstamps)
        return conn

    async def _open(self, server: Server) -> Http1Connection:
        loop = asyncio.get_running_loop()
        addresses = await self._resolve(server.host)
        tls = self._tls_context() if server.tls else None
        error: OSError | None = None
        for address in list(addresses):
            try:
                _, conn = await loop.create_connection(
                    Http1Connection,
                    address,
                    server.port,
                    ssl=tls,
                    server_hostname=server.host if tls else None,
                    local_addr=self._local_addr,
                )
            except OSError as exc:
                error = error or exc  # the first address's reason is the one to report
                continue
            if address != addresses[0]:
                addresses.remove(address)
                addresses.insert(0, address)
            return conn
        assert error is not None
        raise error

    async def _resolve(self, host: str) -> list[str]:
        """``host``'s addresses, resolved once (an IP literal is its own)."""
        addresses = self.addresses.get(host)
        if addresses is None:
            loop = asyncio.get_running_loop()
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
            if not addresses:
                raise OSError(f"no address for {host}")
            self.addresses[host] = addresses
        return addresses

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls
