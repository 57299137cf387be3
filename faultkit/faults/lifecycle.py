"""A fault's lifecycle: inject, hold, revert, and the guards that end it early.

:class:`FaultLifecycle` is a part of :class:`faultkit.faults.base.Fault` (which sets the
attributes declared here); the contract it keeps is in :mod:`faultkit.faults.base`. In
short: ``inject()`` takes the node locks, refuses a blocked node or an unproven container
(:mod:`.admission`), journals the undo steps, then acts; an act that still fails after
its retries emits ``not_applied``, is reverted and raises :class:`FaultNotApplied`;
``revert()`` (idempotent, survives a second cancellation) waits for running acts, runs the
undo steps, emits ``revert_end`` and releases the locks; guards are checked every
``guard_interval_s`` while applied and the first reason reverts the fault. The state goes
idle → injecting → applied → reverting → reverted (``dry-run``: nothing is done).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from faultkit.errors import FaultAlreadyActive, FaultError, FaultkitError, FaultNotApplied
from faultkit.faults import admission, undo
from faultkit.faults.acts import Acts
from faultkit.faults.locks import HeldLocks, NodeLock
from faultkit.faults.noting import FaultNotes, log
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.model.events import EventKind

if TYPE_CHECKING:
    from faultkit.platform import Platform

Guard = Callable[[], "str | Awaitable[str | None] | None"]

T = TypeVar("T")


class FaultLifecycle(FaultNotes):
    """The state machine of one injection (attributes set by ``Fault``)."""

    revert_runs_undo: ClassVar[bool]
    guard_interval_s: ClassVar[float]
    acts_on_container: ClassVar[bool]
    journal: FaultJournal | None
    guards: list[Guard]
    dry_run: bool
    guard_reason: str | None
    t_revert_mono: float
    _state: str
    _record: JournalRecord | None
    _journalled: bool
    _ended: asyncio.Event | None
    _guard_task: asyncio.Task[None] | None
    _revert_task: asyncio.Task[None] | None
    _state_before_revert: str
    _locks: HeldLocks | None
    _acts: Acts
    _acts_done: list[str]
    _acts_failed: list[tuple[BaseException, int]]

    if TYPE_CHECKING:

        @property
        def platform(self) -> Platform: ...

        @property
        def container(self) -> str: ...

    def node_locks(self) -> list[NodeLock]:
        """The node locks the fault takes before injecting; default: its node's, until revert
        has ended. A fault that reaches other nodes (``node_restart``) locks them too."""
        return [NodeLock(self.node)]

    # hooks --------------------------------------------------------------------------
    async def _prepare(self) -> list[dict[str, Any]]:
        return []

    async def _apply(self) -> None:
        raise NotImplementedError

    def _sweep_steps(self) -> list[dict[str, Any]]:
        """Undo steps that only clean up after the harness (helper containers a killed
        harness left on the node's host); appended after ``_prepare``'s."""
        return []

    async def _before_undo(self) -> None:
        """Before the undo steps of a normal revert (e.g. read what the mechanism did)."""
        return None

    async def _after_undo(self) -> None:
        return None

    async def _after_revert_end(self) -> None:
        """After ``revert_end``: let go of what the fault no longer acts through.

        For work that takes time but is no longer the fault (a pass-through proxy draining
        its last connections); ``t_revert`` must not include it. Errors are logged only.
        """
        return None

    # lifecycle ----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self._state in ("injecting", "applied")

    async def inject(self) -> None:
        if self._state != "idle":
            raise FaultAlreadyActive(
                f"{self.describe()}: inject() called twice on the same fault (state "
                f"{self._state}); create a new fault with make_fault() to inject again"
            )
        self._ended = asyncio.Event()
        if self.dry_run:
            self._state = "dry-run"
            return
        assert self.journal is not None
        self._locks = HeldLocks(self.journal, self.id, self.kind)
        locks = self.node_locks()
        self._locks.take(locks)  # refused: still idle, nothing was done
        try:
            await self._admit(locks)
        except BaseException:
            self._locks.release()  # refused: still idle, nothing was done
            raise
        self._state = "injecting"
        self.emit(EventKind.INJECT_START, effect=self.effect_spec())
        applying = False
        try:
            steps = [*await self._prepare(), *self._sweep_steps()]
            self._record = JournalRecord(
                id=self.id, kind=self.kind, node=self.node.name, description=self.describe(),
                params=dict(self.params), undo=list(steps), node_locks=self._locks.node_keys,
            )
            # no act before its record is on disk: JournalUnwritable (a full disk) ends the
            # inject here, nothing applied. The flag is set by the write itself: a
            # cancellation during the shielded write re-raises after it landed, and the
            # revert must still mark that record reverted.
            await self.journal_io(self._begin_record, self._record)
            self._acts_done.clear()  # a probe of _prepare (netem's) is not the fault's act
            applying = True
            await self._apply()
            applying = False
            self._record.state = "applied"
            await self.journal_io(self.journal.update, self._record)
        except BaseException as exc:
            log.warning("%s: inject failed (%s); reverting what was done", self.id,
                        str(exc) or type(exc).__name__)
            not_applied = self._not_applied(exc) if applying else None
            await self.revert()  # raises instead if the revert is incomplete: sweep it
            if not_applied is not None:
                raise not_applied from exc
            raise
        self._state = "applied"
        self._locks.release(until="inject")
        self.emit(EventKind.INJECT_END)
        if self.guards:
            self._guard_task = asyncio.ensure_future(self._watch_guards())

    def _begin_record(self, record: JournalRecord) -> None:
        """Write ``record`` (state applying) and note that it is on disk."""
        assert self.journal is not None
        self.journal.begin(record)
        self._journalled = True

    def _not_applied(self, exc: BaseException) -> FaultNotApplied | None:
        """For an error of ``_apply`` the harness raises on purpose (Docker's refusal after
        the retries, an unsupported kernel; not a bug, not a cancellation): emit
        ``not_applied`` and return the error ``inject()`` raises once reverted."""
        if not isinstance(exc, FaultkitError):
            return None
        attempts = self._attempts_of(exc)
        done = list(self._acts_done)
        self.emit(EventKind.NOT_APPLIED, error=str(exc), attempts=attempts,
                  applied="partly" if done else "none", steps_done=done)
        return FaultNotApplied(self.describe(), str(exc), attempts=attempts, steps_done=done)

    def _attempts_of(self, exc: BaseException) -> int:
        """How many times the act that raised ``exc`` (or the error it wraps: a fault may
        raise a clearer one from Docker's) was tried; 0 when no act raised it."""
        seen: BaseException | None = exc
        chain: list[BaseException] = []
        while seen is not None and not any(seen is e for e in chain):
            chain.append(seen)
            seen = seen.__cause__ or seen.__context__
        return next((tries for e in chain for failed, tries in self._acts_failed
                     if failed is e), 0)

    async def journal_io(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run one journal read or write, ``fn(*args)``, in a worker thread, shielded like an
        act: a write is fsync'd, and an fsync on a busy disk can take seconds, which in the
        event loop would stall the load client sharing it (docs/architecture.md)."""
        return await self._acts.shielded(asyncio.to_thread(fn, *args))

    async def _admit(self, locks: list[NodeLock]) -> None:
        """Refuse, under the node locks and before anything is done, a node that a fault
        left applied blocks, and a container not proven to serve the base_url
        (:mod:`.admission`)."""
        assert self.journal is not None
        await asyncio.to_thread(admission.refuse_if_blocked, self.journal, self.kind,
                                self.node.name, locks)
        if self.acts_on_container and self.node.docker is not None:
            await asyncio.to_thread(admission.refuse_unless_served, self.node,
                                    lambda: self.platform.inspect(self.container))

    def refuse_if_blocked(self, journal: FaultJournal | None) -> None:
        """For a dry run: raise :class:`FaultRefused` as ``inject()`` would when a fault left
        applied blocks a node this fault locks (``journal`` None: there is none; reads only)."""
        if journal is not None:
            admission.refuse_if_blocked(journal, self.kind, self.node.name, self.node_locks())

    async def revert(self) -> None:
        """Undo the fault (idempotent); survives a second cancellation while running."""
        if self._state in ("idle", "reverted", "dry-run"):
            return
        if self._revert_task is None:
            self._revert_task = asyncio.ensure_future(self._revert())
        try:
            await asyncio.shield(self._revert_task)
        except asyncio.CancelledError:
            if not self._revert_task.done():
                await self._revert_task  # finish putting the node back, then re-raise
            raise

    async def _revert(self) -> None:
        try:
            await self._undo()
        finally:
            if self._locks is not None:
                self._locks.release()

    async def _undo(self) -> None:
        self._state_before_revert = self._state
        self._state = "reverting"
        if self._acts:  # an act cut off by a cancellation (or left behind) ends first
            log.info("%s: waiting for %d act(s) to end before reverting", self.id, len(self._acts))
            await self._acts.settle()
        self.t_revert_mono = time.monotonic()
        guard = self._guard_task
        if guard is not None and guard is not asyncio.current_task():
            guard.cancel()
        self.emit(EventKind.REVERT_START)
        errors: list[str] = []
        if self._state_before_revert == "applied":
            try:
                await self._before_undo()
            except Exception as exc:  # evidence only: never keeps the fault applied
                log.warning("%s: reading the fault's effect before undo failed: %s", self.id, exc)
        if self._record is not None and self.revert_runs_undo:
            for item in self._record.undo:
                try:
                    line = await asyncio.to_thread(undo.run_step, item)
                    log.info("%s: %s", self.id, line)
                except Exception as exc:
                    errors.append(f"{item.get('op')}: {exc}")
        if self._record is not None:  # None: refused or failed before the journal, untouched
            try:
                await self._after_undo()
            except Exception as exc:
                errors.append(str(exc))
        if self._record is not None and self.journal is not None and self._journalled:
            # a record never written (begin failed: nothing acted) has nothing to mark
            if errors:
                # leave the record unreverted for the sweep, but let the sweep take it now
                await self.journal_io(self.journal.release, self._record.id)
            else:
                await self.journal_io(self.journal.mark_reverted, self._record)
        self._state = "reverted"
        if self._ended is not None:
            self._ended.set()
        self.emit(EventKind.REVERT_END, **({"errors": errors} if errors else {}))
        try:
            await self._after_revert_end()
        except Exception as exc:
            log.warning("%s: cleaning up after the revert failed: %s", self.id, exc)
        if errors:
            raise FaultError(
                f"{self.describe()}: revert incomplete ({'; '.join(errors)}); "
                "the journal keeps it: run `faultkit sweep` to finish"
            )

    async def hold(self, seconds: float) -> str | None:
        """Keep the fault applied for ``seconds``; returns the guard's reason if one tripped."""
        if self._ended is None:
            raise FaultError("hold() before inject()")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), timeout=seconds)
        return self.guard_reason

    async def _watch_guards(self) -> None:
        while self._state == "applied":
            await asyncio.sleep(self.guard_interval_s)
            for guard in self.guards:
                try:
                    outcome = guard()
                    reason = await outcome if inspect.isawaitable(outcome) else outcome
                except Exception as exc:  # a guard that cannot tell is treated as tripped
                    reason = f"guard {getattr(guard, '__name__', guard)!r} raised {exc!r}"
                if reason and self._state == "applied":
                    self.guard_reason = str(reason)
                    self.emit(EventKind.GUARD_TRIPPED, reason=self.guard_reason)
                    try:
                        await self.revert()
                    except FaultError:
                        log.exception("%s: revert after guard trip failed", self.id)
                    return

    async def __aenter__(self) -> Self:
        await self.inject()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.revert()
