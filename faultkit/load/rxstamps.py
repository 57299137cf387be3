"""When bytes arrived, by the kernel's clock: TTFT that does not include the client's queue.

A Python client that stamps a token when its coroutine gets to it measures its own event
loop too: with 256 streams whose tokens arrive together, the last one is stamped after the
loop has parsed the other 255 (27 ms at p99 here, as large as the TTFT being measured).
The kernel stamps every packet as it arrives (``SO_TIMESTAMPNS``) and hands the stamp
over with the bytes (``recvmsg``), so this module reads the stamp there:

* :func:`stamp_arrivals` switches a new connection's transport (the load client's
  connector does it for each connection it opens, so that every read is noted) to
  :class:`_StampingTransport`, which reads with ``recvmsg`` and, after each read, notes
  ``(bytes of the response body received so far, kernel stamp)`` (:class:`ArrivalMarks`).
* :meth:`ArrivalMarks.split` cuts a chunk of the body, as the consumer reads it (it may
  hold several reads), at those marks: each piece comes with the arrival time of the read
  that carried it, and the stream parser dates the events it completes with that time.

For TCP the kernel reports the stamp of the newest packet a read consumed, so a piece is
dated by the arrival of its last byte, which is where an event completes. Only asyncio's
own selector transport for plain TCP is switched (the load client's connections); any
other transport (uvloop, TLS) keeps the consumer's clock, and :func:`stamp_arrivals`
returns None for it. docs/definitions.md, "Request timestamps", states the rule.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from asyncio import selector_events
from collections.abc import Iterator
from typing import Any

__all__ = ["ArrivalMarks", "arrival_marks", "stamp_arrivals"]

_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_SCM_TIMESTAMPNS = _SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)
_PLAIN_TRANSPORT: type[Any] = selector_events._SelectorSocketTransport  # type: ignore[attr-defined]


class ArrivalMarks:
    """``(body bytes received so far, arrival in epoch seconds)`` after each read of one
    response body, in order; the transport resets them when a new body begins."""

    __slots__ = ("body", "headers_at", "marks")

    def __init__(self) -> None:
        self.body: object | None = None
        #: arrival of the read that completed the response headers (began the body)
        self.headers_at: float | None = None
        self.marks: list[tuple[int, float]] = []

    def note(self, body: object, received: int, stamp: float) -> None:
        if body is not self.body:
            self.body = body
            self.headers_at = stamp
            self.marks = []
        self.marks.append((received, stamp))

    def split(
        self, body: object, chunk: bytes, start: int
    ) -> Iterator[tuple[bytes, float | None]]:
        """Cut ``chunk`` (body bytes ``start`` … ``start + len(chunk)``) where one read
        ended; yield each piece with its arrival (epoch s; None when no read noted it)."""
        end = start + len(chunk)
        if body is not self.body:
            yield chunk, None
            return
        pos = start
        for received, stamp in self.marks:
            if received <= pos:
                continue
            cut = min(received, end)
            yield chunk[pos - start : cut - start], stamp
            pos = cut
            if pos >= end:
                break
        if pos < end:
            yield chunk[pos - start :], None
        # marks wholly consumed are dropped, so a long stream keeps a short list
        marks = self.marks
        keep = 0
        while keep < len(marks) and marks[keep][0] <= end:
            keep += 1
        if keep:
            del marks[:keep]


class _StampingTransport(_PLAIN_TRANSPORT):  # type: ignore[misc]
    """asyncio's TCP transport, reading with ``recvmsg`` to keep the kernel's stamp."""

    arrivals: ArrivalMarks

    def _read_ready__data_received(self) -> None:
        if self._conn_lost:
            return
        try:
            data, ancillary, _flags, _addr = self._sock.recvmsg(self.max_size, _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, "Fatal read error on socket transport")
            return
        if not data:
            self._read_ready__on_eof()
            return
        stamp = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SCM_TIMESTAMPNS:
                seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
                stamp = seconds + nanoseconds * 1e-9
        try:
            self._protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")
            return
        body = getattr(self._protocol, "_payload", None)
        if body is not None:
            self.arrivals.note(body, body.total_bytes, time.time() if stamp is None else stamp)


def arrival_marks(transport: asyncio.BaseTransport | None) -> ArrivalMarks | None:
    """The marks of a transport :func:`stamp_arrivals` switched (None for any other)."""
    return transport.arrivals if isinstance(transport, _StampingTransport) else None


def stamp_arrivals(transport: asyncio.BaseTransport | None) -> ArrivalMarks | None:
    """Make ``transport`` note kernel arrival stamps; return its marks (None: not possible).

    Idempotent; only asyncio's plain selector TCP transport can be switched.
    """
    if isinstance(transport, _StampingTransport):
        return transport.arrivals
    if transport is None or type(transport) is not _PLAIN_TRANSPORT:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None or sock.type != socket.SOCK_STREAM:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    transport.__class__ = _StampingTransport
    marks = ArrivalMarks()
    stamping: Any = transport
    stamping.arrivals = marks
    # the read callback is bound at construction: point it at the stamping reader
    stamping._read_ready_cb = stamping._read_ready__data_received
    return marks
