"""The sweep: revert every fault a dead harness process left applied.

:func:`sweep` walks the journal's unreverted records whose owning process is gone (its
liveness lock is free), takes each record's lock, runs its undo steps in order (the same
steps a normal revert runs; each is idempotent) and marks it reverted. Faults owned by a
*live* process (another harness running right now, or this process) are left alone.
A record whose steps fail stays unreverted and is reported, so the next sweep retries it.

It is idempotent: a second sweep finds nothing to do. The pytest plugin and
``faultkit inject`` call it at start; ``faultkit sweep`` runs it by hand.
"""

from __future__ import annotations

import logging

from faultkit.faults import undo
from faultkit.journal import FaultJournal

log = logging.getLogger(__name__)


def sweep(journal: FaultJournal | None = None) -> list[str]:
    """Revert every orphaned fault; return one line per thing done (empty: nothing to do)."""
    journal = journal if journal is not None else FaultJournal()
    lines: list[str] = []
    for path in journal.corrupt():
        lines.append(f"warning: unreadable journal record {path} (left for inspection)")
    for record in journal.orphans():
        with journal.claim(record.id) as claimed:
            if claimed is None:
                continue  # taken by its (live) owner or another sweeper meanwhile
            errors = []
            done = []
            for step in claimed.undo:
                try:
                    done.append(undo.run_step(step))
                except Exception as exc:  # keep going: the other steps may still apply
                    errors.append(f"{step.get('op')}: {exc}")
            if errors:
                lines.append(
                    f"FAILED to revert {claimed.id} ({claimed.description}): "
                    f"{'; '.join(errors)} — left in the journal, run `faultkit sweep` again"
                )
                continue
            # mark while still holding the claim, then let the claim release the lock
            journal.update_reverted(claimed, note="reverted by sweep")
            summary = "; ".join(done) or "nothing to undo"
            lines.append(f"reverted {claimed.id} ({claimed.description}): {summary}")
            log.info("sweep: %s", lines[-1])
    journal.prune()
    return lines
