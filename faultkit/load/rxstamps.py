"""When bytes arrived, by the kernel's clock: TTFT that does not include the client's queue.

A Python client that stamps a token when its coroutine gets to it measures its own event
loop too: with 256 streams whose tokens arrive together, the last one is stamped after the
loop has parsed the other 255 (27 ms at p99 here, as large as the TTFT being measured).
The kernel stamps every packet as it arrives (``SO_TIMESTAMPNS``) and hands the stamp
over with the bytes (``recvmsg``), so this module reads the stamp there:
:func:`stamp_arrivals` switches a new connection's transport (the load client's pool does
it for each connection it opens) to :class:`_StampingTransport`, which reads with
``recvmsg`` and gives every read to its protocol's ``data_received_at(data, stamp)``
(:class:`faultkit.load.http1.Http1Connection`), which dates each piece of the body it
decodes from that read by the read's stamp.

For TCP the kernel reports the stamp of the newest packet a read consumed, so a piece is
dated by the arrival of its last byte, which is where an event completes. Only asyncio's
own selector transport for plain TCP is switched (the load client's connections); any
other transport (uvloop, TLS) calls ``data_received`` and the consumer's clock dates the
bytes; :func:`stamp_arrivals` returns False for it. docs/definitions.md, "Request
timestamps", states the rule.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from asyncio import selector_events
from typing import Any

__all__ = ["stamp_arrivals"]

_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_SCM_TIMESTAMPNS = _SO_TIMESTAMPNS
_TIMESPEC = struct.Struct("@qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size)
_PLAIN_TRANSPORT: type[Any] = selector_events._SelectorSocketTransport  # type: ignore[attr-defined]


class _StampingTransport(_PLAIN_TRANSPORT):  # type: ignore[misc]
    """asyncio's TCP transport, reading with ``recvmsg`` to keep the kernel's stamp."""

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
            self._protocol.data_received_at(data, stamp)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            self._fatal_error(exc, "Fatal error: protocol.data_received_at() call failed.")


def stamp_arrivals(transport: asyncio.BaseTransport | None) -> bool:
    """Make ``transport`` read with kernel arrival stamps; True when it does.

    Its protocol must have ``data_received_at(data, stamp)``. Idempotent; only asyncio's
    plain selector TCP transport can be switched.
    """
    if isinstance(transport, _StampingTransport):
        return True
    if transport is None or type(transport) is not _PLAIN_TRANSPORT:
        return False
    if not hasattr(transport.get_protocol(), "data_received_at"):
        return False
    sock = transport.get_extra_info("socket")
    if sock is None or sock.type != socket.SOCK_STREAM:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    transport.__class__ = _StampingTransport
    stamping: Any = transport
    # the read callback is bound at construction: point it at the stamping reader
    stamping._read_ready_cb = stamping._read_ready__data_received
    return True
