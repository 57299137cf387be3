"""The platform seam: what a fault does on the node's own host, wherever that host is.

Most of what a fault does goes through the node's Docker API (:class:`~faultkit.docker.
DockerHost`: inspect, pause, stop, memory limits, recreate from a spec, events), and works
the same for a ``unix://``, ``tcp://`` or ``ssh://`` engine. Three things do not: sending a
*crash* signal to the container's processes (``docker kill`` is a manual stop that no
restart policy undoes), listing the container's processes, and running ``iptables``/``tc``
in the container's network namespace. They need the node's own kernel. :class:`Platform`
is that part, one object per Docker host (:func:`platform_for`):

- :class:`LocalDocker` (``unix://``): the harness runs on the node's host. Processes are
  found in this machine's ``/proc``, each PID proven to be the container's through its
  cgroup before a pidfd signals it (:mod:`faultkit.hostpid`); namespaces are entered with
  ``nsenter -t PID -n`` (:mod:`faultkit.netns`). Only an optimisation: the helpers below
  would work here too.
- :class:`RemoteDocker` (any other engine URL): nothing of this machine is used. Each act
  is a short-lived **helper container on the node's host**, created through the node's
  own Docker API from :data:`HELPER_IMAGE` (Pumba's approach): ``--pid host`` to read the
  host's process table and signal a process of the container (its cgroup names the
  container's id, checked inside the helper, then a pidfd signal), ``--network
  container:<target>`` with ``NET_ADMIN`` to run ``iptables``/``tc`` in the target's
  namespace. Helpers carry the labels :data:`faultkit.constants.LABEL_OWNER` ``=helper``
  and :data:`HELPER_LABEL` ``=<fault id>``; each is removed when it ends, and a fault that
  uses them journals a ``helpers_remove`` step, so ``faultkit sweep`` removes any that a
  killed harness left behind.

A :class:`Netns` value says *where* a :mod:`faultkit.netns` command runs: a proven host PID
(``nsenter``), ``None`` (this machine's own namespace) or a :class:`HelperNetns`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faultkit import hostpid
from faultkit.constants import LABEL_OWNER
from faultkit.docker import DockerHost, docker_host
from faultkit.errors import DockerError, FaultError, FaultRefused, FaultUnsupported

__all__ = ["HELPER_IMAGE", "HELPER_LABEL", "HelperNetns", "LocalDocker", "Netns", "Platform",
           "RemoteDocker", "platform_for"]

#: the image helper containers run: the testbed's base image plus iptables and iproute2
#: (python3 for the process helpers). It must exist on the node's host.
HELPER_IMAGE = "faultkit/tools:bookworm"
#: the label naming the fault a helper container acts for
HELPER_LABEL = "faultkit.fault"
#: how long one helper may run
HELPER_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class HelperNetns:
    """Run a command in ``container``'s network namespace on the Docker host ``host``, from
    a helper container joined to it (``--network container:<name>``, ``NET_ADMIN``)."""

    host: DockerHost
    container: str
    fault_id: str

    def run(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        code, output = _helper(self.host, self.fault_id, list(argv),
                               network_mode=f"container:{self.container}",
                               cap_add=("NET_ADMIN", "NET_RAW"))
        # a helper's output mixes stdout and stderr: both carry it
        return subprocess.CompletedProcess(list(argv), code, output, output)


#: where a netns command runs: a proven host PID (nsenter), None (this machine's own
#: namespace), or a helper container on the node's host
Netns = int | HelperNetns | None


class Platform(ABC):
    """The node-host half of the seam (see the module docstring); one per Docker host."""

    def __init__(self, url: str, host: DockerHost) -> None:
        self.url = url
        self.host = host

    @property
    @abstractmethod
    def uses_helpers(self) -> bool:
        """True when acts run in helper containers on the node's host (journal their sweep)."""

    @abstractmethod
    def netns(self, container: str, fault_id: str) -> Netns:
        """Where to run iptables/tc for ``container`` (running; its PID proven where used).

        Raises :class:`FaultError` when the container is not running, :class:`FaultRefused`
        when a local PID is not proven to be the container's."""

    @abstractmethod
    def processes(self, container: str, fault_id: str) -> tuple[int, list[tuple[int, str]]]:
        """(main PID, every process of the container as (PID, command line)), PIDs as the
        node's host sees them; refused unless each is proven to be the container's."""

    @abstractmethod
    def signal_processes(self, container: str, pids: Sequence[int], sig: signal.Signals,
               fault_id: str) -> None:
        """Send ``sig`` to each of ``pids`` that is (still) a process of ``container``: a
        crash, as the kernel or an OOM kill would end it (the restart policy applies)."""

    @abstractmethod
    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        """Whether every one of ``pids`` has exited (or is a zombie) within ``within_s``."""

    def crash(self, container: str, fault_id: str,
              sig: signal.Signals = signal.SIGKILL) -> int:
        """Signal the container's main process (``kill``: a crash); the PID signalled."""
        main, _ = self.processes(container, fault_id)
        self.signal_processes(container, [main], sig, fault_id)
        return main

    def helper_steps(self, fault_id: str) -> list[dict[str, Any]]:
        """Undo steps that remove the helpers a fault may leave behind (none locally)."""
        if not self.uses_helpers:
            return []
        return [{"op": "helpers_remove", "host": self.url, "container": None,
                 "label": f"{HELPER_LABEL}={fault_id}"}]


