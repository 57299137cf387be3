"""A streamed request's two deadlines on one timer: first token, then the whole answer.

A streamed request must see its first token by ``first`` and end by ``total`` (``first ≤
total``). ``asyncio.timeout_at(first)`` rescheduled to ``total`` when the first token
arrives does that, at the price of a second timer per request: cancelling one and
scheduling another was 3 % of the load client's CPU at 64 streams of 10 tokens
(``bench/load_client.py``). :class:`StreamDeadline` arms one timer at ``first``; when it
fires it looks at whether the first token came (:meth:`StreamDeadline.first_token`) and
either re-arms for ``total`` or expires. A request shorter than its first-token timeout —
almost every one — never touches its timer again. The outcome is the same as with the
rescheduled ``asyncio.timeout_at``: the block is cancelled and :class:`TimeoutError` raised
at ``first`` if no token came by then, else at ``total``; a cancellation from elsewhere
stays a cancellation (the same ``uncancel`` rule as ``asyncio.Timeout``).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["StreamDeadline"]


class StreamDeadline:
    """``async with StreamDeadline(first, total):`` — loop-clock (monotonic) deadlines."""

    __slots__ = ("_cancelling", "_first", "_handle", "_seen", "_task", "_total", "expired")

    def __init__(self, first: float, total: float) -> None:
        self._first = first
        self._total = max(first, total)
        self._seen = False
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        #: the block was cancelled by a deadline (the caller sees TimeoutError)
        self.expired = False

    def first_token(self) -> None:
        """The first token arrived: from now on only ``total`` applies."""
        self._seen = True

    async def __aenter__(self) -> StreamDeadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("StreamDeadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._handle = asyncio.get_running_loop().call_at(self._first, self._on_first)
        return self

    def _on_first(self) -> None:
        if self._seen and self._total > self._first:
            self._handle = asyncio.get_running_loop().call_at(self._total, self._expire)
        else:
            self._expire()

    def _expire(self) -> None:
        self._handle = None
        self.expired = True
        assert self._task is not None
        self._task.cancel()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.expired:
            assert self._task is not None
            # ours, unless someone else also cancelled the task meanwhile
            if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc
