"""Machine locks: experiments that load the whole harness machine take turns.

A request flood is sent by this machine's load client and, on a lab of one machine, served
by the same cores as every other node. Two floods at once (two scenario lanes, each in its
``test_overload``) saturate the cores: on the testbed's two, the background load's event
loop fell 2.2 s behind its schedule and both runs read client stalls as the nodes' losses.
:func:`machine_lock` makes such experiments wait for each other, across processes: one
exclusive ``flock`` per name in the journal directory (the node locks' directory and rules:
0600, no symlink followed). The kernel drops the lock when its holder dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from faultkit.journal import default_journal_dir
from faultkit.journal.nodelock import try_flock

__all__ = ["machine_lock"]

log = logging.getLogger(__name__)

#: how often a waiter tries the lock again
_POLL_S = 0.2


@contextlib.asynccontextmanager
async def machine_lock(
    name: str, *, directory: Path | None = None, timeout_s: float = 900.0
) -> AsyncIterator[float]:
    """Hold the machine lock ``name`` for the block; yields the seconds spent waiting.

    Raises ``TimeoutError`` after ``timeout_s`` without the lock (its holder is stuck:
    ``faultkit sweep --list`` shows what runs).
    """
    where = directory or default_journal_dir()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = where / f"machine-{name}.lock"
    start = time.monotonic()
    fd = try_flock(path)
    if fd is None:
        log.info("waiting for the machine lock %r (another experiment holds it)", name)
    while fd is None:
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"machine lock {name!r} ({path}) still held after {timeout_s:g} s")
        await asyncio.sleep(_POLL_S)
        fd = try_flock(path)
    try:
        yield time.monotonic() - start
    finally:
        os.close(fd)
