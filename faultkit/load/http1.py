"""One HTTP/1.1 client connection: write a request, read its response as it arrives.

The load client's transport (docs/load-client.md says why it is our own and not a general
HTTP library: a request costs about a third of the CPU). It speaks only what an
OpenAI-compatible server answers a ``POST``: a status line, headers, and a body framed by
``Content-Length``, by ``Transfer-Encoding: chunked`` or by the end of the connection.
No redirects, no compression (the client never asks for it), no retries, no pipelining:
one request at a time per connection.

:class:`Http1Connection` is an :class:`asyncio.Protocol`. :meth:`Http1Connection.exchange`
writes the request bytes in one call and hands the response to a :class:`ResponseSink` as
it arrives — the head once, then every piece of the decoded body with the time it arrived
(the kernel's receive stamp of the read that carried it, :mod:`faultkit.load.rxstamps`;
None where the transport cannot give one). The returned future ends with whether the
connection may carry another request, or with one of the exceptions below:

=========================  =============================================================
:class:`ServerDisconnected`  the connection ended before a complete response head
:class:`PayloadIncomplete`   it ended inside the body (a ``Content-Length`` or chunked
                             body cut short)
:class:`BadResponse`         bytes that are not an HTTP/1.x response (the connection is
                             closed: nothing after them can be trusted)
=========================  =============================================================

All three are :class:`ConnectionError` subclasses: the load client records them as
``reset`` (``faultkit.load.classify``).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = [
    "BadResponse",
    "Http1Connection",
    "PayloadIncomplete",
    "ResponseSink",
    "ServerDisconnected",
]

#: A response head larger than this is not an OpenAI-compatible server's answer.
MAX_HEAD_BYTES = 65536

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _IDLE = range(8)


class ServerDisconnected(ConnectionError):
    """The connection ended before a complete response head."""


class PayloadIncomplete(ConnectionError):
    """The connection ended inside a response body."""


class BadResponse(ConnectionError):
    """The server's bytes are not an HTTP/1.x response."""


class ResponseSink(Protocol):
    """Receives one response (called from the event loop, in order)."""

    def on_head(self, status: int, headers: dict[str, str], at: float | None) -> None:
        """The status and headers (names lower-case); ``at``: the arrival (epoch s) of the
        read that completed them, None when unknown."""

    def on_body(self, data: bytes, at: float | None) -> None:
        """A piece of the decoded body (never empty) and the arrival of the read that
        carried its last byte."""


