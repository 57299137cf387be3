"""The load client's HTTP/1.1 response reader, fed bytes the way a socket may cut them.

The expected body is the one the test encoded; the reader never sees it whole. The live
paths (a real server, real sockets, every error class) are in ``test_load_client.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultkit.load.http1 import (
    BadResponse,
    Http1Connection,
    PayloadIncomplete,
    ServerDisconnected,
)


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


class _Sink:
    def __init__(self) -> None:
        self.heads: list[tuple[int, dict[str, str], float | None]] = []
        self.body = b""
        self.stamps: list[float | None] = []

    def on_head(self, status: int, headers: dict[str, str], at: float | None) -> None:
        self.heads.append((status, headers, at))

    def on_body(self, data: bytes, at: float | None) -> None:
        assert data, "an empty piece"
        self.body += data
        self.stamps.append(at)


def _connection() -> tuple[Http1Connection, _Transport]:
    conn = Http1Connection()
    transport = _Transport()
    conn.connection_made(transport)
    return conn, transport


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    out, pos = b"", 0
    for size in sizes:
        part = body[pos : pos + size]
        if not part:
            break
        out += b"%x;ext=1\r\n%s\r\n" % (len(part), part)
        pos += len(part)
    if pos < len(body):
        out += b"%x\r\n%s\r\n" % (len(body) - pos, body[pos:])
    return out + b"0\r\nX-Trailer: t\r\n\r\n"


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(min_size=0, max_size=300),
    sizes=st.lists(st.integers(1, 64), max_size=8),
    points=st.lists(st.integers(0, 2000), max_size=12),
    chunked=st.booleans(),
)
async def test_any_cutting_of_a_response_gives_the_same_head_and_body(
    body: bytes, sizes: list[int], points: list[int], chunked: bool
) -> None:
    if chunked:
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Served-By: a\r\n\r\n"
        wire = head + _chunked(body, sizes)
    else:
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Served-By: a\r\n\r\n" % len(body)
        wire = head + body
    conn, transport = _connection()
    sink = _Sink()
    done = conn.exchange(b"POST / HTTP/1.1\r\n\r\n", sink)
    assert transport.written == b"POST / HTTP/1.1\r\n\r\n"
    for i, piece in enumerate(_cuts(wire, points)):
        assert not done.done()
        conn.data_received_at(piece, float(i))
    assert done.done() and done.result() is True
    assert [(s, h) for s, h, _ in sink.heads] == [
        (200, {"transfer-encoding" if chunked else "content-length":
               "chunked" if chunked else str(len(body)), "x-served-by": "a"})
    ]
    assert sink.body == body
    stamps = cast(list[float], sink.stamps)  # every piece was fed with its time, float(i)
    assert stamps == sorted(stamps)  # each piece dated by the read that carried it
    assert not transport.closed


async def test_a_piece_is_dated_by_the_read_that_completed_it() -> None:
    conn, _ = _connection()
    sink = _Sink()
    conn.exchange(b"x", sink)
    conn.data_received_at(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nab", 10.0)
    conn.data_received_at(b"cdef", 11.0)
    assert sink.heads[0][2] == 10.0
    assert list(zip([b"ab", b"cdef"], sink.stamps, strict=True)) == [(b"ab", 10.0), (b"cdef", 11.0)]


@pytest.mark.parametrize(
    ("head", "reusable"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
        (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 204 No Content\r\n\r\n", True),
    ],
)
async def test_whether_the_connection_may_carry_another_request(
    head: bytes, reusable: bool
) -> None:
    conn, _ = _connection()
    done = conn.exchange(b"x", _Sink())
    conn.data_received_at(head, None)
    assert done.result() is reusable


async def test_interim_answers_are_skipped() -> None:
    conn, _ = _connection()
    sink = _Sink()
    done = conn.exchange(b"x", sink)
    conn.data_received_at(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\n", None)
    conn.data_received_at(b"Content-Length: 2\r\n\r\nno", None)
    assert [s for s, _, _ in sink.heads] == [503]
    assert sink.body == b"no" and done.result() is True


async def test_a_body_without_length_ends_with_the_connection() -> None:
    conn, _ = _connection()
    sink = _Sink()
    done = conn.exchange(b"x", sink)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
    conn.data_received_at(head + b"data: 1", None)
    conn.data_received_at(b"\n\n", None)
    assert not done.done()
    assert conn.eof_received() is False
    conn.connection_lost(None)
    assert done.result() is False
    assert sink.body == b"data: 1\n\n"


@pytest.mark.parametrize(
    ("received", "error"),
    [
        (b"", ServerDisconnected),
        (b"HTTP/1.1 200 OK\r\nContent-Le", ServerDisconnected),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", PayloadIncomplete),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", PayloadIncomplete),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n", PayloadIncomplete),
    ],
)
async def test_a_connection_that_ends_early_fails_the_exchange(
    received: bytes, error: type[Exception]
) -> None:
    conn, _ = _connection()
    done = conn.exchange(b"x", _Sink())
    if received:
        conn.data_received_at(received, None)
    conn.connection_lost(ConnectionResetError(104, "Connection reset by peer"))
    with pytest.raises(error):
        done.result()
    assert issubclass(error, ConnectionError)  # recorded as ``reset`` by the client
    assert conn.closed


@pytest.mark.parametrize(
    "received",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 OK 200\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000,
    ],
)
async def test_bytes_that_are_not_a_response_fail_it_and_close_the_connection(
    received: bytes,
) -> None:
    conn, transport = _connection()
    done = conn.exchange(b"x", _Sink())
    conn.data_received_at(received, None)
    with pytest.raises(BadResponse):
        done.result()
    assert transport.closed and conn.closed


async def test_bytes_on_an_idle_connection_close_it() -> None:
    conn, transport = _connection()
    done = conn.exchange(b"x", _Sink())
    conn.data_received_at(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", None)
    assert done.result() is True and not transport.closed
    conn.data_received_at(b"HTTP/1.1 408 Request Timeout\r\n\r\n", None)
    assert transport.closed and conn.closed
    with pytest.raises(RuntimeError, match="not idle"):
        conn.exchange(b"x", _Sink())


async def test_bytes_after_a_complete_response_close_the_connection() -> None:
    conn, transport = _connection()
    done = conn.exchange(b"x", _Sink())
    conn.data_received_at(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naEXTRA", None)
    assert done.result() is False
    assert transport.closed
