"""``BackgroundLoad``: run load in the background of a scenario and drain it cleanly.

Usage::

    async with BackgroundLoad(node, LoadProfile(concurrency=4), ledger_path=run.ledger) as load:
        ...                       # inject a fault, observe
        load.records              # finished records so far
        load.in_flight()          # {request id: t_invoke (epoch s)} of requests in flight now

On exit no new request is sent; requests in flight get up to ``drain_timeout_s`` to finish,
then are cancelled and recorded as ``unknown``/``cancelled`` — never dropped. The ledger
invariant is checked; a violation raises :class:`~faultkit.errors.LedgerInvariantError`
(unless the block is already raising, in which case it is logged at ERROR level).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from faultkit.errors import LedgerInvariantError, LoadError
from faultkit.inventory import Node
from faultkit.load.generator import LoadGenerator, LoadResult
from faultkit.load.ledger import Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.model.records import RequestRecord

__all__ = ["BackgroundLoad"]

log = logging.getLogger(__name__)


class BackgroundLoad:
    """Async context manager running a :class:`LoadGenerator` as a background task."""

    def __init__(
        self,
        node: Node | Target,
        profile: LoadProfile | None = None,
        *,
        ledger_path: Path | None = None,
        on_record: Callable[[RequestRecord], object] | None = None,
        drain_timeout_s: float = 10.0,
    ) -> None:
        self.target = node if isinstance(node, Target) else Target.from_node(node)
        self.profile = profile or LoadProfile()
        self.drain_timeout_s = drain_timeout_s
        self.ledger = Ledger(ledger_path, on_record=on_record)
        self.generator = LoadGenerator(self.target, self.profile, ledger=self.ledger)
        self.result: LoadResult | None = None
        self._task: asyncio.Task[LoadResult] | None = None

    @property
    def records(self) -> list[RequestRecord]:
        """Terminal records so far, in completion order (a copy)."""
        return list(self.ledger.records)

    def sending(self) -> bool:
        """Whether the load may still send a request: started, and neither stopped nor at
        the end of its profile (``duration_s``, ``requests``)."""
        return self._task is not None and not self._task.done() and not self.generator.stopped

    def in_flight(self) -> dict[str, float]:
        """Requests in flight now: id → t_invoke (epoch seconds)."""
        return self.ledger.in_flight()

    @property
    def violations(self) -> list[str]:
        return self.result.violations if self.result else self.ledger.check()

    async def __aenter__(self) -> BackgroundLoad:
        if self._task is not None:
            raise LoadError("this BackgroundLoad is already running; create a new one")
        self._task = asyncio.create_task(self.generator.run(), name="faultkit-load")
        await asyncio.sleep(0)  # let the generator take its first steps
        return self

    async def finished(self) -> LoadResult:
        """Wait for a load with an end of its own (a profile's ``duration_s`` or
        ``requests``) to send its last request and for every request to end (each bounded
        by the profile's timeouts); its result, as :meth:`stop` returns it."""
        if self._task is None:
            raise LoadError("BackgroundLoad.finished() before it was started")
        if self.profile.duration_s is None and self.profile.requests is None:
            raise LoadError("this load has no end of its own (no duration_s, no requests): "
                            "stop() it")
        await asyncio.wait({self._task})
        return await self.stop()

    async def stop(self) -> LoadResult:
        """Stop issuing, drain (then cancel) in-flight requests; idempotent."""
        if self.result is not None:
            return self.result
        if self._task is None:
            raise LoadError("BackgroundLoad.stop() before it was started")
        self.generator.stop()
        done, _ = await asyncio.wait({self._task}, timeout=self.drain_timeout_s)
        if not done:
            n = self.generator.cancel_in_flight()
            log.info("load drain: cancelling %d request(s) still in flight", n)
        try:
            self.result = await self._task
        finally:
            self.ledger.close()
        return self.result

    async def __aexit__(
        self,
        _exc_type: type[BaseException] | None,
        exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        result = await self.stop()
        if result.violations:
            if exc is None:
                raise LedgerInvariantError(result.violations)
            for line in result.violations:
                log.error("LEDGER INVARIANT VIOLATED: %s", line)