class Http1Connection(asyncio.Protocol):
    """A client connection carrying one request at a time (module docstring)."""

    __slots__ = (
        "_buffer",
        "_keep_alive",
        "_left",
        "_sink",
        "_state",
        "_waiter",
        "closed",
        "transport",
    )

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        #: the connection has ended (either side) and can carry nothing more
        self.closed = False
        self._state = _IDLE
        self._buffer = b""
        self._sink: ResponseSink | None = None
        self._waiter: asyncio.Future[bool] | None = None
        self._keep_alive = True
        #: body bytes still owed: of the Content-Length body, or of the current chunk
        self._left = 0

    # -- the caller's side ------------------------------------------------------------

    def exchange(self, request: bytes, sink: ResponseSink) -> asyncio.Future[bool]:
        """Write ``request`` (head and body, whole) and deliver its response to ``sink``.

        The future's result says whether the connection may carry another request (the
        response was complete and neither side asked to close). The caller closes the
        connection if it abandons the exchange (a deadline, a cancellation).
        """
        if self.transport is None or self.closed or self._state != _IDLE:
            raise RuntimeError("connection is not idle")
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self._sink = sink
        self._state = _HEAD
        self._buffer = b""
        self.transport.write(request)
        return waiter

    def close(self) -> None:
        """Close the connection now (any exchange in progress is abandoned)."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    # -- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data_received_at(data, None)

    def data_received_at(self, data: bytes, at: float | None) -> None:
        """``data`` read from the socket, with the kernel's arrival stamp when known."""
        if self._state == _IDLE:
            # bytes on an idle connection: nothing is owed, so nothing after them is sane
            self.close()
            return
        try:
            self._feed(data, at)
        except BadResponse as exc:
            self._fail(exc)
            self.close()
        self._settle()

    def eof_received(self) -> bool:
        if self._state == _UNTIL_CLOSE:
            self._finish(keep_alive=False)
            self._settle()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        state = self._state
        if state == _UNTIL_CLOSE:
            self._finish(keep_alive=False)
            self._settle()
        elif state == _HEAD:
            why = f": {exc}" if exc else ""
            self._fail(ServerDisconnected(f"server closed the connection before a response{why}"))
        elif state != _IDLE:
            why = f": {exc}" if exc else ""
            self._fail(PayloadIncomplete(f"connection ended inside the response body{why}"))

    # -- parsing ----------------------------------------------------------------------

    def _feed(self, data: bytes, at: float | None) -> None:
        buf = self._buffer + data if self._buffer else data
        self._buffer = b""
        pos = 0
        end = len(buf)
        sink = self._sink
        assert sink is not None
        while pos < end:
            state = self._state
            if state == _HEAD:
                cut = buf.find(b"\r\n\r\n", pos)
                if cut < 0:
                    if end - pos > MAX_HEAD_BYTES:
                        raise BadResponse("response head larger than 64 KiB")
                    self._buffer = buf[pos:]
                    return
                self._head(buf[pos:cut], at, sink)
                pos = cut + 4
            elif state in (_LENGTH, _CHUNK_DATA):
                take = min(self._left, end - pos)
                sink.on_body(buf[pos : pos + take], at)
                pos += take
                self._left -= take
                if self._left == 0:
                    if state == _LENGTH:
                        self._finish(self._keep_alive)
                    else:
                        self._state = _CHUNK_END
            elif state == _CHUNK_SIZE:
                cut = buf.find(b"\r\n", pos)
                if cut < 0:
                    if end - pos > 1024:
                        raise BadResponse("chunk size line longer than 1 KiB")
                    self._buffer = buf[pos:]
                    return
                size_text = buf[pos:cut].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise BadResponse(f"bad chunk size {size_text[:20]!r}") from None
                pos = cut + 2
                if size == 0:
                    self._state = _TRAILERS
                else:
                    self._left = size
                    self._state = _CHUNK_DATA
            elif state == _CHUNK_END:
                if end - pos < 2:
                    self._buffer = buf[pos:]
                    return
                if buf[pos : pos + 2] != b"\r\n":
                    raise BadResponse("chunk not followed by CRLF")
                pos += 2
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                cut = buf.find(b"\r\n", pos)
                if cut < 0:
                    self._buffer = buf[pos:]
                    return
                line_empty = cut == pos
                pos = cut + 2
                if line_empty:
                    self._finish(self._keep_alive)
            elif state == _UNTIL_CLOSE:
                sink.on_body(buf[pos:] if pos else buf, at)
                return
            else:  # _IDLE: bytes after a complete response
                self.close()
                return

    def _head(self, head: bytes, at: float | None, sink: ResponseSink) -> None:
        """Parse a response head; set the body's framing; tell the sink (1xx: skipped)."""
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise BadResponse(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
        status = int(parts[1])
        if 100 <= status < 200:
            return  # an interim answer: the real head follows
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise BadResponse(f"malformed header line: {line[:60]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        connection = headers.get("connection", "").lower()
        if parts[0] == b"HTTP/1.0":
            self._keep_alive = "keep-alive" in connection
        else:
            self._keep_alive = "close" not in connection
        sink.on_head(status, headers, at)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state = _CHUNK_SIZE
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise BadResponse("bad Content-Length") from None
            if length < 0:
                raise BadResponse("negative Content-Length")
            self._left = length
            self._state = _LENGTH
            if length == 0 or status in (204, 304):
                self._finish(self._keep_alive)
        elif status in (204, 304):
            self._finish(self._keep_alive)
        else:
            self._keep_alive = False
            self._state = _UNTIL_CLOSE

    def _finish(self, keep_alive: bool) -> None:
        """The response is complete; its waiter learns it when the read is done
        (:meth:`_settle`), so bytes after it in the same read count."""
        self._state = _IDLE
        self._sink = None
        self._keep_alive = keep_alive

    def _settle(self) -> None:
        if self._state != _IDLE:
            return
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(self._keep_alive and not self.closed)

    def _fail(self, exc: Exception) -> None:
        self._state = _IDLE
        self._sink = None
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
