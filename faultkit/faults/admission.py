"""What ``inject()`` refuses after taking the node locks and before it touches anything.

Two checks, each raising :class:`FaultRefused` (nothing journaled, nothing done):

- **A node blocked by a fault left applied.** An unreverted journal record whose owner
  process is gone (its liveness lock is free), naming a node lock the new fault takes,
  means a fault may still be in effect there: a revert or a sweep failed (``FAILED``),
  was refused (``REFUSED``), was not replayed (``NOT REPLAYED``), or no sweep ran yet. A
  new fault would stack on it and journal the damage as the state to restore (a second
  memory squeeze would "restore" the first one's limit). The node stays blocked until
  the record is reverted (``faultkit sweep``) or removed by hand. A record whose owner is
  alive is the node lock's business (refused as busy before this check), and a record
  without undo steps and node locks (a request fault's) blocks nothing.
- **A base_url its container does not serve** (:func:`faultkit.docker.baseurl.check_base_url`),
  for faults that act on the container (``Fault.acts_on_container``): the fault would hit
  one process and the load measure another. Checked at every inject, on a fresh ``docker
  inspect``: a container recreated under the same name (a rollout, a redeploy) may publish
  other ports, so no earlier proof is trusted.

Records written before node locks existed (no ``node_locks``) are matched by node name.
Dry runs read the journal too (:func:`existing_journal`, which creates nothing), so a
``--dry-run`` reports a block the real run would meet.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from faultkit.docker.baseurl import check_base_url
from faultkit.errors import FaultRefused
from faultkit.faults.locks import NodeLock
from faultkit.inventory import Node
from faultkit.journal import FaultJournal, JournalRecord, default_journal_dir
from faultkit.model.durations import rough_duration

__all__ = ["blocking_records", "blocks_a_node", "existing_journal", "refuse_if_blocked",
           "refuse_unless_served", "what_blocks"]


def blocks_a_node(record: JournalRecord) -> bool:
    """Whether ``record``, left unreverted by a dead owner, blocks its node: it names node
    locks, or (written before node locks existed) has undo steps."""
    return bool(record.node_locks or record.undo)


def blocking_records(journal: FaultJournal, locks: Sequence[NodeLock]) -> list[JournalRecord]:
    """The unreverted records of dead owners on any node of ``locks``, oldest first."""
    keys = {lock.key for lock in locks if not lock.layer}
    names = {lock.node.name for lock in locks if not lock.layer}
    return [record for record in journal.orphans()
            if blocks_a_node(record) and (keys.intersection(record.node_locks)
                                          or (not record.node_locks and record.node in names))]


def what_blocks(record: JournalRecord, now: float | None = None) -> str:
    """``fault <id> (<description>), left applied <age> ago by pid N …``: one phrase."""
    now = time.time() if now is None else now
    age = (f"{rough_duration(max(0.0, now - record.t_created))} ago" if record.t_created
           else "at an unknown time")
    return (f"fault {record.id} ({record.description}), left applied {age} by a harness "
            f"that is gone (pid {record.pid}) and not reverted since")


def refuse_if_blocked(journal: FaultJournal, kind: str, node: str,
                      locks: Sequence[NodeLock], now: float | None = None) -> None:
    """Raise :class:`FaultRefused` when a fault left applied blocks a node of ``locks``."""
    records = blocking_records(journal, locks)
    if not records:
        return
    first = records[0]
    more = f" (and {len(records) - 1} more)" if len(records) > 1 else ""
    raise FaultRefused(
        f"refused: {kind} on {node!r}: node {first.node} is BLOCKED by {what_blocks(first, now)}"
        f"{more}; a new fault would stack on it. Run `faultkit sweep` (or `faultkit sweep "
        "--force` for records older than 1 h) and check the node, then retry. Nothing was done."
    )


def existing_journal(directory: Path | None = None) -> FaultJournal | None:
    """The journal at ``directory`` (default: ``$FAULTKIT_HOME/journal``) if it exists; None
    otherwise, and nothing is created (for dry runs)."""
    directory = directory or default_journal_dir()
    return FaultJournal(directory) if directory.is_dir() else None


def refuse_unless_served(node: Node, inspect: Callable[[], Mapping[str, Any]]) -> None:
    """Raise :class:`FaultRefused` unless ``node``'s container is proven to serve its base_url.

    ``inspect`` returns the container's ``docker inspect`` attributes, read now. Blocking:
    call it from a worker thread.
    """
    if node.docker is None:
        return
    result = check_base_url(node, inspect())
    if not result.proven:
        raise FaultRefused(f"refused: {result.reason}. Nothing was done.")
