"""The one base class every fault derives from.

A :class:`Fault` is an async context manager::

    async with make_fault("pause", node, inventory=inv, timeline=emit, journal=j) as fault:
        await fault.hold(30)          # like asyncio.sleep(30), but ends early if a guard trips

Contract:

- ``inject()`` (``__aenter__``) first takes the lock of every node the fault reaches
  (:mod:`faultkit.faults.locks`: one fault per node at a time; a locked node raises
  :class:`FaultRefused` naming the holder, and nothing is done), then emits
  ``inject_start``, reads what it needs to undo the fault, writes the journal record
  (undo steps as data, fsync'd) and only then acts, and emits ``inject_end`` once the
  fault is in effect. Between the locks and ``inject_start`` it refuses
  (:class:`FaultRefused`, nothing done) a node that a fault left applied still blocks
  (an unreverted record of a dead harness) and, for a fault that acts on the container,
  a container not proven to serve the node's base_url (:mod:`faultkit.faults.admission`).
  A second ``inject()`` raises :class:`FaultAlreadyActive`. If injecting fails halfway,
  what was done is reverted and the error re-raised.
- Acts are shielded (:mod:`faultkit.faults.acts`): ``_apply`` does each blocking act
  through :meth:`act` (a worker thread) and awaits any other act that must not be cut
  short through :meth:`shielded`. A cancellation mid-act waits for the act to end, then
  goes on, and revert first waits for every act still running: the undo never races an
  act.
- ``revert()`` (``__aexit__``, always: exceptions, test failures, cancellation) emits
  ``revert_start``, runs the undo steps (the same ones the sweep runs after a crash), waits
  for whatever the fault defines as "back" and emits ``revert_end``; the node locks are
  released after that. It is idempotent, and a second cancellation while reverting does
  not abandon the revert.
- Guards are callables (sync or async) returning a reason string to abort, or None. They
  are checked every ``guard_interval_s`` (1 s) while the fault is applied; the first reason
  ends the injection early: ``guard_tripped`` is emitted, the fault reverts, and
  :meth:`hold` returns.
- ``dry_run=True``: nothing is journaled or touched; ``inject``/``revert`` do nothing.

Evidence that the fault took effect (``t_effect``, docs/definitions.md). Each fault class
declares what proves it (``effect_docker_actions``, ``effect_required``, ``spans_outage``);
``inject_start`` carries that declaration as ``data["effect"]`` so measurement reads it from
the timeline alone. ``_apply`` calls :meth:`acting` just before its first disruptive act
(event ``act``) and :meth:`effect_in_place` once its mechanism is confirmed (event
``effect``, e.g. the iptables rule was added); :meth:`effect_missing` (event ``no_effect``)
records that the mechanism demonstrably did nothing. When the harness itself had to bring
the node back, the fault emits ``harness_intervened``.

Event times are Unix epoch seconds; durations in ``result`` are monotonic-clock seconds.
Event data always carries ``{"fault": kind, "id": fault id, "params": {...}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from faultkit.docker import DockerHost, docker_host
from faultkit.errors import FaultAlreadyActive, FaultError, FaultUnsupported
from faultkit.events import EventKind
from faultkit.faults import admission, undo
from faultkit.faults.acts import Acts
from faultkit.faults.locks import HeldLocks, NodeLock
from faultkit.faults.params import Param, ParamSpec, as_param, parse_params
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.records import Event

log = logging.getLogger(__name__)

Emit = Callable[[Event], None]
Guard = Callable[[], "str | Awaitable[str | None] | None"]
T = TypeVar("T")


class Fault:
    """Base class: subclasses set ``kind``/``PARAMS`` and implement the hooks below.

    Hooks (all async):

    - ``_prepare() -> list[undo step]``: read the state needed to undo; no side effects.
    - ``_apply()``: act, each blocking act through :meth:`act` (shielded). Steps learned
      only while acting go through :meth:`add_undo` *before* the action they undo.
    - ``_after_undo()``: after the undo steps ran (e.g. wait until the node is ready).

    :meth:`node_locks` says which node locks the fault holds (default: its own node's,
    from inject to the end of revert).
    """

    kind: ClassVar[str] = ""
    PARAMS: ClassVar[ParamSpec] = {}
    #: False when ``_after_undo`` does the undo's job itself on a normal revert (kill waits
    #: for the restart policy before starting anything); the sweep always runs the steps.
    revert_runs_undo: ClassVar[bool] = True
    guard_interval_s: ClassVar[float] = 1.0
    #: Docker container actions that prove the fault took effect (e.g. ``("die",)``).
    effect_docker_actions: ClassVar[tuple[str, ...]] = ()
    #: The evidence without which the run is INCONCLUSIVE: ``"docker"`` (one of
    #: ``effect_docker_actions``), ``"mechanism"`` (an ``effect`` event) or ``""``.
    effect_required: ClassVar[str] = ""
    #: True when the injection itself spans the outage (rollout, stop, restart, node
    #: restart, a flood): t_effect is the first disruptive act.
    spans_outage: ClassVar[bool] = False
    #: True when the fault acts on the node's container: ``inject()`` then refuses unless
    #: the container is proven to serve the node's base_url (:mod:`.admission`); False for
    #: faults that only send requests to the base_url.
    acts_on_container: ClassVar[bool] = True

    def __init__(
        self,
        node: Node,
        *,
        inventory: Inventory | None = None,
        timeline: Emit | None = None,
        journal: FaultJournal | None = None,
        guards: Sequence[Guard] = (),
        dry_run: bool = False,
        **params: Any,
    ) -> None:
        self.params = self.parse_params(params)  # first: bad input touches nothing
        self.node = node
        self.inventory = inventory
        self.timeline = timeline
        self.journal = journal if journal is not None else (None if dry_run else FaultJournal())
        self.guards = list(guards)
        self.dry_run = dry_run
        self.id = f"{self.kind}-{node.name}-{uuid.uuid4().hex[:8]}"
        self.result: dict[str, Any] = {}
        self.guard_reason: str | None = None
        self.mode: str = ""
        self._state = "idle"  # idle → injecting → applied → reverting → reverted
        self._record: JournalRecord | None = None
        self._ended: asyncio.Event | None = None
        self._guard_task: asyncio.Task[None] | None = None
        self._revert_task: asyncio.Task[None] | None = None
        self.t_revert_mono = 0.0  # monotonic time revert() began
        self._acted = False
        self._state_before_revert = "idle"
        self._locks: HeldLocks | None = None
        self._acts = Acts()  # acts still running (revert waits for them)

    # parameters ---------------------------------------------------------------------
    @classmethod
    def params_spec(cls) -> dict[str, Param]:
        """``PARAMS`` with every entry as a :class:`Param`."""
        return {name: as_param(spec) for name, spec in cls.PARAMS.items()}

    @classmethod
    def parse_params(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``given``, each checked (:func:`.params.parse_params`)."""
        return parse_params(cls.kind, cls.params_spec(), given)

    # description --------------------------------------------------------------------
    def describe(self) -> str:
        """One line: what this fault does to which node with which params."""
        params = ", ".join(f"{k}={v}" for k, v in self.params.items() if v is not None)
        target = self.node.docker.container if self.node.docker else self.node.base_url
        return f"{self.kind} on {self.node.name} ({target}){': ' + params if params else ''}" + (
            f" — {self.what()}" if self.what() else ""
        )

    def what(self) -> str:
        """A short phrase of what the fault does (subclasses override)."""
        return ""

    @classmethod
    def check_blast_radius(
        cls, node: Node, inventory: Inventory | None, params: Mapping[str, Any]
    ) -> None:
        """Refuse (raise FaultRefused) if the fault, with ``params`` (checked already), would
        reach beyond ``node`` or could hit a bystander; default: no-op.

        Called by ``make_fault`` before the fault exists, so a refusal touches nothing,
        ``--dry-run`` included. What only the target's state can tell (a container in the
        host's network namespace, a PID proven to be the container's) is checked in
        ``_prepare``, still before anything is journaled.
        """

    def node_locks(self) -> list[NodeLock]:
        """The node locks the fault takes before injecting; default: its node's, until revert
        has ended. A fault that reaches other nodes (``node_restart``) locks them too."""
        return [NodeLock(self.node)]

    # docker helpers -----------------------------------------------------------------
    @property
    def docker(self) -> DockerHost:
        if self.node.docker is None:
            raise FaultUnsupported(
                f"fault {self.kind!r} needs Docker access, but node {self.node.name!r} has no "
                "`docker:` entry in the inventory"
            )
        return docker_host(self.node.docker.host)

    @property
    def container(self) -> str:
        _ = self.docker
        assert self.node.docker is not None
        return self.node.docker.container

    def step(self, op: str, **args: Any) -> dict[str, Any]:
        """An undo step aimed at this node's container."""
        base: dict[str, Any] = {"op": op}
        if self.node.docker is not None:
            base.update(host=self.node.docker.host, container=self.node.docker.container)
        base.update(args)
        return base

    # events -------------------------------------------------------------------------
    def emit(self, kind: str, **data: Any) -> None:
        payload = {"fault": self.kind, "id": self.id, "params": dict(self.params), **data}
        if self.mode:
            payload.setdefault("mode", self.mode)
        event = Event(t=time.time(), source="fault", kind=kind, node=self.node.name, data=payload)
        if self.timeline is not None:
            try:
                self.timeline(event)
            except Exception:  # a broken timeline sink must not leave a fault applied
                log.exception("timeline sink failed on %s", kind)

    def effect_spec(self) -> dict[str, Any]:
        """What proves this fault took effect (written into ``inject_start``)."""
        return {
            "docker_actions": list(self.effect_docker_actions),
            "required": self.effect_required,
            "spans_outage": self.spans_outage,
        }

    def acting(self, what: str, **data: Any) -> None:
        """Mark the first disruptive act (event ``act``, once), just before doing it."""
        if not self._acted:
            self._acted = True
            self.emit(EventKind.ACT, what=what, **data)

    def effect_in_place(self, what: str, **data: Any) -> None:
        """Record that the fault's mechanism is confirmed in place (event ``effect``)."""
        self.emit(EventKind.EFFECT, evidence="mechanism", what=what, **data)

    def effect_missing(self, why: str) -> None:
        """Record that the mechanism demonstrably did nothing (run becomes INCONCLUSIVE)."""
        self.emit(EventKind.NO_EFFECT, why=why)

    def intervened(self, action: str, why: str) -> None:
        """Record that the harness had to act to bring the node back (not self-recovery)."""
        self.emit(EventKind.HARNESS_INTERVENED, action=action, why=why)

    # acts ---------------------------------------------------------------------------
    async def act(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run one blocking act, ``fn(*args, **kwargs)``, in a worker thread, shielded: a
        cancellation meanwhile waits for ``fn`` to return, then goes on (:mod:`.acts`)."""
        return await self._acts.shielded(asyncio.to_thread(fn, *args, **kwargs))

    async def shielded(self, act: Awaitable[T]) -> T:
        """Await any other act to its end, even if the caller is cancelled meanwhile; until
        then revert waits for it."""
        return await self._acts.shielded(act)

    # journal ------------------------------------------------------------------------
    def add_undo(self, step: dict[str, Any]) -> None:
        """Append an undo step and make it durable *before* doing what it undoes."""
        if self._record is None or self.journal is None:
            raise FaultError("add_undo() outside inject(): call it from _apply()")
        self._record.undo.append(step)
        self.journal.update(self._record)

    # hooks --------------------------------------------------------------------------
    async def _prepare(self) -> list[dict[str, Any]]:
        return []

    async def _apply(self) -> None:
        raise NotImplementedError

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
        try:
            steps = await self._prepare()
            self._record = JournalRecord(
                id=self.id, kind=self.kind, node=self.node.name, description=self.describe(),
                params=dict(self.params), undo=list(steps), node_locks=self._locks.node_keys,
            )
            self.journal.begin(self._record)
            await self._apply()
            self._record.state = "applied"
            self.journal.update(self._record)
        except BaseException as exc:
            log.warning("%s: inject failed (%s); reverting what was done", self.id,
                        str(exc) or type(exc).__name__)
            await self.revert()
            raise
        self._state = "applied"
        self._locks.release(until="inject")
        self.emit(EventKind.INJECT_END)
        if self.guards:
            self._guard_task = asyncio.ensure_future(self._watch_guards())

    async def _admit(self, locks: list[NodeLock]) -> None:
        """Refuse, under the node locks and before anything is done, a node that a fault
        left applied blocks, and a container not proven to serve the base_url
        (:mod:`.admission`)."""
        assert self.journal is not None
        admission.refuse_if_blocked(self.journal, self.kind, self.node.name, locks)
        if self.acts_on_container and self.node.docker is not None:
            await asyncio.to_thread(admission.refuse_unless_served, self.node,
                                    lambda: self.docker.inspect(self.container))

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
        if self._record is not None and self.journal is not None:
            if errors:
                # leave the record unreverted for the sweep, but let the sweep take it now
                self.journal.release(self._record.id)
            else:
                self.journal.mark_reverted(self._record)
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

    async def __aenter__(self) -> Fault:
        await self.inject()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.revert()
