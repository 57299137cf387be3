"""The journal's store: :class:`FaultJournal`, a directory of records written before a
fault acts and replayed by the sweep (the contract: :mod:`faultkit.journal`)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from faultkit.constants import faultkit_home
from faultkit.errors import JournalError, JournalUnwritable
from faultkit.journal.nodelock import (
    CLOEXEC,
    FILE_MODE,
    NOFOLLOW,
    NodeLocks,
    read_nofollow,
    try_flock,
)
from faultkit.journal.record import JournalRecord

#: the journal directory's mode (its files': :data:`FILE_MODE`, 0600)
DIR_MODE = 0o700
#: the subdirectory of reverted records
REVERTED_DIR = "reverted"


def default_journal_dir() -> Path:
    return faultkit_home() / "journal"


class FaultJournal:
    """A directory of fault records; safe to share between concurrent harness processes."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_journal_dir()
        self._held: dict[str, int] = {}  # record id -> fd holding its liveness lock
        self._node_keys: dict[str, list[str]] = {}  # record id -> the node locks it names
        self.reverted_directory = self.directory / REVERTED_DIR
        self._prepare_directory(self.directory)
        self._prepare_directory(self.reverted_directory)
        self.nodes = NodeLocks(self.directory)

    @staticmethod
    def _prepare_directory(directory: Path) -> None:
        """Create ``directory`` 0700, or check an existing one and tighten it to 0700.

        Raises :class:`JournalError` when it cannot be created, is a symlink or not a
        directory, or belongs to another user.
        """
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                directory.mkdir(mode=DIR_MODE)
            info = directory.lstat()
        except OSError as exc:
            raise JournalError(
                f"cannot create the fault journal at {directory}: {exc}; "
                "set FAULTKIT_HOME to a writable directory"
            ) from exc
        if not stat.S_ISDIR(info.st_mode):
            raise JournalError(
                f"the fault journal {directory} is a symlink or not a directory; "
                "remove it (or set FAULTKIT_HOME elsewhere) so faultkit can create it"
            )
        if info.st_uid != os.getuid():
            raise JournalError(
                f"the fault journal {directory} belongs to uid {info.st_uid}, not to "
                f"this user (uid {os.getuid()}); set FAULTKIT_HOME to a directory of your own"
            )
        if stat.S_IMODE(info.st_mode) != DIR_MODE:
            try:
                os.chmod(directory, DIR_MODE)
            except OSError as exc:
                raise JournalError(f"cannot make {directory} private (0700): {exc}") from exc

    # paths ----------------------------------------------------------------------------
    def _record_path(self, record_id: str) -> Path:
        return self.directory / f"{record_id}.json"

    def _reverted_path(self, record_id: str) -> Path:
        return self.reverted_directory / f"{record_id}.json"

    def path_of(self, record_id: str) -> Path:
        """Where the record ``record_id`` is stored (to name it in messages)."""
        path = self._record_path(record_id)
        reverted = self._reverted_path(record_id)
        return reverted if not path.exists() and reverted.exists() else path

    def _lock_path(self, record_id: str) -> Path:
        return self.directory / f"{record_id}.lock"

    # writing --------------------------------------------------------------------------
    def begin(self, record: JournalRecord) -> None:
        """Hold the record's liveness lock, then write it durably (before the fault acts).

        Raises :class:`JournalUnwritable` when the record cannot be written (a full disk):
        the caller must not act, since a fault applied without its record is one no sweep
        could undo after a crash."""
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
        except JournalError as exc:  # no record, so the fault must not act
            self._release(record.id)
            raise JournalUnwritable(
                f"{exc}; the fault was not applied (check disk space and FAULTKIT_HOME)"
            ) from exc
        except BaseException:
            self._release(record.id)
            raise

    def update(self, record: JournalRecord) -> None:
        """Rewrite a record this process owns (e.g. more undo steps, state ``applied``).
        The fault has acted by then, so a record that cannot be rewritten says so: its
        undo steps on disk may be fewer than what was done."""
        try:
            self._write(record)
        except JournalError as exc:
            raise JournalError(
                f"{exc}; the fault has acted and its record on disk may lack its latest undo "
                "steps: free space, then run `faultkit sweep` and check the node by hand"
            ) from exc

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
        try:
            self._write(record)
        except JournalError as exc:
            raise JournalError(
                f"{exc}; the fault was reverted, but its record still reads applied: the "
                "next `faultkit sweep` will find it and revert it again"
            ) from exc
        self._archive(record.id)

    def _archive(self, record_id: str) -> None:
        """Move a reverted record out of the top directory (atomic rename, then both
        directories fsync'd). A crash before the rename leaves it on top, reverted: the next
        :meth:`unreverted` moves it."""
        try:
            os.replace(self._record_path(record_id), self._reverted_path(record_id))
            for directory in (self.reverted_directory, self.directory):
                _fsync_directory(directory)
        except FileNotFoundError:
            pass  # moved meanwhile by another process reading the journal
        except OSError as exc:
            raise JournalError(
                f"cannot move the reverted record {record_id} to {self.reverted_directory}: "
                f"{exc}; it stays reverted where it is (check disk space and FAULTKIT_HOME)"
            ) from exc

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
            _fsync_directory(self.directory)
        except OSError as exc:
            raise JournalError(f"cannot write fault journal record {path}: {exc}") from exc

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
        record = self._read_at(self._record_path(record_id))
        return record if record is not None else self._read_at(self._reverted_path(record_id))

    def _read_at(self, path: Path) -> JournalRecord | None:
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
        """Every record id on disk, reverted ones included, oldest first."""
        return _ids_in(self.directory, self.reverted_directory)

    def records(self) -> list[JournalRecord]:
        """Every record, reverted ones included (history: reads the whole journal)."""
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
        """The records that may still need their undo: the top directory only. A reverted
        record found there (a crash before it moved, or a journal of an older faultkit)
        is moved to ``reverted/`` now."""
        found = []
        for record_id in _ids_in(self.directory):
            record = self._read_at(self._record_path(record_id))
            if record is None:
                continue
            if record.state == "reverted":
                self._archive(record_id)
            else:
                found.append(record)
        return found

    def orphans(self) -> list[JournalRecord]:
        """Unreverted records whose owning process is gone (what the sweep reverts)."""
        return [r for r in self.unreverted() if not self.is_live(r.id)]

    def prune(self, older_than_s: float = 7 * 86400) -> int:
        """Delete reverted records (and their lock files) older than ``older_than_s``."""
        cutoff = time.time() - older_than_s
        removed = 0
        self.unreverted()  # moves any reverted record still on top into reverted/
        for record_id in _ids_in(self.reverted_directory):
            record = self._read_at(self._reverted_path(record_id))
            if record is not None and (record.t_reverted or 0) < cutoff:
                with contextlib.suppress(FileNotFoundError):
                    self._reverted_path(record.id).unlink()
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


def _ids_in(*directories: Path) -> list[str]:
    """The record ids stored in ``directories``, oldest first (temp files are ignored)."""
    stamped = []
    for directory in directories:
        for p in directory.glob("*.json"):
            if p.name.startswith("."):
                continue
            with contextlib.suppress(FileNotFoundError):  # moved or pruned meanwhile
                stamped.append((p.stat().st_mtime, p.name, p.stem))
    return [stem for _, _, stem in sorted(stamped)]


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
