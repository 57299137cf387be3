"""The request ledger: every invoked request, its single terminal record, and the invariant.

:class:`Ledger` is told when a request starts (:meth:`Ledger.start`) and when it ends
(:meth:`Ledger.finish`). Finished records are appended in memory, written as one JSON line
each (flushed per record, so a crash loses nothing already finished) and handed to the
``on_record`` callback. :meth:`Ledger.check` verifies the invariant *every invoked request
ends in exactly one terminal status* and returns the violations as readable lines.

:class:`Clock` converts the event loop's monotonic clock to epoch seconds through one
anchor, as ``faultkit.records`` prescribes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from faultkit.records import ERROR_CLASSES, JsonlWriter, RequestRecord

__all__ = ["Clock", "Ledger"]

log = logging.getLogger(__name__)


class Clock:
    """Monotonic → epoch conversion: ``epoch = anchor_epoch + (mono - anchor_mono)``.

    ``mono`` is the running event loop's clock (``loop.time()``, i.e. ``time.monotonic``),
    so deadlines computed from it work with ``asyncio.timeout_at``.
    """

    __slots__ = ("anchor_epoch", "anchor_mono")

    def __init__(self) -> None:
        self.anchor_mono = time.monotonic()
        self.anchor_epoch = time.time()

    @staticmethod
    def mono() -> float:
        return time.monotonic()

    def epoch(self, mono: float) -> float:
        return self.anchor_epoch + (mono - self.anchor_mono)

    def now(self) -> float:
        """Epoch seconds now, on the monotonic-anchored scale."""
        return self.epoch(time.monotonic())


class Ledger:
    """Accounts for requests from invoke to terminal record. Not thread-safe (one loop)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        on_record: Callable[[RequestRecord], object] | None = None,
    ) -> None:
        self.records: list[RequestRecord] = []
        self._in_flight: dict[str, float] = {}
        self._started = 0
        self._finished_ids: set[str] = set()
        self._violations: list[str] = []
        self._writer = JsonlWriter(path) if path is not None else None
        self._on_record = on_record
        self.path = path

    def start(self, request_id: str, t_invoke: float) -> None:
        """Register request ``request_id`` as invoked at epoch ``t_invoke``."""
        if request_id in self._in_flight or request_id in self._finished_ids:
            self._violations.append(f"request id {request_id} invoked twice")
        self._in_flight[request_id] = t_invoke
        self._started += 1

    def finish(self, record: RequestRecord) -> None:
        """Record the terminal state of a started request (exactly once per request)."""
        if record.id in self._finished_ids:
            self._violations.append(f"request {record.id} got a second terminal record")
            return
        if self._in_flight.pop(record.id, None) is None:
            self._violations.append(f"request {record.id} finished but was never started")
        self._finished_ids.add(record.id)
        problem = _record_problem(record)
        if problem:
            self._violations.append(f"request {record.id}: {problem}")
        self.records.append(record)
        if self._writer is not None:
            self._writer.write(record)
        if self._on_record is not None:
            try:
                self._on_record(record)
            except Exception:  # a broken callback must not break the accounting
                log.exception("on_record callback failed for request %s", record.id)

    def in_flight(self) -> dict[str, float]:
        """Requests invoked and not yet finished: id → t_invoke (epoch seconds)."""
        return dict(self._in_flight)

    @property
    def started(self) -> int:
        return self._started

    def check(self) -> list[str]:
        """Violations of "every invoked request ends in exactly one terminal status".

        An arrival the open loop shed is started and finished at the same instant; it is
        accounted like any other request (one start, one terminal record) and must be
        ``fail``/``shed_client`` with ``t_scheduled = t_invoke = t_end``.
        """
        problems = list(self._violations)
        for rid in sorted(self._in_flight):
            problems.append(f"request {rid} was invoked but has no terminal record")
        if len(self.records) != self._started and not self._in_flight:
            problems.append(f"{self._started} requests invoked but {len(self.records)} recorded")
        return problems

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _record_problem(record: RequestRecord) -> str | None:
    if record.status == "ok":
        if record.error_class is not None:
            return f"status ok but error_class {record.error_class!r}"
    elif record.status in ("fail", "unknown"):
        if record.error_class not in ERROR_CLASSES:
            return f"status {record.status} with unknown error_class {record.error_class!r}"
    else:
        return f"status {record.status!r} is not ok|fail|unknown"
    if record.t_end < record.t_invoke:
        return "t_end before t_invoke"
    if record.t_scheduled is not None and record.t_scheduled > record.t_invoke:
        return "t_scheduled after t_invoke"
    if record.error_class == "shed_client" and not (
        record.status == "fail" and record.t_scheduled == record.t_invoke == record.t_end
    ):
        return "a shed arrival must fail at once (t_scheduled = t_invoke = t_end)"
    return None
