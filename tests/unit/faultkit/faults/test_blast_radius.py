"""Blast-radius refusals before acting, on fake `docker inspect` data (no Docker):
host-PID faults only on the node's own host with a PID proven by /proc/<pid>/cgroup,
network faults never in a shared network namespace, node_restart only on inventory nodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from faultkit.docker import hostpid
from faultkit.docker.host import state_from_attrs
from faultkit.errors import FaultError, FaultRefused
from faultkit.faults import base, make_fault, undo
from faultkit.faults.network import Loss
from faultkit.inventory import Inventory
from faultkit.journal import FaultJournal
from faultkit.platform import netns, remote
from tests.unit.faults_fake import node

SOCK = "unix:///var/run/docker.sock"
CID = "57bcf44c5334775ec266460cb636beb7bb6712995bf06efec2d9f1b3fa9de32c"
OTHER = "0" * 64
PID = 4242


class FakeHost:
    """A Docker host answering `inspect` from data; it records every call that would act."""

    def __init__(self, url: str = SOCK, *, pid: int = PID, network_mode: str = "lab",
                 running: list[str] | None = None) -> None:
        self.url = url
        self.pid = pid
        self.network_mode = network_mode
        self.running = running or []
        self.acted: list[str] = []
        self.labels_asked: list[str | None] = []

    def inspect(self, name: str) -> dict[str, Any]:
        # it publishes the port of the nodes' base_url (http://127.0.0.1:9): it serves them
        return {"Id": CID, "Name": f"/{name}",
                "State": {"Status": "running", "Running": True, "Pid": self.pid},
                "HostConfig": {"NetworkMode": self.network_mode, "PortBindings": {
                    "8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": "9"}]}},
                "NetworkSettings": {"Networks": {"lab": {}}}}

    def state(self, name: str) -> Any:
        return state_from_attrs(self.inspect(name))

    def running_names(self, label: str | None = None) -> list[str]:
        self.labels_asked.append(label)
        return list(self.running)

    def __getattr__(self, name: str) -> Any:  # pause, restart, disconnect, docker_kill, …
        def act(*args: Any, **kwargs: Any) -> None:
            self.acted.append(name)
        return act


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    proc = tmp_path / "proc"
    monkeypatch.setattr(hostpid, "PROC", proc)
    return proc


def cgroup(proc: Path, pid: int, text: str) -> None:
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "cgroup").write_text(text)


def use_host(monkeypatch: pytest.MonkeyPatch, host: FakeHost) -> FakeHost:
    monkeypatch.setattr(base, "docker_host", lambda url: host)
    return host


def docker_node(name: str = "n1", host: str = SOCK, container: str | None = None,
                **kw: Any) -> Any:
    return node(name, docker={"host": host, "container": container or name}, **kw)


# proving a host PID ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    f"12:memory:/docker/{CID}\n0::/docker/{CID}\n",                  # cgroupfs, v1 + v2
    f"0::/system.slice/docker-{CID}.scope\n",                        # systemd, v2
])
def test_a_pid_whose_cgroup_names_the_container_is_proven(fake_proc: Path, text: str) -> None:
    cgroup(fake_proc, PID, text)
    assert hostpid.proven_pid(FakeHost().inspect("engine")) == PID


@pytest.mark.parametrize(("text", "found"), [
    ("0::/user.slice/session-3.scope\n", "it names '0::/user.slice/session-3.scope'"),
    (f"0::/docker/{OTHER}\n", "not the container's id"),
    (None, "cannot be read"),
])
def test_an_unproven_pid_is_refused(fake_proc: Path, text: str | None, found: str) -> None:
    if text is not None:
        cgroup(fake_proc, PID, text)
    with pytest.raises(FaultRefused, match="not proven to be container 'engine'") as refused:
        hostpid.proven_pid(FakeHost().inspect("engine"))
    assert found in str(refused.value)
    assert "Nothing was done" in str(refused.value)


def test_a_container_without_a_process_is_an_error_not_a_refusal() -> None:
    attrs = {"Id": CID, "Name": "/engine", "State": {"Status": "exited", "Pid": 0}}
    with pytest.raises(FaultError, match="is not running") as failed:
        hostpid.proven_pid(attrs)
    assert not isinstance(failed.value, FaultRefused)


def test_kill_signals_only_a_proven_pid(fake_proc: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cgroup(fake_proc, child.pid, f"0::/docker/{OTHER}\n")
        with pytest.raises(FaultRefused):
            hostpid.kill(child.pid, CID, signal.SIGKILL, name="engine")
        assert child.poll() is None  # the bystander lives
        cgroup(fake_proc, child.pid, f"0::/docker/{CID}\n")
        hostpid.kill(child.pid, CID, signal.SIGKILL, name="engine")
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_a_process_that_exited_before_its_signal_is_skipped_not_refused(
    fake_proc: Path, reaped: bool,
) -> None:
    """A fault's first signal may end its siblings (an engine core exits with its API
    server): the next pid of the listing is gone, which is no refusal — and never a hit."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    cgroup(fake_proc, child.pid, f"0::/docker/{CID}\n")
    if reaped:
        child.wait(10)
    else:
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(child.pid) == "Z"
    try:
        assert hostpid.kill(child.pid, CID, signal.SIGKILL, name="engine") is False
    finally:
        child.wait(10)


