"""The request ledger: every invoked request, its single terminal record, and the invariant.

:class:`Ledger` is told when a request starts (:meth:`Ledger.start`) and when it ends
(:meth:`Ledger.finish`). Finished records are appended in memory, written as one JSON line
each (flushed per record, so a crash loses nothing already finished), appended to the
columnar ledger file when one is given (``ledger.arrows``, :mod:`faultkit.load.ledgerfile`)
and handed to the ``on_record`` callback. :meth:`Ledger.check` verifies the invariant
*every invoked request ends in exactly one terminal status* and returns the violations as
readable lines.

**Bounded memory** (``keep_records=False``, for long and soak runs): no record is kept
(``records`` stays empty; read them back from the file), only the requests in flight and
running counts (:attr:`Ledger.counts`). The invariant is then checked with what that
leaves: a request invoked twice *while in flight*, a terminal record for a request that is
not in flight (never started, or finished already), a bad record, and the counts. A
request id reused after its request ended is not detected (ids come from one counter), and
at most :data:`MAX_VIOLATIONS` violation lines are kept (then a count).

:class:`Clock` converts the event loop's monotonic clock to epoch seconds through one
anchor, as ``faultkit.model.records`` prescribes.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from faultkit.model.records import ERROR_CLASSES, JsonlWriter, RequestRecord

if TYPE_CHECKING:  # pyarrow is imported only by a ledger that writes the columnar file
    from faultkit.load.ledgerfile import ArrowLedgerWriter

__all__ = ["MAX_VIOLATIONS", "Clock", "Ledger", "LedgerCounts"]

log = logging.getLogger(__name__)

#: A bounded-memory ledger keeps this many violation lines, then only counts them.
MAX_VIOLATIONS = 1000
#: how many of the latest ok records :attr:`Ledger.recent_ok` holds
RECENT_OK = 1000


class Clock:
    """Monotonic → epoch conversion: ``epoch = anchor_epoch + (mono - anchor_mono)``.

    ``mono`` is the running event loop's clock (``loop.time()``, i.e. ``time.monotonic``),
    so deadlines computed from it work with ``asyncio.timeout_at``.
    """

    __slots__ = ("anchor_epoch", "anchor_mono")

    def __init__(self) -> None:
        self.anchor_mono = time.monotonic()
        self.anchor_epoch = time.time()

    @classmethod
    def from_anchor(cls, anchor_mono: float, anchor_epoch: float) -> Clock:
        """A clock on another's anchor: the processes of one split run share the parent's
        (``time.monotonic`` is one clock for the whole machine), so their epoch times
        compare exactly."""
        clock = cls.__new__(cls)
        clock.anchor_mono = anchor_mono
        clock.anchor_epoch = anchor_epoch
        return clock

    @staticmethod
    def mono() -> float:
        return time.monotonic()

    def epoch(self, mono: float) -> float:
        return self.anchor_epoch + (mono - self.anchor_mono)

    def mono_of(self, epoch: float) -> float:
        """The monotonic time of an epoch-seconds stamp taken elsewhere (the kernel's)."""
        return self.anchor_mono + (epoch - self.anchor_epoch)

    def now(self) -> float:
        """Epoch seconds now, on the monotonic-anchored scale."""
        return self.epoch(time.monotonic())


@dataclass(slots=True)
class LedgerCounts:
    """Running counts of a ledger's terminal records, by status."""

    finished: int = 0
    ok: int = 0
    failed: int = 0
    unknown: int = 0


class Ledger:
    """Accounts for requests from invoke to terminal record. Not thread-safe (one loop).

    ``path``: the JSON-lines ledger to append to. ``columnar_path``: the Arrow ledger file
    to create (it must not exist). ``keep_records=False``: bounded memory (module doc).
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        on_record: Callable[[RequestRecord], object] | None = None,
        keep_records: bool = True,
        columnar_path: Path | None = None,
    ) -> None:
        self.records: list[RequestRecord] = []
        self.keep_records = keep_records
        self.counts = LedgerCounts()
        #: the latest ok records (at most ``RECENT_OK``), for live figures
        self.recent_ok: deque[RequestRecord] = deque(maxlen=RECENT_OK)
        self._in_flight: dict[str, float] = {}
        self._started = 0
        self._finished_ids: set[str] = set()
        self._violations: list[str] = []
        self._dropped_violations = 0
        self._writer = JsonlWriter(path) if path is not None else None
        self._columnar: ArrowLedgerWriter | None = None
        if columnar_path is not None:
            from faultkit.load.ledgerfile import ArrowLedgerWriter

            self._columnar = ArrowLedgerWriter(columnar_path)
        self._on_record = on_record
        self._observers: list[Callable[[RequestRecord], object]] = []
        self.path = path
        self.columnar_path = columnar_path

    def add_observer(self, observer: Callable[[RequestRecord], object]) -> None:
        """Also call ``observer(record)`` for every terminal record (before ``on_record``).

        For the harness's own running figures; an observer must not raise.
        """
        self._observers.append(observer)

    def start(self, request_id: str, t_invoke: float) -> None:
        """Register request ``request_id`` as invoked at epoch ``t_invoke``."""
        if request_id in self._in_flight or request_id in self._finished_ids:
            self._violation(f"request id {request_id} invoked twice")
        self._in_flight[request_id] = t_invoke
        self._started += 1

    def finish(self, record: RequestRecord) -> None:
        """Record the terminal state of a started request (exactly once per request)."""
        if record.id in self._finished_ids:
            self._violation(f"request {record.id} got a second terminal record")
            return
        if self._in_flight.pop(record.id, None) is None:
            if self.keep_records:
                self._violation(f"request {record.id} finished but was never started")
            else:
                self._violation(
                    f"request {record.id} finished but was not in flight "
                    "(never started, or a second terminal record)"
                )
                return
        if self.keep_records:
            self._finished_ids.add(record.id)
        problem = _record_problem(record)
        if problem:
            self._violation(f"request {record.id}: {problem}")
        self._count(record)
        if self.keep_records:
            self.records.append(record)
        if self._writer is not None:
            self._writer.write(record)
        if self._columnar is not None:
            self._columnar.write(record)
        for observer in self._observers:
            observer(record)
        if self._on_record is not None:
            try:
                self._on_record(record)
            except Exception:  # a broken callback must not break the accounting
                log.exception("on_record callback failed for request %s", record.id)

    def _count(self, record: RequestRecord) -> None:
        counts = self.counts
        counts.finished += 1
        if record.status == "ok":
            counts.ok += 1
            self.recent_ok.append(record)
        elif record.status == "fail":
            counts.failed += 1
        else:
            counts.unknown += 1

    def _violation(self, line: str) -> None:
        if self.keep_records or len(self._violations) < MAX_VIOLATIONS:
            self._violations.append(line)
        else:
            self._dropped_violations += 1

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
        if self._dropped_violations:
            problems.append(f"… and {self._dropped_violations} more violation(s)")
        for rid in sorted(self._in_flight):
            problems.append(f"request {rid} was invoked but has no terminal record")
        finished = self.counts.finished
        if finished != self._started and not self._in_flight:
            problems.append(f"{self._started} requests invoked but {finished} recorded")
        return problems

    def close(self) -> None:
        """Close the files; the columnar one is flushed first (raises ``LedgerFileError``)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._columnar is not None:
            columnar, self._columnar = self._columnar, None
            columnar.close()


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
