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
  act. An act whose Docker call fails transiently is tried again with the undo steps'
  bound (:func:`faultkit.faults.undo.retry_policy`), each retry logged; :meth:`act_once`
  is for the act that must not run twice.
- An act of ``_apply`` that still fails (a :class:`~faultkit.errors.FaultkitError`:
  Docker's refusal after the retries, an unsupported kernel) makes ``inject()`` emit
  ``not_applied`` (``error``, ``attempts``, ``applied``: ``"none"`` or ``"partly"``,
  ``steps_done``), revert what was done and raise :class:`~faultkit.errors.FaultNotApplied`
  from it: the run is INCONCLUSIVE, "the fault could not be applied: …".
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

Evidence that the fault took effect (``acting``, ``effect_in_place``, ``effect_missing``,
``intervened``) and every event: :mod:`faultkit.faults.noting`. The lifecycle (inject,
revert, hold, guards): :mod:`faultkit.faults.lifecycle`. Both are parts of :class:`Fault`.

Event times are Unix epoch seconds; durations in ``result`` are monotonic-clock seconds.
Event data always carries ``{"fault": kind, "id": fault id, "params": {...}}``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from tenacity import AsyncRetrying

from faultkit.docker.host import docker_host
from faultkit.errors import FaultError, FaultUnsupported
from faultkit.faults import undo
from faultkit.faults.acts import Acts
from faultkit.faults.lifecycle import FaultLifecycle, Guard
from faultkit.faults.locks import HeldLocks
from faultkit.faults.noting import Emit, log
from faultkit.faults.params import Param, ParamSpec, as_param, parse_params
from faultkit.inventory import DockerRef, Inventory, Node
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.platform import Platform, platform_for

__all__ = ["Emit", "Fault", "Guard"]

T = TypeVar("T")


class Fault(FaultLifecycle):
    """Base class: subclasses set ``kind``/``PARAMS`` and implement the hooks below.

    Hooks (all async):

    - ``_prepare() -> list[undo step]``: read the state needed to undo; no side effects.
    - ``_apply()``: act, each blocking act through :meth:`act` (shielded). Steps learned
      only while acting go through :meth:`add_undo` *before* the action they undo.
    - ``_after_undo()``: after the undo steps ran (e.g. wait until the node is ready).

    :meth:`node_locks` says which node locks the fault holds (default: its own node's,
    from inject to the end of revert).
    """

    #: the kind's name; its facts (family, words, what its revert does) are its
    #: :class:`~faultkit.model.kinds.FaultSpec` in :data:`faultkit.model.kinds.FAULTS`
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
        #: the record is on disk (``FaultJournal.begin`` returned): only then is it marked
        #: reverted, released or left for the sweep
        self._journalled = False
        self._ended: asyncio.Event | None = None
        self._guard_task: asyncio.Task[None] | None = None
        self._revert_task: asyncio.Task[None] | None = None
        self.t_revert_mono = 0.0  # monotonic time revert() began
        self._acted = False
        self._state_before_revert = "idle"
        self._locks: HeldLocks | None = None
        self._acts = Acts()  # acts still running (revert waits for them)
        self._acts_done: list[str] = []  # acts of _apply that returned, in order
        self._acts_failed: list[tuple[BaseException, int]] = []  # (error, attempts)

    # parameters ---------------------------------------------------------------------
    @classmethod
    def params_spec(cls) -> dict[str, Param]:
        """``PARAMS`` with every entry as a :class:`Param`."""
        return {name: as_param(spec) for name, spec in cls.PARAMS.items()}

    @classmethod
    def parse_params(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``given``, each checked (:func:`.params.parse_params`)."""
        return parse_params(cls.kind, cls.params_spec(), given)

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

    # the platform -------------------------------------------------------------------
    def _docker_entry(self) -> DockerRef:
        """The node's ``docker:`` entry; without one no fault can act on its container."""
        if self.node.docker is None:
            raise FaultUnsupported(
                f"fault {self.kind!r} needs Docker access, but node {self.node.name!r} has no "
                "`docker:` entry in the inventory"
            )
        return self.node.docker

    @property
    def platform(self) -> Platform:
        """The one way a fault acts on its node (:mod:`faultkit.platform`): the Docker-API
        verbs through the node's own engine, and its kernel through local shortcuts for a
        ``unix://`` engine, helper containers on any other."""
        entry = self._docker_entry()
        return platform_for(entry.host, docker_host(entry.host))

    def _sweep_steps(self) -> list[dict[str, Any]]:
        if self.node.docker is None or not self.acts_on_container:
            return []
        return self.platform.helper_steps(self.id)

    @property
    def container(self) -> str:
        return self._docker_entry().container

    def step(self, op: str, **args: Any) -> dict[str, Any]:
        """An undo step aimed at this node's container."""
        base: dict[str, Any] = {"op": op}
        if self.node.docker is not None:
            base.update(host=self.node.docker.host, container=self.node.docker.container)
        base.update(args)
        return base

    # acts ---------------------------------------------------------------------------
    async def act(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run one blocking act, ``fn(*args, **kwargs)``, in a worker thread, shielded: a
        cancellation meanwhile waits for ``fn`` to return, then goes on (:mod:`.acts`).

        A transient Docker error (``DockerError.transient``) is tried again with the undo
        steps' policy (:func:`.undo.retry_policy`: up to 5 attempts within about 10 s), each
        retry logged with its attempt count; a cancellation between attempts ends it.
        """
        return await self._act(fn, args, kwargs, retry=True)

    async def act_once(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Like :meth:`act`, never tried again: for an act that must not run twice (an
        exec that writes a file), or whose transient-looking refusal the fault answers
        itself (cgroup v1 refusing a memory limit)."""
        return await self._act(fn, args, kwargs, retry=False)

    async def _act(self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any],
                   *, retry: bool) -> T:
        name = _act_name(fn, args)
        tries = 0

        async def attempt() -> T:
            nonlocal tries
            tries += 1
            return await self._acts.shielded(asyncio.to_thread(fn, *args, **kwargs))

        try:
            if retry:
                result: T = await AsyncRetrying(
                    **undo.retry_policy(f"{self.id}: act {name}", log))(attempt)
            else:
                result = await attempt()
        except BaseException as exc:
            self._acts_failed.append((exc, tries))
            raise
        if tries > 1:
            log.info("%s: act %s succeeded (attempt %d of %d)", self.id, name, tries,
                     undo.UNDO_ATTEMPTS)
        self._acts_done.append(name)
        return result

    async def shielded(self, act: Awaitable[T]) -> T:
        """Await any other act to its end, even if the caller is cancelled meanwhile; until
        then revert waits for it."""
        result = await self._acts.shielded(act)
        self._acts_done.append(getattr(act, "__qualname__", type(act).__name__))
        return result

    # journal ------------------------------------------------------------------------
    async def drop_undo(self, op: str) -> None:
        """Drop the undo steps of ``op`` once acting has shown there is nothing of that kind
        to undo (``latency`` in proxy mode installs no qdisc), durably."""
        if self._record is None or self.journal is None:
            raise FaultError("drop_undo() outside inject(): call it from _apply()")
        self._record.undo = [step for step in self._record.undo if step.get("op") != op]
        await self.journal_io(self.journal.update, self._record)

    async def add_undo(self, step: dict[str, Any]) -> None:
        """Append an undo step and make it durable *before* doing what it undoes."""
        if self._record is None or self.journal is None:
            raise FaultError("add_undo() outside inject(): call it from _apply()")
        self._record.undo.append(step)
        await self.journal_io(self.journal.update, self._record)


def _act_name(fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    """``pause vllm-a``: the act's function and, when it is a name, what it acts on."""
    name = str(getattr(fn, "__name__", type(fn).__name__))
    return f"{name} {args[0]}" if args and isinstance(args[0], str) else name
