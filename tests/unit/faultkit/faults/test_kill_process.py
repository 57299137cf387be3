"""``kill_process``: the engine dies inside its container. Real child processes stand in for
the container's (a fake /proc names them as the container's); only the processes whose
command line matches, and that /proc proves to be the container's, are signalled."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faultkit.docker.host import state_from_attrs
from faultkit.errors import FaultParamError, FaultRefused
from faultkit.faults import make_fault
from faultkit.faults.engine import KillProcess
from faultkit.journal import FaultJournal
from tests.unit.faultkit.faults.test_blast_radius import (
    CID,
    OTHER,
    FakeHost,
    cgroup,
    docker_node,
    fake_proc,  # noqa: F401 - the fixture
    use_host,
)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _as_process(proc: Path, child: subprocess.Popen[bytes], container: str, cmdline: str) -> None:
    cgroup(proc, child.pid, f"0::/docker/{container}\n")
    (proc / str(child.pid) / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")


@pytest.fixture
def processes(fake_proc: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:  # noqa: F811
    children = {"api": _sleeper(), "engine": _sleeper(), "bystander": _sleeper()}
    _as_process(fake_proc, children["api"], CID, "python3 -m vllm.entrypoints.api_server")
    _as_process(fake_proc, children["engine"], CID, "VLLM::EngineCore")
    # the same command line in another container: never touched
    _as_process(fake_proc, children["bystander"], OTHER, "VLLM::EngineCore")
    yield children
    for child in children.values():
        if child.poll() is None:
            child.kill()
            child.wait(10)


async def test_only_the_matching_processes_of_the_container_are_killed(
    processes: dict[str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    use_host(monkeypatch, FakeHost(pid=processes["api"].pid))
    fault = make_fault("kill_process", docker_node(base_url="http://127.0.0.1:9"),
                       journal=FaultJournal(tmp_path), match="EngineCore")
    await fault.inject()
    assert processes["engine"].wait(10) == -signal.SIGKILL
    assert processes["api"].poll() is None and processes["bystander"].poll() is None
    assert fault.result["matched"] == [{"pid": processes["engine"].pid,
                                        "cmdline": "VLLM::EngineCore"}]
    assert fault.result["restart_policy"] == "no"  # FakeHost's inspect names none


async def test_no_matching_process_is_refused_listing_the_containers_processes(
    processes: dict[str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    use_host(monkeypatch, FakeHost(pid=processes["api"].pid))
    fault = make_fault("kill_process", docker_node(base_url="http://127.0.0.1:9"),
                       journal=FaultJournal(tmp_path), match="llama-server")
    with pytest.raises(FaultRefused) as refused:
        await fault.inject()
    message = str(refused.value)
    assert "no process of container 'n1' matches /llama-server/" in message
    assert f"{processes['engine'].pid} VLLM::EngineCore" in message
    assert message.endswith("Nothing was done.")
    assert all(child.poll() is None for child in processes.values())
    assert FaultJournal(tmp_path).records() == []


@pytest.mark.parametrize(("params", "says"), [
    ({}, "must be given as match=REGEX"),
    ({"match": "("}, "is not a regular expression"),
    ({"match": "x", "signal": "SIGSTOP"}, "signal"),
])
def test_bad_parameters_are_usage_errors(params: dict[str, Any], says: str) -> None:
    with pytest.raises(FaultParamError, match=says):
        make_fault("kill_process", docker_node(), dry_run=True, **params)


def test_remote_hosts_are_no_longer_refused() -> None:
    """A tcp:// node's processes are found and signalled by a helper container on its own
    host (test_blast_radius.py beside this file,
    test_a_remote_host_is_acted_on_through_helpers)."""
    make_fault("kill_process", docker_node(host="tcp://10.0.0.2:2375"), dry_run=True,
               match="x")


@pytest.mark.parametrize(("policy", "code", "says"), [
    ("on-failure", 0, "'on-failure' did not bring it back (on-failure never restarts an exit 0)"),
    ("no", 3, "exited 3 (exited) and its restart policy 'no' did not bring it back"),
])
def test_a_container_left_down_is_the_finding(policy: str, code: int, says: str) -> None:
    fault = make_fault("kill_process", docker_node(), dry_run=True, match="x")
    assert isinstance(fault, KillProcess)
    fault.result["restart_policy"] = policy
    fault._stayed_down("exited", code)
    assert says in fault.result["never_restarted"] and fault.result["exit_code"] == code


async def test_the_init_carrying_the_engines_command_line_is_spared(
    fake_proc: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,  # noqa: F811
) -> None:
    init, server = _sleeper(), _sleeper()
    try:
        _as_process(fake_proc, init, CID, "/sbin/docker-init -- /opt/llama/llama-server -m x")
        _as_process(fake_proc, server, CID, "/opt/llama/llama-server -m x")
        use_host(monkeypatch, FakeHost(pid=init.pid))
        fault = make_fault("kill_process", docker_node(base_url="http://127.0.0.1:9"),
                           journal=FaultJournal(tmp_path), match="llama-server")
        await fault.inject()
        assert server.wait(10) == -signal.SIGKILL and init.poll() is None
    finally:
        for child in (init, server):
            if child.poll() is None:
                child.kill()
                child.wait(10)


def test_a_zombie_is_dead_and_a_live_process_is_not() -> None:
    from faultkit.docker.hostpid import running as _running
    from faultkit.docker.hostpid import wait_gone as _wait_gone

    child = _sleeper()
    try:
        assert _running(child.pid) and not _wait_gone([child.pid], 0.05)
        child.kill()  # not reaped yet: a zombie
        assert _wait_gone([child.pid], 5.0)
    finally:
        child.wait(10)
    assert not _running(child.pid)


def test_every_engine_has_a_worker_to_kill_and_the_inventory_overrides_it() -> None:
    """test_engine_death fails (never skips) on an engine node without a pattern: every
    engine but the gateway's has one."""
    from faultkit.inventory.node import ENGINE_PROCESSES, Engine

    engines = set(Engine.__args__) - {"litellm"}  # type: ignore[attr-defined]
    assert engines == set(ENGINE_PROCESSES)
    assert docker_node(engine="vllm").engine_process_pattern == "VLLM::EngineCore"
    assert docker_node(engine="vllm", engine_process="MyWorker").engine_process_pattern == \
        "MyWorker"


