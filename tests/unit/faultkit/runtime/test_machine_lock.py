"""Machine locks make experiments that load the whole machine take turns, across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultkit.runtime.machinelock import machine_lock


async def test_a_second_holder_waits_until_the_first_lets_go(tmp_path: Path) -> None:
    order: list[str] = []

    async def first() -> None:
        async with machine_lock("flood", directory=tmp_path) as waited:
            assert waited < 0.2
            order.append("first in")
            await asyncio.sleep(0.5)
            order.append("first out")

    async def second() -> float:
        await asyncio.sleep(0.1)
        async with machine_lock("flood", directory=tmp_path) as waited:
            order.append("second in")
            return waited

    _, waited = await asyncio.gather(first(), second())
    assert order == ["first in", "first out", "second in"]
    assert waited >= 0.3


@pytest.fixture
def held_elsewhere(tmp_path: Path) -> Iterator[Path]:
    """The lock ``flood`` under ``tmp_path``, held for 0.6 s by another process."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(tmp_path / 'machine-flood.lock')!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(0.6)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    yield tmp_path
    holder.wait()


async def test_another_process_holding_it_is_waited_for(held_elsewhere: Path) -> None:
    start = time.monotonic()
    async with machine_lock("flood", directory=held_elsewhere):
        assert time.monotonic() - start >= 0.3


async def test_a_stuck_holder_is_a_timeout_not_a_hang(tmp_path: Path) -> None:
    async with machine_lock("flood", directory=tmp_path):
        with pytest.raises(TimeoutError, match="still held"):
            async with machine_lock("flood", directory=tmp_path, timeout_s=0.3):
                pass
