""":class:`LocalDocker`: a ``unix://`` engine on this machine, its kernel reached directly."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Any

from faultkit.docker import hostpid
from faultkit.platform.base import Platform
from faultkit.platform.helpers import Netns

__all__ = ["LocalDocker"]


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
                         fault_id: str) -> list[int]:
        container_id = str(self._attrs(container).get("Id") or "")
        return [pid for pid in pids if hostpid.kill(pid, container_id, sig, name=container)]

    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        return hostpid.wait_gone(pids, within_s)

    def wait_stopped(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        return hostpid.wait_stopped(pids, within_s)
