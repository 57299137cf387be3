"""The sweep: revert every fault a dead harness process left applied.

:func:`sweep` walks the journal's unreverted records whose owning process is gone (its
liveness lock is free), newest first (faults stacked on one node unwind from the top),
takes each record's lock, runs its undo steps in order (the same
steps a normal revert runs; each is idempotent) and marks it reverted. Faults owned by a
*live* process (another harness running right now, or this process) are left alone.
A record whose steps fail stays unreverted and is reported, so the next sweep retries it.

The journal alone is never trusted to say what to run, and an old record is not replayed
blindly. A record is listed and left in the journal, with nothing run, when:

- one of its undo steps is a ``shell`` command that is not the ``rollback:`` of a serving
  config in the inventory given (no inventory: no shell step runs). A rollout in
  command-pair mode journals exactly that command, so a genuine record passes; a record
  someone wrote or edited to run anything else does not (line ``REFUSED …``);
- it has undo steps and was created more than ``max_age_s`` ago (default
  :data:`MAX_AGE_S`, one hour; a record without a creation time counts as old): the node
  may have been repaired or redeployed since, and replaying an old undo (recreating a
  container from an old spec, restoring an old memory limit) could undo that work. With
  ``force=True`` it is replayed anyway (line ``NOT REPLAYED …``).

A record is replayed while the sweep holds the locks of the nodes its fault held
(:mod:`faultkit.faults.locks`), taken *before* the record is claimed; when one of them is
held by a live fault now, the record is listed (``BUSY …``) and left for a later sweep, so
an undo never runs under another fault's feet — and a new fault, whose BLOCKED check runs
under those same locks, never meets a record a sweeper is judging.

A record the sweep leaves in the journal (``FAILED``, ``REFUSED``, ``NOT REPLAYED``,
``BUSY``) keeps its nodes BLOCKED: no new fault is injected there until it is reverted
(:mod:`faultkit.faults.admission`), so a fault never stacks on one left applied.

It is idempotent: a second sweep finds nothing to do (records it refused are listed again).
With ``helpers=True`` and an inventory (``faultkit sweep``, the pytest plugin), it also
removes helper containers (:mod:`faultkit.platform`) left on the inventory's remote Docker
hosts for longer than a helper ever lives (:func:`sweep_helpers`).
The pytest plugin, ``faultkit inject`` and ``faultkit gate`` call it at start with their
inventory; ``faultkit sweep`` runs it by hand.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from faultkit.faults import undo
from faultkit.inventory import Inventory
from faultkit.journal import FaultJournal, JournalRecord, NodeHolder
from faultkit.model.durations import rough_duration

log = logging.getLogger(__name__)

#: records older than this (seconds) are listed, not replayed, unless forced
MAX_AGE_S = 3600.0
#: how the lines of records the sweep left applied begin
LEFT_APPLIED = ("FAILED", "REFUSED", "NOT REPLAYED", "BUSY")


def sweep(
    journal: FaultJournal | None = None,
    *,
    inventory: Inventory | None = None,
    max_age_s: float = MAX_AGE_S,
    force: bool = False,
    now: float | None = None,
    helpers: bool = False,
    replay_old: Callable[[JournalRecord], bool] | None = None,
) -> list[str]:
    """Revert every orphaned fault the policy allows; return one line per record handled.

    Lines start with ``reverted``, ``FAILED``, ``REFUSED`` (a shell step the inventory does
    not vouch for), ``NOT REPLAYED`` (older than ``max_age_s``; ``force`` replays it) or
    ``BUSY`` (a node it needs is locked by a live fault); the last four leave the record in
    the journal (:data:`LEFT_APPLIED`). Empty: nothing
    to do. ``now`` (epoch seconds) is for tests. ``replay_old`` names records replayed
    whatever their age (``testbed up`` passes the lab's own: it rebuilds those nodes from
    their spec right after, so no repair work of anyone else can be undone).
    """
    journal = journal if journal is not None else FaultJournal()
    now = time.time() if now is None else now
    lines: list[str] = []
    for path in journal.corrupt():
        lines.append(f"warning: unreadable journal record {path} (left for inspection)")
    # newest first: a fault applied on top of another (the gate's scenarios run on top of
    # its rollout) recorded the state the first one left; a stack unwinds from its top
    for record in sorted(journal.orphans(), key=lambda r: r.t_created, reverse=True):
        forced = force or (replay_old is not None and replay_old(record))
        refusal = _refusal(journal, record, inventory, max_age_s, forced, now)
        if refusal is not None:
            lines.append(refusal)
            log.warning("sweep: %s", refusal)
            continue
        # The node locks first, then the record: while a sweeper holds a record's claim
        # the record looks live, so the BLOCKED check of a new fault (which runs holding
        # the node locks) would not see it. Claiming only under the node locks leaves no
        # moment in which a new fault could slip onto a node whose record is being judged.
        with _node_locks(journal, record) as busy:
            if busy is not None:
                lines.append(
                    f"BUSY {record.id} ({record.description}): {busy.describe(now)}; "
                    "left in the journal: run `faultkit sweep` again once that fault is "
                    "reverted"
                )
                log.warning("sweep: %s", lines[-1])
                continue
            with journal.claim(record.id) as claimed:
                if claimed is None:
                    continue  # taken by its (live) owner or another sweeper meanwhile
                lines.append(_replay(journal, claimed))
        log.info("sweep: %s", lines[-1])
    journal.prune()
    if helpers and inventory is not None:
        lines.extend(sweep_helpers(inventory, now=now))
    return lines


#: a helper container older than this (seconds) is left behind: each one is removed by its
#: harness within its timeout (faultkit.platform.HELPER_TIMEOUT_S, 60 s) of its creation
HELPER_MAX_AGE_S = 300.0


def sweep_helpers(inventory: Inventory, *, now: float | None = None,
                  max_age_s: float = HELPER_MAX_AGE_S) -> list[str]:
    """Remove the helper containers (:mod:`faultkit.platform`) left on the inventory's
    remote Docker hosts: those older than ``max_age_s``, whose harness is gone (a helper in
    use is younger). A journalled fault's own ``helpers_remove`` step covers its helpers
    at once; this covers one killed before its record was written. One line per removal; a
    host that does not answer is logged only (the next sweep looks again)."""
    from faultkit.constants import LABEL_OWNER
    from faultkit.docker import hostpid
    from faultkit.docker.host import docker_host
    from faultkit.errors import DockerError
    from faultkit.model.timestamps import parse_rfc3339

    now = time.time() if now is None else now
    lines: list[str] = []
    hosts = sorted({n.docker.host for n in inventory.nodes
                    if n.docker is not None and not hostpid.is_local(n.docker.host)})
    for url in hosts:
        host = docker_host(url)
        try:
            for container in host.labelled(LABEL_OWNER, "helper"):
                created = parse_rfc3339(str(container.attrs.get("Created") or ""))
                if created is None or now - created < max_age_s:
                    continue
                host.remove(container.name)
                lines.append(f"removed helper container {container.name} on {url} (left "
                             f"behind {rough_duration(now - created)} ago)")
        except DockerError as exc:  # a host that is down runs no helper: nothing to report
            log.warning("sweep: helper containers on %s not checked: %s", url, exc)
    return lines


@contextlib.contextmanager
def _node_locks(journal: FaultJournal, record: JournalRecord) -> Iterator[NodeHolder | None]:
    """Hold the locks of the record's nodes; yields None, or the holder of a busy one."""
    me = NodeHolder(node=record.node, fault_id=record.id, kind=f"sweep of {record.kind}",
                    pid=os.getpid(), t_locked=time.time())
    taken: list[str] = []
    try:
        for key in record.node_locks:
            busy = journal.nodes.take(key, me)
            if busy is not None:
                yield busy
                return
            taken.append(key)
        yield None
    finally:
        for key in taken:
            journal.nodes.drop(key)


