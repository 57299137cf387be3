"""Host PIDs of containers, proven to be the container's before the harness acts on one.

``kill`` (SIGKILL from the host) and every fault that enters a container's network
namespace (``nsenter -t PID``) act on the PID Docker reports for the container's main
process. That number means something only in the Docker host's own PID namespace. On a
``tcp://`` or ``ssh://`` engine, from inside another container, or with the engine in a
VM (Docker Desktop, a socket forwarded from elsewhere), the same number names some
other process of *this* machine: a bystander. So:

- this module is used only for a node whose engine is local (:func:`is_local`: a
  ``unix://`` socket); any other goes through helper containers on its own host
  (:mod:`faultkit.platform`);
- the PID is used only after ``/proc/<pid>/cgroup`` names the container's full 64-hex id
  (:func:`proven_pid`). Docker puts every process of a container in a cgroup named after
  it (``/docker/<id>`` with the cgroupfs driver, ``/system.slice/docker-<id>.scope``
  with systemd; cgroup v1 or v2), so the check holds wherever the PID is right and fails
  wherever it names something else;
- :func:`kill` opens a pidfd first, proves the PID, then signals through the pidfd, so a
  PID reused meanwhile by another process is never hit.

Refusals raise :class:`FaultRefused` (nothing was done) with what to do instead.
"""

from __future__ import annotations

import os
import select
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faultkit.errors import FaultError, FaultRefused

#: where the kernel's process table is read (tests point it at a fake)
PROC = Path("/proc")


def is_local(url: str) -> bool:
    """Whether the Docker engine at ``url`` can be on this machine (a ``unix://`` socket)."""
    return url.startswith("unix://")


def proven_pid(attrs: Mapping[str, Any]) -> int:
    """The host PID of the main process of the container ``attrs`` (``docker inspect``).

    Raises :class:`FaultRefused` when ``/proc/<pid>/cgroup`` does not name the container's
    id, :class:`FaultError` when the container has no process (not running).
    """
    name = str(attrs.get("Name") or "?").lstrip("/")
    state = attrs.get("State") or {}
    pid = int(state.get("Pid") or 0)
    if pid <= 0:
        raise FaultError(f"container {name!r} is not running (status "
                         f"{state.get('Status', 'unknown')}): it has no process to act on")
    _check(pid, str(attrs.get("Id") or ""), name)
    return pid


def kill(pid: int, container_id: str, sig: int = signal.SIGKILL, *, name: str = "?") -> bool:
    """Send ``sig`` to ``pid`` if it is (still) a process of ``container_id``; whether it
    was sent (``False``: the process had already exited).

    Through a pidfd where the kernel has them (Linux 5.3+): it is opened before the check,
    so the signal reaches the process that was checked or no process at all. A process
    that exits between a listing and its signal is no refusal: a fault's first signal may
    end its siblings (an engine core dies with its API server), and a resume need not
    reach a process that is gone.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfd: check, then signal by number
        _check(pid, container_id, name)
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True
    try:
        if _exited(fd):
            return False
        try:
            _check(pid, container_id, name)
        except FaultRefused:
            if _exited(fd):  # it exited while its cgroup was read
                return False
            raise
        try:
            signal.pidfd_send_signal(fd, sig)
        except ProcessLookupError:
            return False
        return True
    finally:
        os.close(fd)


def _exited(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` has exited (its pidfd polls readable)."""
    readable, _, _ = select.select([pidfd], [], [], 0)
    return bool(readable)


def _check(pid: int, container_id: str, name: str) -> None:
    """Raise :class:`FaultRefused` unless ``/proc/<pid>/cgroup`` names ``container_id``."""
    path = PROC / str(pid) / "cgroup"
    try:
        cgroups = path.read_text()
    except OSError as exc:
        found = f"it cannot be read ({exc.strerror or exc})"
    else:
        if len(container_id) == 64 and container_id in cgroups:
            return
        first = next((line for line in cgroups.splitlines() if line.strip()), "nothing")
        found = f"it names {first.strip()!r}, not the container's id"
    raise FaultRefused(
        f"refused: host pid {pid} is not proven to be container {name!r} "
        f"({container_id[:12] or 'no id'}): {path}: {found}. faultkit must run on the node's "
        "Docker host itself, in its PID namespace (not inside a container, not against an "
        "engine in a VM or behind a forwarded socket). Nothing was done."
    )


def container_processes(container_id: str) -> list[tuple[int, str]]:
    """Every process of ``container_id`` (its full 64-hex id) as (host PID, command line),
    lowest PID first: the processes whose ``/proc/<pid>/cgroup`` names the container.

    Read from the kernel's process table, not from Docker (``docker top`` runs ``ps``
    inside a namespace view faultkit would have to trust); a process that exits while it
    is read is skipped. Needs the node's own host (:func:`is_local`)."""
    if len(container_id) != 64:
        return []
    found: list[tuple[int, str]] = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if container_id not in (entry / "cgroup").read_text():
                continue
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # exited meanwhile, or not ours to read
            continue
        found.append((int(entry.name), raw.replace(b"\0", b" ").decode(errors="replace").strip()))
    return sorted(found)


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process: in the process table and not a zombie (a dead
    process its parent has not reaped yet is dead for this purpose)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[:1]
    return bool(state) and state[0] not in ("Z", "X")


def stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (state ``T``; ``t`` when traced): a SIGSTOP
    took hold, and the process runs nothing until a SIGCONT."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


def wait_stopped(pids: Sequence[int], within_s: float) -> bool:
    """Whether every process of ``pids`` is :func:`stopped` within ``within_s`` (polled
    every 10 ms)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if all(stopped(pid) for pid in pids):
            return True
        time.sleep(0.01)
    return all(stopped(pid) for pid in pids)


def wait_gone(pids: Sequence[int], within_s: float) -> bool:
    """Whether every process of ``pids`` has exited within ``within_s`` (polled every 10 ms)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(running(pid) for pid in pids):
            return True
        time.sleep(0.01)
    return not any(running(pid) for pid in pids)
