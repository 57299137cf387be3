"""The fault journal: what every fault did and how to undo it, on disk *before* it acts.

Layout: ``$FAULTKIT_HOME/journal/`` (``FAULTKIT_HOME`` defaults to ``~/.cache/faultkit``)
holds one JSON file per fault that may still need its undo, ``<fault-id>.json``, a liveness
lock ``<fault-id>.lock``, and one node lock per fault target, ``node-<hash>.lock``
(:mod:`.nodelock`). A reverted record moves to ``reverted/<fault-id>.json`` (kept
for the record, pruned after a week): what every inject and every sweep reads, the
unreverted records, is the top directory alone, so its cost does not grow with the
machine's history (a CI machine's journal held 1,340 reverted records, read on every
inject, in the event loop that also runs the load: a 4.2 s stall of the load client).

Permissions: the journal says what to run to undo a fault (and a rollout's record holds
the previous container's environment), so only its owner may read or write it. The
directory is created (or tightened to) mode 0700 and must be a real directory owned by
this user, not a symlink; record, temporary and lock files are created 0600 with
``O_NOFOLLOW`` (temporary files also ``O_EXCL``, under a fresh random name), and records
are read with ``O_NOFOLLOW``, so a symlink planted in the journal is never followed.

Contract:

- :meth:`FaultJournal.begin` writes the record (state ``applying``) with its revert steps
  as *data* (see :mod:`faultkit.faults.undo`) and fsyncs it before returning; the fault
  acts only afterwards. The owner keeps an exclusive ``flock`` on the record's lock file
  while the fault is applied, so another process can tell a live fault from one whose
  harness died: the kernel drops the lock when the process dies, however it dies.
- Every write is atomic: a temporary file is written, fsync'd, renamed over the record,
  and the directory is fsync'd. A crash mid-write leaves the old record (or a stray
  ``.tmp`` file that readers ignore), never a torn one. A record that is unreadable anyway
  (disk damage, manual edits) is moved aside to ``<id>.json.corrupt`` and reported.
- :meth:`FaultJournal.orphans` lists unreverted records whose owner is gone; the sweep
  (:func:`faultkit.sweep.sweep`) takes each one's lock while it reverts it, so two
  sweeping processes never revert the same record twice.
- :attr:`FaultJournal.nodes` (:class:`~faultkit.journal.nodelock.NodeLocks`) holds the node locks,
  one fault per node at a time (:mod:`faultkit.faults.locks`); :meth:`FaultJournal.release`
  drops those a record names along with its liveness lock, as a dying process would.

Times are Unix epoch seconds.
"""

from faultkit.journal.nodelock import FILE_MODE, NodeHolder
from faultkit.journal.record import JournalRecord
from faultkit.journal.store import DIR_MODE, FaultJournal, default_journal_dir

__all__ = ["DIR_MODE", "FILE_MODE", "FaultJournal", "JournalRecord", "NodeHolder",
           "default_journal_dir"]