class LocalDocker(Platform):
    """A ``unix://`` engine on this machine: host PIDs proven by cgroup, ``nsenter``."""

    @property
    def uses_helpers(self) -> bool:
        return False

    def _attrs(self, container: str) -> dict[str, Any]:
        return self.host.inspect(container)

    def netns(self, container: str, fault_id: str) -> Netns:
        return hostpid.proven_pid(self._attrs(container))

    def processes(self, container: str, fault_id: str) -> tuple[int, list[tuple[int, str]]]:
        attrs = self._attrs(container)
        main = hostpid.proven_pid(attrs)
        return main, hostpid.container_processes(str(attrs.get("Id") or ""))

    def signal_processes(self, container: str, pids: Sequence[int], sig: signal.Signals,
               fault_id: str) -> None:
        container_id = str(self._attrs(container).get("Id") or "")
        for pid in pids:
            hostpid.kill(pid, container_id, sig, name=container)

    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        return hostpid.wait_gone(pids, within_s)


#: run in a ``--pid host`` helper: the container's processes as JSON, each named by a cgroup
#: line holding the container's id; or signal some of them through a pidfd after the same
#: check; or wait until PIDs are gone. argv: MODE CONTAINER_ID [SIGNAL|WITHIN_S] [PID...]
_PROC_SCRIPT = r"""
import json, os, signal, sys, time
mode, cid = sys.argv[1], sys.argv[2]
def ours(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return len(cid) == 64 and cid in f.read()
    except OSError:
        return False
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[:1] not in (["Z"], ["X"])
    except OSError:
        return False
if mode == "list":
    found = []
    for e in os.listdir("/proc"):
        if e.isdigit() and ours(e):
            try:
                with open(f"/proc/{e}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            found.append([int(e), cmd])
    print(json.dumps(sorted(found)))
elif mode == "signal":
    sig, bad = int(sys.argv[3]), []
    for pid in map(int, sys.argv[4:]):
        fd = os.pidfd_open(pid)
        try:
            if not ours(pid):
                bad.append(pid)
                continue
            signal.pidfd_send_signal(fd, sig)
        finally:
            os.close(fd)
    print(json.dumps({"not_proven": bad}))
elif mode == "wait":
    pids, deadline = list(map(int, sys.argv[4:])), time.monotonic() + float(sys.argv[3])
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.01)
    print(json.dumps({"gone": not any(alive(p) for p in pids)}))
"""