def test_the_remote_signal_script_skips_a_gone_pid_and_refuses_a_bystander() -> None:
    """The helper's script, run here against real processes: one gone, one not the
    container's (it lives), none signalled."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait(10)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = subprocess.run([sys.executable, "-c", remote._PROC_SCRIPT, "signal", CID,
                              str(int(signal.SIGKILL)), str(gone.pid), str(bystander.pid)],
                             capture_output=True, text=True, timeout=30, check=True)
        assert json.loads(run.stdout) == {"not_proven": [bystander.pid], "gone": [gone.pid]}
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait(10)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


# host-PID faults need the node's own host -------------------------------------------------

class HelperHost(FakeHost):
    """A remote Docker host whose helper containers answer as the platform's scripts do."""

    def __init__(self, url: str = "tcp://10.0.0.2:2375") -> None:
        super().__init__(url)
        self.helpers: list[dict[str, Any]] = []

    def run_helper(self, image: str, command: list[str], **kw: Any) -> tuple[int, str]:
        self.helpers.append({"image": image, "command": command, **kw})
        if command[:2] == ["python3", "-c"]:
            mode = command[3]
            return 0, json.dumps({"list": [[PID, "docker-init -- engine"], [PID + 1, "engine"]],
                                  "signal": {"not_proven": []}, "wait": {"gone": True}}[mode])
        return 0, ""  # iptables / tc / ip in the target's netns


