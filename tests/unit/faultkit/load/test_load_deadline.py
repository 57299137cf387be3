"""``StreamDeadline``: the first-token deadline, then the total one, on one timer.

The same outcomes as ``asyncio.timeout_at(first)`` rescheduled to ``total`` at the first
token (what the client did before): no token by ``first`` is a timeout; a token keeps the
request alive until ``total``; a cancellation from elsewhere stays a cancellation.
"""

from __future__ import annotations

import asyncio

import pytest

from faultkit.load.deadline import StreamDeadline


async def test_no_first_token_times_out_at_the_first_deadline() -> None:
    loop = asyncio.get_running_loop()
    now = loop.time()
    with pytest.raises(TimeoutError):
        async with StreamDeadline(now + 0.01, now + 60) as cm:
            await asyncio.sleep(30)
    assert cm.expired


async def test_a_first_token_extends_the_block_to_the_total_deadline() -> None:
    loop = asyncio.get_running_loop()
    now = loop.time()
    done = False
    async with StreamDeadline(now + 0.01, now + 60) as cm:
        cm.first_token()
        await asyncio.sleep(0.05)  # past the first deadline, long before the total one
        done = True
    assert done and not cm.expired


async def _token_then_wait(cm: StreamDeadline) -> None:
    async with cm:
        cm.first_token()
        await asyncio.sleep(30)


async def test_the_total_deadline_still_applies_after_the_first_token() -> None:
    now = asyncio.get_running_loop().time()
    cm = StreamDeadline(now + 0.01, now + 0.03)
    with pytest.raises(TimeoutError):
        await _token_then_wait(cm)
    assert cm.expired


async def test_one_deadline_when_first_equals_total() -> None:
    now = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError):  # a first token: no later deadline to move to
        await _token_then_wait(StreamDeadline(now + 0.01, now + 0.01))


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    loop = asyncio.get_running_loop()
    now = loop.time()
    entered = asyncio.Event()

    async def block() -> None:
        async with StreamDeadline(now + 60, now + 120):
            entered.set()
            await asyncio.sleep(30)

    task = asyncio.ensure_future(block())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_block_that_ends_in_time_leaves_no_timer_behind() -> None:
    loop = asyncio.get_running_loop()
    now = loop.time()
    async with StreamDeadline(now + 0.01, now + 0.02):
        pass
    await asyncio.sleep(0.04)  # a timer left armed would cancel this task now
