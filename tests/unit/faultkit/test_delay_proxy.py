"""DelayProxy over real loopback sockets: answers are delayed, and ``pass_through`` ends the
delay for connections already open (a keep-alive connection must not stay delayed after a
revert). Delays are 1 s against a 0.5 s bound: wide enough for a noisy shared machine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from faultkit.proxy import DelayProxy

DELAY_S = 1.0


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[DelayProxy]:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    delay_proxy = DelayProxy(("127.0.0.1", port), DELAY_S)
    await delay_proxy.start()
    yield delay_proxy
    await delay_proxy.stop(drain_s=1)
    server.close()


async def _round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
    start = time.monotonic()
    writer.write(b"ping\n")
    await writer.drain()
    assert await asyncio.wait_for(reader.readline(), 10) == b"ping\n"
    return time.monotonic() - start


async def test_answers_are_delayed(proxy: DelayProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    assert await _round_trip(reader, writer) >= DELAY_S
    writer.close()
    assert proxy.connections == 1


async def test_pass_through_ends_the_delay_on_an_open_connection(proxy: DelayProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    assert await _round_trip(reader, writer) >= DELAY_S  # the same connection, delayed …
    proxy.pass_through()
    assert await _round_trip(reader, writer) < DELAY_S / 2  # … and no longer
    writer.close()


async def test_stop_cuts_a_lingering_connection_after_the_drain(proxy: DelayProxy) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    await _round_trip(reader, writer)
    await proxy.stop(drain_s=0.2)  # the idle keep-alive connection never ends by itself
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
