"""Node locks on disk: one exclusive ``flock`` file per fault target, naming its holder.

:class:`NodeLocks` keeps the files ``node-<16 hex>.lock`` in a directory (the fault
journal's: :attr:`faultkit.journal.FaultJournal.nodes`), under the journal's rules: files
0600, opened with ``O_NOFOLLOW`` (a planted symlink is refused, never followed). Keys are
opaque strings (:func:`faultkit.faults.locks.lock_key` builds them from a node's Docker
host and container); the file name is a hash of the key.

Contract:

- :meth:`NodeLocks.take` takes the lock and writes its :class:`NodeHolder` (node, fault
  id, kind, pid, epoch time taken) into the file; when another process, another
  :class:`NodeLocks` of this process, or this one holds it, it returns that holder instead.
- The kernel drops a ``flock`` when its holder dies, however it dies: a dead holder frees
  the lock at once, and the holder left written in the file is then ignored.
- :meth:`NodeLocks.holders` lists the locks held now, by any process. It probes each
  free-looking lock by taking it for an instant, which is why :meth:`take` retries a
  contended lock for ~0.1 s before reporting it held.

Also home to the private-file primitives the journal shares (:func:`try_flock`,
:func:`read_nofollow`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_fixed

from faultkit.errors import JournalError, JournalUnwritable
from faultkit.model.durations import rough_duration

#: the mode of every file in the journal directory
FILE_MODE = 0o600
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: how a contended node lock is retried before its holder is reported
_ATTEMPTS = 5
_WAIT_S = 0.02


@dataclass(frozen=True, slots=True)
class NodeHolder:
    """Who holds a node's lock, as its holder wrote it into the lock file.

    ``t_locked`` is epoch seconds. A holder that could not be read (it is just taking the
    lock, or the file was emptied) has ``fault_id`` ``"unknown"`` and ``pid`` 0.
    """

    node: str
    fault_id: str
    kind: str
    pid: int
    t_locked: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> NodeHolder | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(node=str(data["node"]), fault_id=str(data["fault_id"]),
                       kind=str(data["kind"]), pid=int(data["pid"]),
                       t_locked=float(data["t_locked"]))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self, now: float | None = None) -> str:
        """``node n1 locked by fault pause-n1-1a2b3c4d (pause, pid 4242, 12 s)``."""
        if self.fault_id == "unknown":
            return f"node {self.node} locked by a harness process that is just taking it"
        age = max(0.0, (time.time() if now is None else now) - self.t_locked)
        return (f"node {self.node} locked by fault {self.fault_id} ({self.kind}, pid "
                f"{self.pid}, {rough_duration(age)})")


class NodeLocks:
    """The node locks in ``directory``, and those this instance holds."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._held: dict[str, tuple[int, NodeHolder]] = {}  # key -> (fd, holder)

    def path(self, key: str) -> Path:
        """``node-<16 hex>.lock``: keys name Docker hosts and containers, not file names."""
        return self.directory / f"node-{hashlib.sha256(key.encode()).hexdigest()[:16]}.lock"

    def take(self, key: str, holder: NodeHolder) -> NodeHolder | None:
        """Take the lock ``key`` for ``holder``: None when taken (held until :meth:`drop` or
        the process dies), else the current holder, read from the lock file."""
        if key in self._held:
            return self._held[key][1]
        path = self.path(key)
        retrying = Retrying(stop=stop_after_attempt(_ATTEMPTS), wait=wait_fixed(_WAIT_S),
                            retry=retry_if_result(lambda fd: fd is None),
                            retry_error_callback=lambda _state: None)
        fd: int | None = retrying(try_flock, path)
        if fd is None:
            return _read_holder(path, holder.node)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder.to_json(), sort_keys=True).encode(), 0)
        except OSError as exc:
            os.close(fd)
            raise JournalUnwritable(
                f"cannot write the node lock {path}: {exc}; nothing was done on the node "
                "(free space on the journal's filesystem, or set FAULTKIT_HOME to a writable "
                "directory)"
            ) from exc
        self._held[key] = (fd, holder)
        return None

    def drop(self, key: str) -> None:
        """Drop the lock ``key`` if held here (the file is emptied first: no stale holder)."""
        held = self._held.pop(key, None)
        if held is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(held[0], 0)
            os.close(held[0])

    def holders(self) -> list[NodeHolder]:
        """The holders of every node lock held now (by any process), oldest first."""
        holders = [holder for _, holder in self._held.values()]
        mine = {self.path(key) for key in self._held}
        for path in sorted(self.directory.glob("node-*.lock")):
            if path in mine:
                continue
            fd = try_flock(path)
            if fd is not None:  # free: nobody holds it
                os.close(fd)
                continue
            holders.append(_read_holder(path, "?"))
        return sorted(holders, key=lambda h: h.t_locked)

    def close(self) -> None:
        for key in list(self._held):
            self.drop(key)


def try_flock(path: Path) -> int | None:
    """An fd holding ``path``'s exclusive flock (created 0600, no symlink), or None if held."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | CLOEXEC, FILE_MODE)
    except OSError as exc:  # ELOOP: a symlink was planted where the lock belongs
        raise JournalError(
            f"cannot open the lock file {path}: {exc}; "
            "it should be a plain file: remove it and run again"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_nofollow(path: Path) -> bytes:
    """The file's bytes; a symlink raises OSError (ELOOP) instead of being followed."""
    fd = os.open(path, os.O_RDONLY | NOFOLLOW | CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_holder(path: Path, node: str) -> NodeHolder:
    """The holder written in the node lock ``path``; "unknown" when it cannot be read."""
    try:
        holder = NodeHolder.from_json(json.loads(read_nofollow(path) or b"null"))
    except (OSError, ValueError):
        holder = None
    return holder or NodeHolder(node=node, fault_id="unknown", kind="?", pid=0, t_locked=0.0)