@pytest.fixture
def nothing_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test if it signals a process of this machine or runs nsenter."""
    acted: list[str] = []

    def refuse(name: str) -> Any:
        def act(*args: Any, **kwargs: Any) -> Any:
            acted.append(name)
            raise AssertionError(f"{name} on this machine for a remote node")
        return act

    for name in ("kill", "proven_pid", "container_processes", "wait_gone"):
        monkeypatch.setattr(hostpid, name, refuse(f"hostpid.{name}"))
    monkeypatch.setattr(os, "kill", refuse("os.kill"))
    monkeypatch.setattr(subprocess, "run", refuse("subprocess.run (nsenter)"))
    return acted


@pytest.mark.parametrize("url", ["tcp://10.0.0.2:2375", "ssh://gpu-box"])
@pytest.mark.parametrize(("kind", "params"), [
    ("kill", {}), ("loss", {}), ("bandwidth", {}), ("latency", {}),
    ("partition", {"mode": "blackhole"}), ("kill_process", {"match": "engine"}),
])
def test_host_side_faults_are_allowed_on_remote_hosts(url: str, kind: str,
                                                      params: dict[str, Any]) -> None:
    """Issue 16: they act there through helper containers (faultkit.platform)."""
    make_fault(kind, docker_node(host=url), dry_run=True, **params)


async def test_a_remote_host_is_acted_on_through_helpers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, nothing_on_this_machine: list[str],
) -> None:
    host = HelperHost()
    use_host(monkeypatch, host)
    remote = docker_node(host=host.url)
    kill = make_fault("kill", remote, journal=FaultJournal(tmp_path))
    platform = kill.platform
    assert platform.uses_helpers
    assert platform.crash("n1", kill.id) == PID
    listed, signalled = host.helpers
    assert listed["pid_mode"] == "host" and signalled["pid_mode"] == "host"
    assert signalled["command"][3:] == ["signal", CID, str(int(signal.SIGKILL)), str(PID)]
    assert all(h["labels"] == {"faultkit.owner": "helper", "faultkit.fault": kill.id}
               for h in host.helpers)
    # a netns command runs in a helper joined to the container's namespace, with NET_ADMIN
    loss = make_fault("loss", remote, journal=FaultJournal(tmp_path), percent=100,
                      mode="iptables")
    assert isinstance(loss, Loss)
    where = await loss._pid()
    netns.add_rule(where, "filter", "INPUT", ["-j", "DROP"], loss.id)
    joined = host.helpers[-1]
    assert joined["network_mode"] == "container:n1" and "NET_ADMIN" in joined["cap_add"]
    assert joined["command"][:3] == ["iptables", "-w", "5"]
    # every such fault journals the removal of its helpers, for the sweep
    assert loss._sweep_steps() == [{"op": "helpers_remove", "host": host.url, "container": None,
                                    "label": f"faultkit.fault={loss.id}"}]
    assert nothing_on_this_machine == []


async def test_a_local_host_uses_no_helper(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    use_host(monkeypatch, HelperHost(SOCK))
    fault = make_fault("kill", docker_node(), journal=FaultJournal(tmp_path))
    assert not fault.platform.uses_helpers and fault._sweep_steps() == []


async def test_kill_with_an_unproven_pid_is_refused_before_the_journal(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    cgroup(fake_proc, PID, f"0::/docker/{OTHER}\n")  # the PID is someone else's here
    host = use_host(monkeypatch, FakeHost())
    fault = make_fault("kill", docker_node(), journal=FaultJournal(tmp_path))
    with pytest.raises(FaultRefused, match="host pid 4242 is not proven"):
        await fault.inject()
    assert host.acted == []
    assert FaultJournal(tmp_path).records() == []
    assert FaultJournal(tmp_path).nodes.holders() == []


# network faults never in a shared network namespace --------------------------------------

@pytest.mark.parametrize(("mode", "shared"), [
    ("host", "the host's own"), ("container:sidecar", "container 'sidecar'"),
])
@pytest.mark.parametrize(("kind", "params"), [
    ("partition", {"mode": "refuse"}), ("partition", {"mode": "blackhole"}),
    ("loss", {}), ("bandwidth", {}), ("latency", {}),
])
async def test_network_faults_refuse_a_shared_network_namespace(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    mode: str, shared: str, kind: str, params: dict[str, Any],
) -> None:
    cgroup(fake_proc, PID, f"0::/docker/{CID}\n")
    host = use_host(monkeypatch, FakeHost(network_mode=mode))
    fault = make_fault(kind, docker_node(), journal=FaultJournal(tmp_path), **params)
    # inject() refuses first: in a shared namespace the base_url cannot be proven the node's
    with pytest.raises(FaultRefused, match="faultkit cannot prove the fault and the load"):
        await fault.inject()
    # and the fault's own check, read-only, refuses it as well
    with pytest.raises(FaultRefused, match=f"network mode '{mode}'") as refused:
        await fault._prepare()
    assert f"its network namespace is {shared}" in str(refused.value)
    assert host.acted == []
    assert FaultJournal(tmp_path).records() == []


async def test_netns_fault_with_an_unproven_pid_is_refused(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    cgroup(fake_proc, PID, "0::/init.scope\n")
    host = use_host(monkeypatch, FakeHost())
    fault = make_fault("loss", docker_node(), journal=FaultJournal(tmp_path))
    with pytest.raises(FaultRefused, match="host pid 4242 is not proven"):
        await fault.inject()
    assert host.acted == []
    assert FaultJournal(tmp_path).records() == []


def test_undo_never_enters_an_unproven_or_remote_netns(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    step = {"op": "qdisc_delete", "host": SOCK, "container": "engine"}
    cgroup(fake_proc, PID, "0::/init.scope\n")
    monkeypatch.setattr(undo, "_host", lambda s: FakeHost())
    with pytest.raises(FaultRefused, match="not proven"):
        undo.run_step(step)
    remote = HelperHost()
    monkeypatch.setattr(undo, "_host", lambda s: remote)
    assert "removed fa17: qdisc" in undo.run_step({**step, "host": remote.url})
    assert remote.helpers and remote.helpers[0]["network_mode"] == "container:engine"


# node_restart restarts inventory nodes only -----------------------------------------------

def _host_inventory() -> Inventory:
    return Inventory(nodes=[
        docker_node("a"), docker_node("b"),
        docker_node("c", host="tcp://10.0.0.2:2375", container="prometheus"),
    ])


@pytest.mark.parametrize(("params", "restarted", "left"), [
    ({}, ["a", "b"], ["other-team", "prometheus"]),
    ({"all_containers": True}, ["a", "b", "prometheus", "other-team"], None),
])
async def test_node_restart_restarts_only_inventory_nodes_unless_all_containers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    params: dict[str, Any], restarted: list[str], left: list[str] | None,
) -> None:
    host = use_host(monkeypatch, FakeHost(running=["a", "b", "prometheus", "other-team"]))
    inv = _host_inventory()
    fault = make_fault("node_restart", "a", inventory=inv, journal=FaultJournal(tmp_path),
                       label="tier=gpu", **params)
    steps = await fault._prepare()  # read-only: what inject would restart and journal
    assert fault.result["containers"] == restarted
    assert fault.result.get("not_restarted") == left
    assert [s["container"] for s in steps] == restarted
    assert host.labels_asked == ["tier=gpu"]
    assert host.acted == []


def test_node_restart_describes_its_scope() -> None:
    inv = _host_inventory()
    plan = make_fault("node_restart", "a", inventory=inv, dry_run=True).describe()
    assert "restart the inventory nodes' containers (a, b) on unix://" in plan
    everything = make_fault("node_restart", "a", inventory=inv, dry_run=True,
                            all_containers="true").describe()
    assert "restart ALL containers on unix://" in everything


# host_restart: never this machine, never without the operator's command ------------------

def test_host_restart_needs_a_command_and_another_host() -> None:
    remote = docker_node(host="tcp://10.0.0.2:2375")
    with pytest.raises(FaultRefused, match="needs command="):
        make_fault("host_restart", remote, dry_run=True)
    with pytest.raises(FaultRefused, match="this machine's own"):
        make_fault("host_restart", docker_node(), dry_run=True, command="true")
    neighbours = Inventory(nodes=[remote, docker_node("b", host=remote.docker.host,
                                                      faults=["kill"])])
    with pytest.raises(FaultRefused, match="would also take down node 'b'"):
        make_fault("host_restart", remote, inventory=neighbours, dry_run=True, command="true")
    fault = make_fault("host_restart", remote, dry_run=True, command="ssh gpu-2 sudo reboot")
    assert fault._sweep_steps() == []  # nothing for the sweep to replay: never automatic


def test_the_sweep_removes_only_helpers_older_than_any_helper_lives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from faultkit import sweep as sweeping
    class Listed:
        def __init__(self, name: str, created: str) -> None:
            self.name, self.attrs = name, {"Created": created}

    class Host:
        def __init__(self) -> None:
            self.removed: list[str] = []

        def labelled(self, key: str, value: str) -> list[Listed]:
            assert (key, value) == ("faultkit.owner", "helper")
            return [Listed("old", "2026-12-03T08:00:00Z"),
                    Listed("busy", "2026-12-03T08:09:30Z")]

        def remove(self, name: str) -> None:
            self.removed.append(name)

    host = Host()
    asked: list[str] = []
    def docker_host(url: str) -> Host:
        asked.append(url)
        return host

    monkeypatch.setattr("faultkit.docker.host.docker_host", docker_host)
    inv = Inventory(nodes=[docker_node("a"), docker_node("b", host="tcp://127.0.0.1:18100")])
    now = 1_796_285_400.0  # 2026-12-03T08:10:00Z
    lines = sweeping.sweep_helpers(inv, now=now)
    assert asked == ["tcp://127.0.0.1:18100"]  # never the local engine: it has no helpers
    assert host.removed == ["old"] and lines[0].startswith("removed helper container old")