class RemoteDocker(Platform):
    """Any engine not on this machine: every host-side act in a helper container there."""

    @property
    def uses_helpers(self) -> bool:
        return True

    def _running_id(self, container: str) -> tuple[str, int]:
        attrs = self.host.inspect(container)
        state = attrs.get("State") or {}
        pid = int(state.get("Pid") or 0)
        if pid <= 0 or not state.get("Running"):
            raise FaultError(f"container {container!r} on {self.url} is not running (status "
                             f"{state.get('Status', 'unknown')}): it has no process to act on")
        return str(attrs.get("Id") or ""), pid

    def netns(self, container: str, fault_id: str) -> Netns:
        self._running_id(container)
        return HelperNetns(self.host, container, fault_id)

    def _proc(self, fault_id: str, args: list[str]) -> Any:
        code, output = _helper(self.host, fault_id, ["python3", "-c", _PROC_SCRIPT, *args],
                               pid_mode="host")
        lines = [line for line in output.splitlines() if line.strip()]
        if code != 0 or not lines:
            raise FaultError(f"helper on {self.url} ({args[0]}) failed (exit {code}): "
                             f"{output.strip()[-300:]}")
        return json.loads(lines[-1])

    def processes(self, container: str, fault_id: str) -> tuple[int, list[tuple[int, str]]]:
        container_id, main = self._running_id(container)
        found = [(int(pid), str(cmd)) for pid, cmd in self._proc(fault_id, ["list",
                                                                          container_id])]
        if main not in {pid for pid, _ in found}:
            raise FaultRefused(
                f"refused: the main process of {container!r} (pid {main} on {self.url}) is not "
                "among the processes whose cgroup names the container, as a helper container "
                "with the host's PID namespace sees them. Nothing was done.")
        return main, found

    def signal_processes(self, container: str, pids: Sequence[int], sig: signal.Signals,
               fault_id: str) -> None:
        container_id, _ = self._running_id(container)
        outcome = self._proc(fault_id, ["signal", container_id, str(int(sig)),
                                        *map(str, pids)])
        if outcome.get("not_proven"):
            raise FaultRefused(
                f"refused: pid(s) {outcome['not_proven']} on {self.url} are no longer processes "
                f"of {container!r}; not signalled")

    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        outcome = self._proc(fault_id, ["wait", "-", str(within_s), *map(str, pids)])
        return bool(outcome.get("gone"))


def _helper(host: DockerHost, fault_id: str, command: list[str], *,
            network_mode: str | None = None, pid_mode: str | None = None,
            cap_add: tuple[str, ...] = ()) -> tuple[int, str]:
    """One helper container on ``host`` run to its end (always removed)."""
    name = f"faultkit-helper-{fault_id}-{uuid.uuid4().hex[:6]}"[:120]
    labels = {LABEL_OWNER: "helper", HELPER_LABEL: fault_id}
    try:
        return host.run_helper(HELPER_IMAGE, command, name=name, labels=labels,
                               network_mode=network_mode, pid_mode=pid_mode, cap_add=cap_add,
                               timeout_s=HELPER_TIMEOUT_S)
    except DockerError as exc:
        if "no such image" not in str(exc).lower():
            raise
        raise FaultUnsupported(
            f"the Docker host {host.url} has no {HELPER_IMAGE}, the image faultkit's helper "
            f"containers run there: copy it (`docker save {HELPER_IMAGE} | docker -H "
            f"{host.url} load`; the testbed's second host gets it from testbed/host2.py)"
        ) from exc


def platform_for(url: str, host: DockerHost | None = None) -> Platform:
    """The platform of the Docker engine at ``url`` (reached through ``host``, by default
    :func:`~faultkit.docker.docker_host`): local shortcuts for a ``unix://`` engine
    (:func:`faultkit.hostpid.is_local`), helper containers for any other."""
    engine = host if host is not None else docker_host(url)
    return LocalDocker(url, engine) if hostpid.is_local(url) else RemoteDocker(url, engine)
