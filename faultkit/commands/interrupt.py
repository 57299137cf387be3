"""Signals that end a fault command with a revert: Ctrl-C, SIGTERM and SIGHUP.

``faultkit inject`` and ``faultkit gate`` run their work under :func:`until_interrupted`:
each of :data:`INTERRUPT_SIGNALS` cancels the work's task, so its ``async with fault`` /
``finally`` blocks revert what is applied, exactly as on a normal end. Nothing is raised
from inside a signal handler (a ``KeyboardInterrupt`` there could land in the middle of
the revert itself); a second signal while reverting is one more cancellation, which the
revert survives (:meth:`faultkit.faults.base.Fault.revert`). SIGHUP is there because a
closed terminal or a dropped ssh session must not leave a node broken.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

#: the signals after which a fault command reverts and exits 128 + the signal's number
INTERRUPT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_T = TypeVar("_T")


async def until_interrupted(work: Coroutine[Any, Any, _T]) -> tuple[_T | None, int]:
    """Run ``work``; one of :data:`INTERRUPT_SIGNALS` cancels it.

    Returns ``(its result, 0)``, or ``(None, the signal number)`` once the cancelled
    ``work`` has unwound (its reverts done); ``(its result, the signal number)`` if it
    finished anyway. Its exceptions propagate, including an error
    met while reverting after a signal.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    got: list[int] = []

    def interrupted(signum: int) -> None:
        got.append(signum)
        task.cancel()

    for signum in INTERRUPT_SIGNALS:
        loop.add_signal_handler(signum, interrupted, signum)
    try:
        while True:
            try:
                return await asyncio.shield(task), (got[0] if got else 0)
            except asyncio.CancelledError:
                if not task.done():  # this coroutine was cancelled, not the work: pass it on
                    task.cancel()
                    continue
                if not got:
                    raise
                return None, got[0]
    finally:
        for signum in INTERRUPT_SIGNALS:
            loop.remove_signal_handler(signum)
