"""Helper containers: short-lived containers on the node's host, created through its own
Docker API, that act there for the harness (:class:`~faultkit.platform.RemoteDocker`).

Each carries the labels :data:`faultkit.constants.LABEL_OWNER` ``=helper`` and
:data:`HELPER_LABEL` ``=<fault id>``, runs :data:`HELPER_IMAGE` and is removed when it ends;
``faultkit sweep`` removes any that a killed harness left behind. A :class:`HelperNetns` is
one kind of :data:`Netns`: where a :mod:`faultkit.platform.netns` command runs.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from faultkit.constants import LABEL_OWNER
from faultkit.docker.host import DockerHost
from faultkit.errors import DockerError, FaultUnsupported

__all__ = ["HELPER_IMAGE", "HELPER_LABEL", "HELPER_TIMEOUT_S", "HelperNetns", "Netns",
           "run_helper"]

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
        code, output = run_helper(self.host, self.fault_id, list(argv),
                                  network_mode=f"container:{self.container}",
                                  cap_add=("NET_ADMIN", "NET_RAW"))
        # a helper's output mixes stdout and stderr: both carry it
        return subprocess.CompletedProcess(list(argv), code, output, output)


#: where a netns command runs: a proven host PID (nsenter), None (this machine's own
#: namespace), or a helper container on the node's host
Netns = int | HelperNetns | None


def run_helper(host: DockerHost, fault_id: str, command: list[str], *,
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