async def test_a_container_its_policy_left_down_is_started_and_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through the revert's own path (``_wait_back``): the node stays unready, the container
    has exited 0 under ``on-failure``; the harness starts it, and the finding says why."""
    from faultkit.errors import NodeNotReady
    from faultkit.faults import process

    class Down(FakeHost):
        started = False

        def state(self, name: str) -> object:
            attrs = self.inspect(name)
            attrs["State"] = {"Status": "running" if self.started else "exited",
                              "Running": self.started, "ExitCode": 0, "Pid": 0}
            return state_from_attrs(attrs)

        def start(self, name: str) -> None:
            self.started = True

    host = Down()
    use_host(monkeypatch, host)
    calls = []

    async def wait_ready(node: object, timeout_s: float) -> None:
        calls.append(timeout_s)
        if not host.started:
            raise NodeNotReady("n1", "http://127.0.0.1:9/health", timeout_s, "refused")

    monkeypatch.setattr(process, "wait_ready", wait_ready)
    fault = make_fault("kill_process", docker_node(), dry_run=True, match="x",
                       ready_timeout_s=1, first_token=False)
    assert isinstance(fault, KillProcess)
    fault.result.update(restart_policy="on-failure", restart_count_before=0)
    await fault._wait_back(0.0)
    assert host.started and len(calls) == 2
    assert "'on-failure' did not bring it back (on-failure never restarts an exit 0)" in \
        fault.result["never_restarted"]
