"""Every fault acts on its node through :class:`faultkit.platform.Platform` only.

Each fault that touches its node's container runs its admission check, ``_prepare`` and
``_apply`` against a platform test double. Everything else a fault could reach the node by
is a trap that fails the test: the fault module's own ``docker_host`` (what ``self.docker``
used to be), any :class:`~faultkit.docker.host.DockerHost` the fault would build itself (its
engine client), and this machine's kernel (``/proc`` PIDs, ``kill``, ``nsenter``). The
double's verbs record what they were asked, so each case also proves the fault did act.
A ``KubernetesPlatform`` then needs nothing but the interface.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from faultkit.docker import hostpid
from faultkit.docker.containers import ContainerSpec, state_from_attrs
from faultkit.docker.host import DockerHost
from faultkit.faults import base, make_fault, partition
from faultkit.faults.host import HostRestart
from faultkit.faults.rollout import Rollout
from faultkit.inventory import Inventory, ServingConfig
from faultkit.journal import FaultJournal
from faultkit.model.kinds import FAULTS
from faultkit.platform import HelperNetns, Netns, Platform, netns
from tests.unit.faults_fake import node

ENGINE = "tcp://10.0.0.2:2375"
CID = "57bcf44c5334775ec266460cb636beb7bb6712995bf06efec2d9f1b3fa9de32c"
PID = 4242


class NodeEngine:
    """The node's Docker engine as the double reaches it: reads answer from data (a running
    container publishing the node's port on every address), and every call is recorded."""

    def __init__(self) -> None:
        self.url = ENGINE
        self.calls: list[str] = []
        self.down = False  # after a stop, kill or crash: the container has exited

    def inspect(self, name: str) -> dict[str, Any]:
        self.calls.append("inspect")
        return {"Id": CID, "Name": f"/{name}", "Image": "img", "RestartCount": 0,
                "State": {"Status": "exited" if self.down else "running",
                          "Running": not self.down, "Pid": 0 if self.down else PID,
                          "ExitCode": 137 if self.down else 0},
                "Config": {"Image": "img", "Labels": {}, "Env": [], "Cmd": ["serve"]},
                "HostConfig": {"NetworkMode": "lab", "Memory": 0, "MemorySwap": 0,
                               "RestartPolicy": {"Name": "on-failure"},
                               "PortBindings": {"8000/tcp": [{"HostIp": "", "HostPort": "9"}]}},
                "NetworkSettings": {
                    "Networks": {"lab": {"Aliases": [name]}, "extra": {"Aliases": []}},
                    "Ports": {"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "9"}]}}}

    def state(self, name: str) -> Any:
        return state_from_attrs(self.inspect(name))

    def host_pid(self, name: str) -> int:
        self.calls.append("host_pid")
        return PID

    def spec_of(self, name: str) -> ContainerSpec:
        self.calls.append("spec_of")
        return ContainerSpec(name=name, image="img", network="lab")

    def endpoints(self, name: str) -> dict[str, dict[str, Any]]:
        self.calls.append("endpoints")
        return dict(self.inspect(name)["NetworkSettings"]["Networks"])

    def memory_limits(self, name: str) -> tuple[int, int]:
        self.calls.append("memory_limits")
        return 0, 0

    def memory_usage(self, name: str) -> int:
        self.calls.append("memory_usage")
        return 512 * 1024**2

    def running_names(self, label: str | None = None) -> list[str]:
        self.calls.append("running_names")
        return ["n1"]

    def run_helper(self, image: str, command: list[str], **kw: Any) -> tuple[int, str]:
        self.calls.append(f"helper {command[0]}")
        if command[:2] == ["ip", "-o"]:  # the container's interfaces
            return 0, "1: lo: <LOOPBACK,UP>\n2: eth0@if7: <BROADCAST,UP>\n"
        return 0, ""

    def __getattr__(self, name: str) -> Any:  # pause, stop, restart, docker_kill, create, …
        def act(*args: Any, **kwargs: Any) -> None:
            self.calls.append(name)
            self.down = self.down or name in ("stop", "docker_kill")
        return act


class PlatformDouble(Platform):
    """A platform whose Docker verbs are the real ones (delegating to ``host``) and whose
    kernel verbs answer as a remote host's helpers would, recorded in ``host.calls``."""

    host: NodeEngine  # type: ignore[assignment]

    @property
    def uses_helpers(self) -> bool:
        return True

    def netns(self, container: str, fault_id: str) -> Netns:
        self.host.calls.append("netns")
        return HelperNetns(self.host, container, fault_id)  # type: ignore[arg-type]

    def processes(self, container: str, fault_id: str) -> tuple[int, list[tuple[int, str]]]:
        self.host.calls.append("processes")
        return PID, [(PID, "docker-init -- engine"), (PID + 1, "engine")]

    def signal_processes(self, container: str, pids: Sequence[int], sig: signal.Signals,
                         fault_id: str) -> list[int]:
        self.host.calls.append("signal_processes")
        self.host.down = True
        return list(pids)

    def wait_gone(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        self.host.calls.append("wait_gone")
        return True

    def wait_stopped(self, pids: Sequence[int], within_s: float, fault_id: str) -> bool:
        self.host.calls.append("wait_stopped")
        return True

    def engine_answers(self, timeout_s: float = 2.0) -> bool:
        self.host.calls.append("engine_answers")
        return False  # the host went down at once


class Bypassed(AssertionError):
    """A fault reached its node without going through the platform."""


class Trap:
    """What the fault modules' own ``docker_host`` returns: any use of it is a bypass."""

    def __getattr__(self, name: str) -> Any:
        raise Bypassed(f"a fault used DockerHost.{name} directly, not through its Platform")


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> NodeEngine:
    """The node's engine, reachable only through the platform double; every other way to
    the node (or to this machine's kernel) raises :class:`Bypassed`."""
    node_engine = NodeEngine()
    monkeypatch.setattr(base, "docker_host", lambda url: Trap())
    monkeypatch.setattr(base, "platform_for",
                        lambda url, host=None: PlatformDouble(url, node_engine))  # type: ignore[arg-type]

    def bypass(what: str) -> Any:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise Bypassed(f"a fault used {what} itself, not through its Platform")
        return refuse

    monkeypatch.setattr(DockerHost, "client", property(bypass("a DockerHost's engine client")))
    for name in ("kill", "proven_pid", "container_processes", "wait_gone"):
        monkeypatch.setattr(hostpid, name, bypass(f"hostpid.{name}"))
    monkeypatch.setattr(os, "kill", bypass("os.kill"))
    monkeypatch.setattr(netns, "_run", _helpers_only(netns._run))
    # the operator's command that restarts a host runs on this machine: not a node act
    monkeypatch.setattr(HostRestart, "_run_command", lambda self: None)
    # what a fault asks the node's HTTP endpoint is not the platform's: a partition's cut
    # watch is left out (as for a TLS endpoint), a rollout's candidate "serves" at once
    monkeypatch.setattr(partition, "CutWatch", _no_cut_watch)
    async def serves(self: Rollout) -> None:
        return None
    monkeypatch.setattr(Rollout, "_wait_candidate", serves)
    return node_engine


def _no_cut_watch(*args: Any) -> Any:
    raise ValueError("no cut watch in a unit test")


def _helpers_only(run: Any) -> Any:
    """``netns._run`` for a :class:`HelperNetns` only: ``nsenter`` here is a bypass."""
    def guarded(pid: Netns, argv: Sequence[str], **kw: Any) -> Any:
        if not isinstance(pid, HelperNetns):
            raise Bypassed(f"a fault ran {argv[0]} in netns {pid!r} itself, not through its "
                           "Platform")
        return run(pid, argv, **kw)
    return guarded


#: each fault that acts on a container: its params, and the verbs that prove it acted
CASES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "kill": ({}, {"processes", "signal_processes", "inspect"}),
    "kill_process": ({"match": "engine"}, {"processes", "signal_processes", "wait_gone"}),
    "stop": ({}, {"stop"}),
    "restart": ({}, {"restart"}),
    "pause": ({}, {"pause"}),
    "stall": ({"match": "engine"}, {"processes", "signal_processes", "wait_stopped"}),
    "node_restart": ({}, {"running_names", "restart"}),
    "host_restart": ({"command": "ssh gpu-2 sudo reboot"}, {"running_names", "engine_answers"}),
    "partition": ({}, {"endpoints", "disconnect"}),
    "loss": ({"mode": "iptables"}, {"netns", "helper iptables"}),
    "bandwidth": ({}, {"netns", "helper tc"}),
    "latency": ({"mode": "netem"}, {"netns", "helper tc"}),
    "memory_squeeze": ({"limit": "32m"}, {"memory_limits", "memory_usage",
                                          "set_memory_limits"}),
    "rollout": ({"config": "next"}, {"spec_of", "remove", "create", "connect"}),
}
EXTRA_CASES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "kill docker_kill": ({"docker_kill": True}, {"host_pid", "docker_kill"}),
    "partition blackhole": ({"mode": "blackhole"}, {"netns", "helper iptables"}),
    "stall whole": ({"whole": True}, {"processes", "signal_processes", "wait_stopped"}),
}


def test_every_fault_that_acts_on_a_container_is_covered() -> None:
    """A new fault kind joins CASES (or says it acts on nothing but requests)."""
    acting = {kind for kind in FAULTS
              if make_fault(kind, _node(), inventory=_inventory(), dry_run=True,
                            **CASES.get(kind, ({}, set()))[0]).acts_on_container}
    assert acting == set(CASES)


def _node() -> Any:
    return node("n1", base_url="http://10.0.0.2:9",
                docker={"host": ENGINE, "container": "n1"})


def _inventory() -> Inventory:
    return Inventory(nodes=[_node()],
                     serving_configs={"next": ServingConfig(image="img", command=["serve"])})


@pytest.mark.parametrize("case", [*CASES, *EXTRA_CASES])
async def test_a_fault_acts_on_its_node_only_through_the_platform(
    engine: NodeEngine, tmp_path: Path, case: str,
) -> None:
    params, acted = {**CASES, **EXTRA_CASES}[case]
    fault = make_fault(case.split()[0], _node(), inventory=_inventory(),
                       journal=FaultJournal(tmp_path), **params)
    await fault._admit(fault.node_locks())  # inspect, for the base_url's proof
    await fault._prepare()
    await fault._apply()
    missing = acted - set(engine.calls)
    assert not missing, f"{case} never asked the platform for {missing}: {engine.calls}"


@pytest.mark.parametrize("kind", sorted(set(FAULTS) - set(CASES)))
async def test_a_request_fault_reads_its_container_only_through_the_platform(
    engine: NodeEngine, tmp_path: Path, kind: str,
) -> None:
    """A request fault only sends requests, but it reads the restart count before and after
    (did the node crash?): through the platform too."""
    fault = make_fault(kind, _node(), inventory=_inventory(), journal=FaultJournal(tmp_path))
    await fault._prepare()
    assert "inspect" in engine.calls
    assert fault.result["restart_count_before"] == 0
