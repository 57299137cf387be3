"""Kernel arrival stamps: a token is dated when its bytes arrived, not when the loop got to it.

The truth here is the fake server's own send stamp (``GET /stats``, taken just before it
writes the first content chunk), in another process: nothing the client computes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from faultkit.load import LoadGenerator, LoadProfile, Target
from faultkit.load.connections import ConnectionPool
from faultkit.load.fakeserver import serve_in_subprocess

#: the loop is blocked this long while the only token arrives (0.05 … 0.30 s; the token is
#: sent 0.1 s after the request). One token: a read that holds two tokens is dated by the
#: newer one (the kernel's rule for TCP, docs/definitions.md), which is not what this tests.
BLOCK_S = 0.25
#: the server stamps just before it writes; on a loaded 2-core machine its own scheduling
#: can put tens of ms between the two, so the bound separates "the block is not in the
#: figure" (≈ 0) from "it is" (≈ 150 ms), not microseconds
BOUND_S = 0.06


@pytest.fixture
def server() -> Iterator[str]:
    with serve_in_subprocess() as url:
        yield url


async def _first_token_error(url: str, pool: ConnectionPool | None) -> float:
    """Run one request whose first token (sent 0.1 s in) arrives while this loop is
    blocked; return the client's t_first_token minus the server's send stamp."""
    profile = LoadProfile(concurrency=1, requests=1, output_tokens=1, include_usage=False)
    gen = LoadGenerator(Target("t", url, "slow,delay=0.1"), profile, pool=pool)
    run = asyncio.create_task(gen.run())
    await asyncio.sleep(0.05)
    time.sleep(BLOCK_S)  # noqa: ASYNC251 - the point: the loop is busy when the token lands
    result = await run
    (record,) = result.records
    assert record.status == "ok", record
    async with httpx.AsyncClient() as client:
        sent = (await client.get(url + "/stats")).json()
    assert record.t_first_token is not None
    return record.t_first_token - float(sent[record.id])


async def test_first_token_is_dated_by_its_arrival_while_the_loop_was_blocked(
    server: str,
) -> None:
    error = await _first_token_error(server, None)
    assert -0.002 < error < BOUND_S, f"first token dated {error * 1000:.1f} ms after it was sent"


async def test_without_kernel_stamps_the_blocked_loop_shows_in_the_first_token(
    server: str,
) -> None:
    """The same run with the kernel's stamps off (the consumer's clock): the error the
    stamps remove is real, so the test above can fail."""
    plain = ConnectionPool(kernel_stamps=False)
    try:
        error = await _first_token_error(server, plain)
    finally:
        plain.close()
    assert error > BOUND_S, f"only {error * 1000:.1f} ms: the loop block did not show"
