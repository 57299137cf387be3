"""The fault journal: what every fault did and how to undo it, on disk *before* it acts.

Layout: ``$FAULTKIT_HOME/journal/`` (``FAULTKIT_HOME`` defaults to ``~/.cache/faultkit``)
holds one JSON file per fault, ``<fault-id>.json``, a liveness lock ``<fault-id>.lock``, and
one node lock per fault target, ``node-<hash>.lock`` (:mod:`faultkit.nodelock`).

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
- :attr:`FaultJournal.nodes` (:class:`~faultkit.nodelock.NodeLocks`) holds the node locks,
  one fault per node at a time (:mod:`faultkit.faults.locks`); :meth:`FaultJournal.release`
  drops those a record names along with its liveness lock, as a dying process would.

Times are Unix epoch seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from faultkit.constants import faultkit_home
from faultkit.errors import JournalError
from faultkit.nodelock import (
    CLOEXEC,
    FILE_MODE,
    NOFOLLOW,
    NodeHolder,
    NodeLocks,
    read_nofollow,
    try_flock,
)

__all__ = ["DIR_MODE", "FILE_MODE", "FaultJournal", "JournalRecord", "NodeHolder",
           "default_journal_dir"]

State = Literal["applying", "applied", "reverted"]

#: the journal directory's mode (its files': :data:`FILE_MODE`, 0600)
DIR_MODE = 0o700


def default_journal_dir() -> Path:
    return faultkit_home() / "journal"


@dataclass(slots=True)
class JournalRecord:
    """One fault: what it is, where, and the ordered steps that undo it."""

    id: str
    kind: str
    node: str
    description: str
    params: dict[str, Any] = field(default_factory=dict)
    undo: list[dict[str, Any]] = field(default_factory=list)
    state: State = "applying"
    pid: int = 0
    t_created: float = 0.0
    t_reverted: float | None = None
    note: str = ""
    #: the node-lock keys the fault held (:mod:`faultkit.faults.locks`); the sweep takes
    #: them while it replays the record
    node_locks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JournalRecord:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})


class FaultJournal:
    """A directory of fault records; safe to share between concurrent harness processes."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_journal_dir()
        self._held: dict[str, int] = {}  # record id -> fd holding its liveness lock
        self._node_keys: dict[str, list[str]] = {}  # record id -> the node locks it names
        self._prepare_directory()
        self.nodes = NodeLocks(self.directory)

    def _prepare_directory(self) -> None:
        """Create the directory 0700, or check an existing one and tighten it to 0700.

        Raises :class:`JournalError` when it cannot be created, is a symlink or not a
        directory, or belongs to another user.
        """
        try:
            self.directory.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                self.directory.mkdir(mode=DIR_MODE)
            info = self.directory.lstat()
        except OSError as exc:
            raise JournalError(
                f"cannot create the fault journal at {self.directory}: {exc}; "
                "set FAULTKIT_HOME to a writable directory"
            ) from exc
        if not stat.S_ISDIR(info.st_mode):
            raise JournalError(
                f"the fault journal {self.directory} is a symlink or not a directory; "
                "remove it (or set FAULTKIT_HOME elsewhere) so faultkit can create it"
            )
        if info.st_uid != os.getuid():
            raise JournalError(
                f"the fault journal {self.directory} belongs to uid {info.st_uid}, not to "
                f"this user (uid {os.getuid()}); set FAULTKIT_HOME to a directory of your own"
            )
        if stat.S_IMODE(info.st_mode) != DIR_MODE:
            try:
                os.chmod(self.directory, DIR_MODE)
            except OSError as exc:
                raise JournalError(f"cannot make {self.directory} private (0700): {exc}") from exc

    # paths ----------------------------------------------------------------------------
    def _record_path(self, record_id: str) -> Path:
        return self.directory / f"{record_id}.json"

    def path_of(self, record_id: str) -> Path:
        """Where the record ``record_id`` is stored (to name it in messages)."""
        return self._record_path(record_id)

    def _lock_path(self, record_id: str) -> Path:
        return self.directory / f"{record_id}.lock"

    # writing --------------------------------------------------------------------------
    def begin(self, record: JournalRecord) -> None:
        """Hold the record's liveness lock, then write it durably (before the fault acts)."""
        if record.id in self._held:
            raise JournalError(f"journal record {record.id} is already open in this process")
        record.pid = os.getpid()
        record.t_created = record.t_created or time.time()
        fd = self._try_lock(record.id)
        if fd is None:
            raise JournalError(f"journal record {record.id} is locked by another process")
        self._held[record.id] = fd
        self._node_keys[record.id] = list(record.node_locks)
        try:
            self._write(record)
        except BaseException:
            self._release(record.id)
            raise

    def update(self, record: JournalRecord) -> None:
        """Rewrite a record this process owns (e.g. more undo steps, state ``applied``)."""
        self._write(record)

    def mark_reverted(self, record: JournalRecord, note: str = "") -> None:
        """Durably mark ``record`` reverted and drop its liveness lock."""
        self.update_reverted(record, note)
        self._release(record.id)

    def update_reverted(self, record: JournalRecord, note: str = "") -> None:
        """Durably mark ``record`` reverted, keeping the lock (used inside :meth:`claim`)."""
        record.state = "reverted"
        record.t_reverted = time.time()
        if note:
            record.note = note
        self._write(record)

    def release(self, record_id: str) -> None:
        """Drop the liveness lock without changing the record, and the node locks it names
        (as a dying process would): the sweep may take the record now."""
        keys = self._node_keys.get(record_id, [])
        self._release(record_id)
        for key in keys:
            self.nodes.drop(key)

    def _write(self, record: JournalRecord) -> None:
        path = self._record_path(record.id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        data = json.dumps(record.to_json(), sort_keys=True).encode()
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC
            fd = os.open(tmp, flags, FILE_MODE)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise JournalError(
                f"cannot write fault journal record {path}: {exc}; "
                "the fault was not applied (check disk space and FAULTKIT_HOME)"
            ) from exc

    # locks ----------------------------------------------------------------------------
    def _try_lock(self, record_id: str) -> int | None:
        return try_flock(self._lock_path(record_id))

    def _release(self, record_id: str) -> None:
        self._node_keys.pop(record_id, None)
        fd = self._held.pop(record_id, None)
        if fd is not None:
            os.close(fd)  # closing drops the flock

    @contextlib.contextmanager
    def claim(self, record_id: str) -> Iterator[JournalRecord | None]:
        """Take a dead owner's record for reverting; yields None if it is live or already done.

        The record is re-read *after* the lock is taken, so a record its owner reverted a
        moment ago is seen as reverted.
        """
        if record_id in self._held:  # our own live fault
            yield None
            return
        fd = self._try_lock(record_id)
        if fd is None:
            yield None
            return
        self._held[record_id] = fd
        try:
            record = self.read(record_id)
            yield record if record is not None and record.state != "reverted" else None
        finally:
            self._release(record_id)

    # reading --------------------------------------------------------------------------
    def read(self, record_id: str) -> JournalRecord | None:
        """The record, or None if missing; an unreadable record is quarantined (``.corrupt``)."""
        path = self._record_path(record_id)
        try:
            raw = read_nofollow(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if not path.is_symlink():
                raise JournalError(f"cannot read fault journal record {path}: {exc}") from exc
            raw = b""  # a planted symlink: never followed, quarantined below as unreadable
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return JournalRecord.from_json(data)
        except (ValueError, TypeError):
            with contextlib.suppress(OSError):
                path.replace(path.with_name(path.name + ".corrupt"))
            return None

    def ids(self) -> list[str]:
        """Every record id on disk, oldest first (stray temp files are ignored)."""
        stamped = []
        for p in self.directory.glob("*.json"):
            if p.name.startswith("."):
                continue
            with contextlib.suppress(FileNotFoundError):  # pruned meanwhile by another process
                stamped.append((p.stat().st_mtime, p.name, p.stem))
        return [stem for _, _, stem in sorted(stamped)]

    def records(self) -> list[JournalRecord]:
        return [r for r in (self.read(i) for i in self.ids()) if r is not None]

    def corrupt(self) -> list[Path]:
        """Records that were moved aside as unreadable."""
        return sorted(self.directory.glob("*.json.corrupt"))

    def is_live(self, record_id: str) -> bool:
        """True when some process (this one included) holds the record's liveness lock."""
        if record_id in self._held:
            return True
        fd = self._try_lock(record_id)
        if fd is None:
            return True
        os.close(fd)
        return False

    def unreverted(self) -> list[JournalRecord]:
        return [r for r in self.records() if r.state != "reverted"]

    def orphans(self) -> list[JournalRecord]:
        """Unreverted records whose owning process is gone (what the sweep reverts)."""
        return [r for r in self.unreverted() if not self.is_live(r.id)]

    def prune(self, older_than_s: float = 7 * 86400) -> int:
        """Delete reverted records (and their lock files) older than ``older_than_s``."""
        cutoff = time.time() - older_than_s
        removed = 0
        for record in self.records():
            if record.state == "reverted" and (record.t_reverted or 0) < cutoff:
                with contextlib.suppress(FileNotFoundError):
                    self._record_path(record.id).unlink()
                with contextlib.suppress(FileNotFoundError):
                    self._lock_path(record.id).unlink()
                removed += 1
        for tmp in self.directory.glob(".*.tmp"):
            with contextlib.suppress(FileNotFoundError):  # renamed meanwhile by its writer
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink(missing_ok=True)
        return removed

    def close(self) -> None:
        for record_id in list(self._held):
            self._release(record_id)
        self.nodes.close()
