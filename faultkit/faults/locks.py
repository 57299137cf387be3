"""Node locks: one fault per node at a time, from inject to the end of revert.

A fault takes the lock of every node it reaches before it does anything (before
``inject_start``) and keeps it until its revert has ended; a second fault on a locked
node, in another process or in this one, is refused with
:class:`~faultkit.errors.NodeBusy` (a ``FaultRefused``) naming the holder (fault id, kind,
pid, age), and nothing is done; an experiment that meets it is INCONCLUSIVE. Two faults
on one node would undo each other badly: the second journals the first one's damage as the state to
restore (a lowered memory limit, a paused container), and its revert puts it back.

The locks are ``flock`` files in the journal directory (:mod:`faultkit.journal.nodelock`, same
permission rules as the journal), so a holder that dies frees them at once. The key
of a node is its container on its Docker host (two inventories naming one container by
two names still share one lock), or its name for a node without ``docker:``.

Request faults (``flood``, ``oversized_context``) take no lock: they only send traffic and
leave nothing on the node to put back, so they combine with a fault that does.

A node's lock is its *fault* lock. A ``rollout`` is the one fault that others run on top
of (``faultkit gate`` and ``--serving-config`` run their scenarios against a rolled-out
candidate), so it holds the fault lock only while injecting (``until="inject"``: nothing
else acts on the node while the container is replaced) and holds a separate ``rollout``
lock for its whole life, so two rollouts never overlap. Its revert does not wait for the
fault lock: putting the previous config back is never refused.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from faultkit.errors import NodeBusy
from faultkit.inventory import Node
from faultkit.journal import FaultJournal, NodeHolder


def lock_key(node: Node, layer: str = "") -> str:
    """The lock key of ``node``: its Docker host and container, else its name (+ ``#layer``)."""
    base = (f"docker {node.docker.host} {node.docker.container}" if node.docker is not None
            else f"node {node.name}")
    return f"{base}#{layer}" if layer else base


@dataclass(frozen=True, slots=True)
class NodeLock:
    """One lock a fault takes: ``node``'s fault lock (``layer=""``) or another layer's,
    held until the end of revert (``until="revert"``) or of inject (``until="inject"``)."""

    node: Node
    layer: str = ""
    until: Literal["revert", "inject"] = "revert"

    @property
    def key(self) -> str:
        return lock_key(self.node, self.layer)


class HeldLocks:
    """The node locks one fault holds, taken all or none."""

    def __init__(self, journal: FaultJournal, fault_id: str, kind: str) -> None:
        self.journal = journal
        self.fault_id = fault_id
        self.kind = kind
        self._held: list[NodeLock] = []

    def take(self, locks: Sequence[NodeLock]) -> None:
        """Take every lock in ``locks``, or none: raise :class:`NodeBusy` naming the holder."""
        now = time.time()
        for lock in locks:
            if any(held.key == lock.key for held in self._held):
                continue
            holder = NodeHolder(node=lock.node.name, fault_id=self.fault_id, kind=self.kind,
                                pid=os.getpid(), t_locked=now)
            busy = self.journal.nodes.take(lock.key, holder)
            if busy is not None:
                self.release()
                what = "another rollout is in place" if lock.layer == "rollout" else \
                    "one fault per node at a time"
                raise NodeBusy(
                    f"refused: {self.kind} on {lock.node.name!r}: {busy.describe(now)}; {what}. "
                    "Wait until that fault is reverted, or stop its harness (it reverts on "
                    "Ctrl-C, SIGTERM and SIGHUP; `faultkit sweep` cleans up after a killed "
                    "one). Nothing was done."
                )
            self._held.append(lock)

    def release(self, until: Literal["revert", "inject"] | None = None) -> None:
        """Drop the locks held ``until`` that point (all of them when None)."""
        keep = []
        for lock in self._held:
            if until is None or lock.until == until:
                self.journal.nodes.drop(lock.key)
            else:
                keep.append(lock)
        self._held = keep

    @property
    def node_keys(self) -> list[str]:
        """The keys of the nodes' fault locks held (what the sweep takes to replay the record)."""
        return [lock.key for lock in self._held if not lock.layer]
