"""Closed- and open-loop request scheduling over one connection pool.

:class:`LoadGenerator` sends requests shaped by a :class:`LoadProfile` to a :class:`Target`
and accounts for every one of them in a :class:`Ledger`. It stops issuing on its own after
``profile.requests`` / ``profile.duration_s`` or when :meth:`LoadGenerator.stop` is called;
requests already in flight then run to completion (bounded by their own timeouts) unless
:meth:`LoadGenerator.cancel_in_flight` cancels them, which records each as
``unknown``/``cancelled``. At the end the ledger invariant is checked; violations are logged
at ERROR level and returned in :class:`LoadResult`.

The open loop never commits coordinated omission: an arrival is never delayed. Each one is
stamped with its due time (``RequestRecord.t_scheduled``) and sent at once; if the in-flight
cap (``profile.concurrency``) is reached it is not sent but recorded on the spot as
``fail``/``shed_client`` (``t_invoke = t_end = t_scheduled`` = the due time), a request lost
to that user. An arrival the event loop reaches late is still sent, with ``t_scheduled``
left at its due time, so user-facing latency (``stats.user_ttft_s``) includes the client's
lateness; sends later than :data:`LATENESS_BOUND_S` are counted in
``LoadResult.late_sends`` and logged, as they mean the client could not keep the schedule.
Inside the process times are monotonic; records carry epoch seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faultkit.load.client import RequestRunner
from faultkit.load.connections import ConnectionPool, ReuseStats
from faultkit.load.ledger import Clock, Ledger
from faultkit.load.profile import LoadProfile, Target
from faultkit.model.records import RequestRecord

__all__ = ["LATENESS_BOUND_S", "LoadGenerator", "LoadResult", "arrival_offsets"]

log = logging.getLogger(__name__)

#: An open-loop arrival sent more than this many seconds after its due time counts as late
#: (``LoadResult.late_sends``). 50 ms: well above event-loop jitter and task start-up on a
#: healthy client (≤ a few ms), well below the TTFTs a run measures, so a late send means
#: the client, not the node, is falling behind.
LATENESS_BOUND_S = 0.05


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The outcome of a run. ``t_start``/``t_end`` are epoch seconds (after warm-up).

    ``late_sends``: open-loop requests sent more than :data:`LATENESS_BOUND_S` after their
    scheduled arrival (``t_invoke − t_scheduled``); always 0 in a closed loop.
    ``records`` is empty when the ledger kept none (``Ledger(keep_records=False)``): read
    them from ``ledger_file``, the columnar ledger (or None), then; ``requests`` counts
    them either way.
    """

    records: list[RequestRecord]
    t_start: float
    t_end: float
    warmup_records: list[RequestRecord] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    late_sends: int = 0
    requests: int = 0
    ledger_file: Path | None = None
    #: what the connection pool did (None: not known)
    connections: ReuseStats | None = None

    @property
    def duration_s(self) -> float:
        return max(0.0, self.t_end - self.t_start)


def arrival_offsets(rate: float, burstiness: float, seed: int) -> Iterator[float]:
    """Endless arrival times (seconds after start) of an open-loop run.

    Gaps are gamma distributed with shape ``burstiness`` and mean ``1/rate``:
    ``burstiness == 1`` is a Poisson process; smaller values are burstier. The sequence
    depends only on the arguments.
    """
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)
    t = 0.0
    while True:
        t += rng.gammavariate(burstiness, scale)
        yield t