def _replay(journal: FaultJournal, record: JournalRecord) -> str:
    """Run the record's undo steps (all of them, even after one fails); one line."""
    errors = []
    done = []
    for step in record.undo:
        try:
            done.append(undo.run_step(step))
        except Exception as exc:  # keep going: the other steps may still apply
            errors.append(f"{step.get('op')}: {exc}")
    if errors:
        return (
            f"FAILED to revert {record.id} ({record.description}): "
            f"{'; '.join(errors)} — left in the journal, run `faultkit sweep` again"
        )
    # mark while still holding the claim, then let the claim release the lock
    journal.update_reverted(record, note="reverted by sweep")
    summary = "; ".join(done) or "nothing to undo"
    return f"reverted {record.id} ({record.description}): {summary}"


def _refusal(journal: FaultJournal, record: JournalRecord, inventory: Inventory | None,
             max_age_s: float, force: bool, now: float) -> str | None:
    """Why the record must not be replayed now (a ``REFUSED``/``NOT REPLAYED`` line), or None."""
    path = journal.path_of(record.id)
    for step in record.undo:
        why = untrusted_shell(step, inventory)
        if why is not None:
            return (
                f"REFUSED to replay {record.id} ({record.description}): {why}. Nothing was "
                f"run. Check the node; run the command yourself if you trust it, then delete "
                f"{path}"
            )
    age = now - record.t_created if record.t_created else float("inf")
    if age > max_age_s and not force and record.undo:  # nothing to undo: nothing to replay
        return (
            f"NOT REPLAYED {record.id} ({record.description}): recorded "
            f"{rough_duration(age)} ago, more than the {rough_duration(max_age_s)} bound; the "
            f"node may have changed since. Check it, then `faultkit sweep --force` to replay "
            f"its undo steps, or delete {path} if it is already restored"
        )
    return None


def untrusted_shell(step: Mapping[str, Any], inventory: Inventory | None) -> str | None:
    """None unless ``step`` is a ``shell`` step the inventory does not vouch for; then why.

    A shell step is vouched for when its command is, exactly, the ``rollback:`` of one of
    the inventory's serving configs.
    """
    if step.get("op") != "shell":
        return None
    command = step.get("command")
    if inventory is None:
        return (f"its undo runs the shell command `{command}` and no inventory was given to "
                "vouch for it (pass --inventory with the serving config whose rollback it is)")
    rollbacks = {c.rollback for c in inventory.serving_configs.values() if c.rollback}
    if command in rollbacks:
        return None
    return (f"its undo runs the shell command `{command}`, which is not the rollback: of any "
            f"serving config in {inventory.source}")
