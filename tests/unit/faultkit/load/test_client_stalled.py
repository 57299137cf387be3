"""A timeout the load client cannot vouch for is ``client_stalled``, never the node's.

When the client's own event loop is stalled, a request is sent late or its timer notices
the deadline late; the node may have answered in time (a loopback handshake takes
microseconds). The stall here is real: the test blocks the loop the request runs on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from faultkit.load import LoadProfile, Target
from faultkit.load.client import LATE_CLIENT_S, RequestRunner
from faultkit.load.connections import ConnectionPool
from faultkit.load.fakeserver import serve
from faultkit.load.ledger import Clock, Ledger
from faultkit.model.records import CLIENT_SIDE, ERROR_CLASSES, RequestRecord

FAST = {"first_token_timeout_s": 0.3, "total_timeout_s": 5.0, "connect_timeout_s": 0.3}
#: for a hanging connect: the connect deadline comes first
CONNECT = {"connect_timeout_s": 0.2, "first_token_timeout_s": 3.0}


@pytest.fixture
async def server() -> AsyncIterator[str]:
    runner, port = await serve()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture
def backlogged(full_backlog: int) -> str:
    """The URL of a port whose connects hang (``full_backlog``, tests/unit/conftest.py)."""
    return f"http://127.0.0.1:{full_backlog}"


async def _send(base_url: str, model: str, *, block_s: float = 0.0,
                sent_late_s: float = 0.0, **timeouts: float) -> RequestRecord:
    """One request; ``block_s``: block the loop that long, 50 ms after it was sent;
    ``sent_late_s``: the user arrived that long before it was sent."""
    profile = LoadProfile.from_dict({"concurrency": 1, "requests": 1, **FAST, **timeouts})
    pool = ConnectionPool(reuse=False)
    try:
        runner = RequestRunner(pool, Target("t", base_url, model), profile,
                               clock=Clock(), ledger=Ledger())
        if block_s:
            asyncio.get_running_loop().call_later(0.05, time.sleep, block_s)
        return await runner.run(0, "r0", t_scheduled=time.monotonic() - sent_late_s)
    finally:
        pool.close()


def test_the_class_is_client_side() -> None:
    assert "client_stalled" in ERROR_CLASSES
    assert "client_stalled" in CLIENT_SIDE


async def test_a_first_token_timeout_noticed_late_is_the_clients(server: str) -> None:
    record = await _send(server, "hang_first", block_s=LATE_CLIENT_S + 0.6)
    assert (record.status, record.error_class) == ("fail", "client_stalled")
    assert record.error_detail is not None
    assert "timeout_first_token" in record.error_detail and "late" in record.error_detail


async def test_the_same_timeout_on_time_is_the_nodes(server: str) -> None:
    record = await _send(server, "hang_first")
    assert (record.status, record.error_class) == ("fail", "timeout_first_token")


async def test_a_connect_timeout_noticed_late_is_the_clients(backlogged: str) -> None:
    record = await _send(backlogged, "ok", block_s=LATE_CLIENT_S + 0.6, **CONNECT)
    assert record.error_class == "client_stalled"
    assert record.error_detail is not None and "timeout_connect" in record.error_detail


async def test_a_connect_timeout_on_time_is_the_nodes(backlogged: str) -> None:
    record = await _send(backlogged, "ok", **CONNECT)
    assert record.error_class == "timeout_connect"


async def test_a_timeout_of_a_request_sent_late_is_the_clients(backlogged: str) -> None:
    record = await _send(backlogged, "ok", sent_late_s=LATE_CLIENT_S + 0.5, **CONNECT)
    assert record.error_class == "client_stalled"


async def test_a_stall_never_turns_an_answer_into_a_failure(server: str) -> None:
    record = await _send(server, "ok", block_s=LATE_CLIENT_S + 0.3)
    assert record.status == "ok"