class LoadGenerator:
    """Runs one load profile against one target; ``await run()`` once per instance."""

    def __init__(
        self,
        target: Target,
        profile: LoadProfile,
        *,
        ledger: Ledger | None = None,
        pool: ConnectionPool | None = None,
        clock: Clock | None = None,
        id_prefix: str | None = None,
        share: tuple[int, int] = (0, 1),
        start_gate: Callable[[], Awaitable[float]] | None = None,
    ) -> None:
        """``share=(k, n)``: this generator is process ``k`` of ``n`` running one load
        together (:mod:`faultkit.load.multiproc`): ``profile`` is its share
        (:func:`faultkit.load.shares.split_profile`), its ``j``-th request is request
        ``j·n + k`` of the whole run (its id and prompt), and in an open loop it sends
        exactly those arrivals of the whole schedule. ``start_gate``: awaited after the
        warm-up, it returns the monotonic time at which the load starts (every process
        of a split run starts its schedule at the same instant)."""
        k, n = share
        if not 0 <= k < n:
            raise ValueError(f"share must be (k, n) with 0 <= k < n (got {share})")
        self.target = target
        self.profile = profile
        self.ledger = ledger if ledger is not None else Ledger()
        self.clock = clock or Clock()
        self._pool = pool
        self._prefix = id_prefix or os.urandom(3).hex()
        self._stopping = asyncio.Event()
        self._active: set[asyncio.Task[object]] = set()
        self._issued = 0
        self._deadline: float | None = None
        self._late = _Lateness()
        self._share = share
        self._start_gate = start_gate
        if profile.open_loop:
            self.ledger.add_observer(self._late.add)

    def stop(self) -> None:
        """Stop issuing new requests; those in flight continue."""
        self._stopping.set()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping.is_set()

    def cancel_in_flight(self) -> int:
        """Cancel every request in flight (each is recorded as ``unknown``/``cancelled``)."""
        self.stop()
        for task in self._active:
            task.cancel()
        return len(self._active)

    async def run(self) -> LoadResult:
        """Warm up, send the load, wait for in-flight requests, check the ledger."""
        own_pool = self._pool is None
        pool = self._pool or ConnectionPool(reuse=self.profile.reuse_connections)
        try:
            warm = await self._warmup(pool)
            runner = RequestRunner(
                pool, self.target, self.profile, clock=self.clock, ledger=self.ledger
            )
            if warm and self.profile.reuse_connections:
                # the warm-up's connections prove the server keeps connections open (or
                # find it closing them) before the run, not during it
                await runner.prove_reuse()
            t_start = self.clock.mono()
            if self._start_gate is not None:
                t_start = await self._start_gate()
                await asyncio.sleep(max(0.0, t_start - self.clock.mono()))
            if self.profile.duration_s is not None:
                self._deadline = t_start + self.profile.duration_s
            if self.profile.open_loop:
                await self._open_loop(runner, t_start)
            else:
                await self._closed_loop(runner)
            t_end = self.clock.mono()
        finally:
            stats = pool.stats
            if own_pool:
                pool.close()
        violations = self.ledger.check()
        for line in violations:
            log.error("LEDGER INVARIANT VIOLATED: %s", line)
        records = list(self.ledger.records)
        late = self._late
        if late.count:
            log.warning(
                "%d request(s) sent more than %.0f ms after their scheduled arrival "
                "(worst %.0f ms): the client could not keep the schedule",
                late.count,
                LATENESS_BOUND_S * 1000,
                late.worst * 1000,
            )
        return LoadResult(
            records=records,
            t_start=self.clock.epoch(t_start),
            t_end=self.clock.epoch(t_end),
            warmup_records=warm,
            violations=violations,
            late_sends=late.count,
            requests=self.ledger.counts.finished,
            ledger_file=self.ledger.columnar_path,
            connections=stats,
        )

    def _take(self, *, clock_deadline: bool = True) -> int | None:
        """The index of the next request to send, or None when the run should stop issuing.

        The open loop passes ``clock_deadline=False``: its arrivals belong to the run by
        their *scheduled* time, so one that is sent late (a busy loop) is still sent.
        """
        if self._stopping.is_set():
            return None
        if self.profile.requests is not None and self._issued >= self.profile.requests:
            return None
        if clock_deadline and self._deadline is not None and self.clock.mono() >= self._deadline:
            return None
        self._issued += 1
        k, n = self._share
        return (self._issued - 1) * n + k

    def _rid(self, index: int) -> str:
        return f"{self._prefix}-{index:06d}"

    async def _warmup(self, pool: ConnectionPool) -> list[RequestRecord]:
        n = self.profile.warmup
        if n == 0:
            return []
        ledger = Ledger()
        runner = RequestRunner(pool, self.target, self.profile, clock=self.clock, ledger=ledger)
        counter = iter(range(n))

        k, step = self._share

        async def worker() -> None:
            for i in counter:
                index = i * step + k  # unique across the processes of a split run
                await runner.run(1_000_000 + index, f"{self._prefix}-w{index:04d}")

        await asyncio.gather(*(worker() for _ in range(min(n, self.profile.workers))))
        for line in ledger.check():
            log.error("LEDGER INVARIANT VIOLATED (warm-up): %s", line)
        return ledger.records

    async def _closed_loop(self, runner: RequestRunner) -> None:
        async def worker() -> None:
            while (index := self._take()) is not None:
                await runner.run(index, self._rid(index))

        tasks = [asyncio.ensure_future(worker()) for _ in range(self.profile.workers)]
        self._active.update(tasks)
        await _settle(tasks)

    async def _open_loop(self, runner: RequestRunner, t_start: float) -> None:
        """Send each arrival as soon as it is due (monotonic ``t_start + offset``); never
        wait for a free slot: an arrival over the in-flight cap is shed on the spot."""
        p = self.profile
        assert p.rate is not None
        cap = p.concurrency
        tasks: set[asyncio.Task[object]] = set()
        in_flight = 0

        async def one(index: int, due: float) -> None:
            nonlocal in_flight
            try:
                await runner.run(index, self._rid(index), t_scheduled=due)
            finally:
                # freed the moment the request ends, not when the done callback runs
                in_flight -= 1

        k, n = self._share
        # this process's arrivals of the whole schedule: k, k + n, k + 2n, …
        for offset in itertools.islice(arrival_offsets(p.rate, p.burstiness, p.seed), k, None, n):
            due = t_start + offset
            if self._deadline is not None and due >= self._deadline:
                break
            delay = due - self.clock.mono()
            if delay > 0 and await _wait_event(self._stopping, delay):
                break
            index = self._take(clock_deadline=False)
            if index is None:
                break
            if cap is not None and in_flight >= cap:
                runner.shed(self._rid(index), due, f"client in-flight cap {cap} reached")
                continue
            in_flight += 1
            task: asyncio.Task[object] = asyncio.ensure_future(one(index, due))
            tasks.add(task)
            self._active.add(task)
            task.add_done_callback(tasks.discard)
            task.add_done_callback(self._active.discard)
        await _settle(list(tasks))


class _Lateness:
    """Counts open-loop sends later than :data:`LATENESS_BOUND_S`, record by record."""

    __slots__ = ("count", "worst")

    def __init__(self) -> None:
        self.count = 0
        self.worst = 0.0

    def add(self, r: RequestRecord) -> None:
        if r.t_scheduled is None or r.error_class == "shed_client":
            return
        late = r.t_invoke - r.t_scheduled
        if late > LATENESS_BOUND_S:
            self.count += 1
            self.worst = max(self.worst, late)


async def _wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; True if it was set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def _settle(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Wait for every task; cancelled ones are fine (they recorded themselves)."""
    if not tasks:
        return
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            log.error("load worker crashed: %r", result)
