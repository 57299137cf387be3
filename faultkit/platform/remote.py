""":class:`RemoteDocker`: any engine not on this machine, its kernel reached from helper
containers created through its own Docker API (:mod:`faultkit.platform.helpers`)."""

from __future__ import annotations

import json
import signal
from collections.abc import Sequence
from typing import Any

from faultkit.errors import FaultError, FaultRefused
from faultkit.platform.base import Platform
from faultkit.platform.helpers import HelperNetns, Netns, run_helper

__all__ = ["RemoteDocker"]


#: run in a ``--pid host`` helper: the container's processes as JSON, each named by a cgroup
#: line holding the container's id; or signal some of them through a pidfd after the same
#: check; or wait until PIDs are gone, or all stopped by a signal.
#: argv: MODE CONTAINER_ID [SIGNAL|WITHIN_S] [PID...]
_PROC_SCRIPT = r"""
import json, os, select, signal, sys, time
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
    def exited(fd):
        return bool(select.select([fd], [], [], 0)[0])
    sig, bad, gone = int(sys.argv[3]), [], []
    for pid in map(int, sys.argv[4:]):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            gone.append(pid)
            continue
        try:
            if exited(fd):
                gone.append(pid)
            elif not ours(pid):
                (gone if exited(fd) else bad).append(pid)
            else:
                try:
                    signal.pidfd_send_signal(fd, sig)
                except ProcessLookupError:
                    gone.append(pid)
        finally:
            os.close(fd)
    print(json.dumps({"not_proven": bad, "gone": gone}))
elif mode == "wait":
    pids, deadline = list(map(int, sys.argv[4:])), time.monotonic() + float(sys.argv[3])
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.01)
    print(json.dumps({"gone": not any(alive(p) for p in pids)}))
elif mode == "stopped":
    def stopped(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rpartition(")")[2].split()[:1] in (["T"], ["t"])
        except OSError:
            return False
    pids, deadline = list(map(int, sys.argv[4:])), time.monotonic() + float(sys.argv[3])
    while time.monotonic() < deadline and not all(stopped(p) for p in pids):
        time.sleep(0.01)
    print(json.dumps({"stopped": all(stopped(p) for p in pids)}))
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
        code, output = run_helper(self.host, fault_id, ["python3", "-c", _PROC_SCRIPT, *args],
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
                         fault_id: str) -> list[int]:
        container_id, _ = self._running_id(container)
        outcome = self._proc(fault_id, ["signal", container_id, str(int(sig)),
                                        *map(str, pids)])
        if outcome.get("not_proven"):
            raise FaultRefused(
                f"refused: pid(s) {outcome['not_proven']} on {self.url} are no longer processes "
                f"of {container!r}; not signalled")
        gone = {int(pid) for pid in outcome.get("gone") or []}
        return [pid for pid in pids if pid not in gone]

    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        outcome = self._proc(fault_id, ["wait", "-", str(within_s), *map(str, pids)])
        return bool(outcome.get("gone"))

    def wait_stopped(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        outcome = self._proc(fault_id, ["stopped", "-", str(within_s), *map(str, pids)])
        return bool(outcome.get("stopped"))
