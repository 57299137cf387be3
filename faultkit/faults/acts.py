"""Acts that always run to their end: a cancellation waits for them, and so does revert.

A fault's blocking acts run in worker threads (``asyncio.to_thread``), and a thread cannot
be stopped. Cancelling the task that awaits one (Ctrl-C, a test timeout) only abandons the
*await*: the ``docker pause`` or ``tc qdisc add`` goes on in its thread, and a revert that
started at once would race it (``unpause`` first, then the pause lands: the node is left
paused). :class:`Acts` closes that gap for one fault:

- :meth:`Acts.shielded` awaits an act to its end even when the caller is cancelled
  meanwhile, then re-raises the cancellation; further cancellations while it waits are
  absorbed (and still re-raised once, at the end);
- every act is recorded while it runs, and :meth:`Acts.settle` waits for all of them: the
  revert calls it before it undoes anything.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


class Acts:
    """The acts of one fault that are still running."""

    def __init__(self) -> None:
        self._running: set[asyncio.Future[Any]] = set()

    def __len__(self) -> int:
        return len(self._running)

    async def shielded(self, act: Awaitable[T]) -> T:
        """Await ``act`` to its end even if the caller is cancelled meanwhile (then re-raise)."""
        task = asyncio.ensure_future(act)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await settle([task])
            raise

    async def settle(self) -> None:
        """Wait until no act is running; a cancellation meanwhile is absorbed, not re-raised
        (the revert that calls this is never abandoned)."""
        with contextlib.suppress(asyncio.CancelledError):
            await settle(self._running)


async def settle(futures: Iterable[asyncio.Future[Any]]) -> None:
    """Wait until every future is done, whatever cancellations arrive meanwhile.

    A cancellation received while waiting is re-raised once they are all done.
    """
    pending = {f for f in futures if not f.done()}
    cancelled = False
    while pending:
        try:
            await asyncio.wait(pending)  # unlike gather, never cancels what it waits for
        except asyncio.CancelledError:
            cancelled = True
        pending = {f for f in pending if not f.done()}
    if cancelled:
        raise asyncio.CancelledError
