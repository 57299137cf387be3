"""Every fault kind against a node on the testbed's second Docker host (``tcp://``).

The node is a throwaway sim node on that host (never the lab's own ``sim-vllm-h2``): each
test injects one fault, checks that it took effect as the node's clients see it, and that
the revert restores the node exactly (:func:`testbed.scratch.snapshot`, which reads the
container's netns through a helper container there). An autouse fixture fails any test in
which the harness touched a host PID of *this* machine or entered a namespace with
``nsenter``: on a ``tcp://`` host both would hit the wrong process (issue 16).

Marked ``host2`` as well as ``docker``: ``-m host2`` runs just these (about a minute).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from faultkit.constants import LABEL_OWNER
from faultkit.docker import hostpid
from faultkit.docker.host import DockerHost
from faultkit.errors import FaultNotApplied
from faultkit.faults import FAULTS, make_fault
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.platform import HELPER_LABEL
from faultkit.probes.health import wait_ready
from testbed import host2, host2_nodes
from testbed.paths import state_dir
from testbed.scratch import TEST_LABELS, assert_restored, snapshot, stopped_processes

pytestmark = [pytest.mark.docker, pytest.mark.host2,
              pytest.mark.usefixtures("second_host_for_the_module")]

PORT = 18102  # one of host2.NODE_PORTS, not the lab node's
Scratch = tuple[Inventory, Node]  # what the scratch fixture yields
HOST_ACTIONS: list[str] = []


@pytest.fixture(scope="module")
def scratch(lab_inventory: Inventory) -> Iterator[tuple[Inventory, Node]]:
    host2_nodes.up(progress=lambda _m: None)
    base = lab_inventory.node("sim-vllm-h2")
    assert base.docker is not None
    node = base.model_copy(update={
        "name": "fk-h2", "base_url": f"http://127.0.0.1:{PORT}", "prometheus": None,
        "docker": base.docker.model_copy(update={"container": "faultkit-test-h2"}),
    })
    spec = host2_nodes.node_spec(lab_inventory, node)
    spec = type(spec)(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                         "labels": {**TEST_LABELS, "faultkit.node": "fk-h2"}})
    engine = host2.inner()
    if engine.exists(spec.name):
        engine.remove(spec.name)
    (state_dir("host2") / "sim" / node.name).mkdir(parents=True, exist_ok=True)
    engine.create(spec)
    asyncio.run(wait_ready(node, timeout_s=60))
    inventory = Inventory(nodes=[node], serving_configs=dict(lab_inventory.serving_configs),
                          prometheus=lab_inventory.prometheus, source="<host2 scratch>")
    yield inventory, node
    engine.remove(spec.name)


@pytest.fixture(autouse=True)
def no_action_from_this_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Record any host-PID or nsenter action of this machine; the test fails if one ran."""
    HOST_ACTIONS.clear()

    def forbidden(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            HOST_ACTIONS.append(name)
            return real(*args, **kwargs)
        return wrapper

    for name in ("kill", "proven_pid", "container_processes", "wait_gone"):
        monkeypatch.setattr(hostpid, name, forbidden(f"hostpid.{name}", getattr(hostpid, name)))
    monkeypatch.setattr(os, "kill", forbidden("os.kill", os.kill))
    real_run = subprocess.run

    def run(argv: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(argv, list | tuple) and argv and argv[0] == "nsenter":
            HOST_ACTIONS.append(" ".join(map(str, argv[:4])))
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    yield
    assert HOST_ACTIONS == [], f"acted on this machine for a tcp:// node: {HOST_ACTIONS}"


@pytest.fixture
def journal(tmp_path: Path) -> FaultJournal:
    return FaultJournal(tmp_path / "journal")


async def _get(node: Node, wait_s: float = 1.5) -> str:
    try:
        async with httpx.AsyncClient() as client:
            return str((await client.get(node.base_url + "/health", timeout=wait_s)).status_code)
    except httpx.TimeoutException:
        return "timeout"
    except httpx.HTTPError as exc:
        return type(exc).__name__


async def _complete(node: Node, wait_s: float = 1.5) -> str:
    """A one-token completion: its status, or "timeout" when no answer came in time."""
    body = {"model": node.model, "prompt": "ping", "max_tokens": 1}
    try:
        async with httpx.AsyncClient() as client:
            answer = await client.post(node.base_url + "/v1/completions", json=body,
                                       timeout=wait_s)
            return str(answer.status_code)
    except httpx.TimeoutException:
        return "timeout"


def _helpers(engine: DockerHost) -> list[str]:
    return [c.name for c in engine.labelled(LABEL_OWNER, "helper")]


def _restarts(node: Node) -> int:
    assert node.docker is not None
    return host2.inner().state(node.docker.container).restart_count


async def test_kill_crashes_the_main_process_from_a_helper(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before, restarts = snapshot(node), _restarts(node)
    fault = make_fault("kill", node, inventory=inv, journal=journal, first_token=False)
    async with fault:
        assert fault.result["exit_code"] == 137  # a crash, not docker kill's manual stop
    assert _restarts(node) == restarts + 1  # the restart policy brought it back
    await assert_restored(node, before)
    assert _helpers(host2.inner()) == []


async def test_kill_process_kills_the_engine_under_its_init(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before, restarts = snapshot(node), _restarts(node)
    fault = make_fault("kill_process", node, inventory=inv, journal=journal,
                       match="testbed.simnode", first_token=False)
    async with fault:
        pass
    assert fault.result["matched"] and fault.result["container_died"]
    assert _restarts(node) > restarts
    await assert_restored(node, before)


async def test_stall_stops_the_engine_from_a_helper(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("stall", node, inventory=inv, journal=journal)  # the engine's pattern
    async with fault:
        # the simulator's engine core alone stopped: its API answers /health 200 (as vLLM's
        # does) while a completion, which needs the engine, hangs
        assert await _get(node) == "200"
        assert await _complete(node) == "timeout"
        assert stopped_processes(node) == len(fault.result["stopped"]) == 1
        assert "enginecore" in fault.result["stopped"][0]["cmdline"]
    assert await _complete(node) == "200"
    await assert_restored(node, before)
    assert _helpers(host2.inner()) == []


@pytest.mark.parametrize("kind", ["pause", "stop", "restart"])
async def test_api_faults(scratch: Scratch, journal: FaultJournal, kind: str) -> None:
    inv, node = scratch
    before = snapshot(node)
    params: dict[str, Any] = {} if kind == "pause" else {"first_token": False}
    async with make_fault(kind, node, inventory=inv, journal=journal, **params):
        if kind != "restart":
            assert await _get(node) != "200"
    await assert_restored(node, before)


async def test_node_restart_restarts_the_host2_node(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("node_restart", node, inventory=inv, journal=journal)
    async with fault:
        pass
    assert fault.result["containers"] == [node.docker.container]  # type: ignore[union-attr]
    await assert_restored(node, before)


@pytest.mark.parametrize("mode", ["refuse", "blackhole"])
async def test_partition(scratch: Scratch, journal: FaultJournal, mode: str) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("partition", node, inventory=inv, journal=journal, mode=mode)
    async with fault:
        outcome = await _get(node)
        assert outcome != "200"
        if mode == "blackhole":
            assert outcome == "timeout"
            assert snapshot(node)["netns_rules"]  # the DROP rules, read through a helper
    if mode == "blackhole":
        assert fault.result["dropped_packets"] > 0
    await assert_restored(node, before)


async def test_loss_drops_everything_at_100_percent(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("loss", node, inventory=inv, journal=journal, percent=100)
    async with fault:
        assert await _get(node) == "timeout"
    await assert_restored(node, before)


async def test_bandwidth_installs_tbf(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("bandwidth", node, inventory=inv, journal=journal, rate="1mbit")
    try:
        async with fault:
            assert snapshot(node)["qdiscs"]  # the fa17: root qdisc, seen through a helper
    except FaultNotApplied as exc:  # tbf works in a container's namespace here (docs/faults.md)
        pytest.fail(f"bandwidth refused on the second host, where sch_tbf works: {exc}")
    await assert_restored(node, before)


async def test_latency_delays_the_answers(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("latency", node, inventory=inv, journal=journal, delay_ms=400)
    async with fault:
        t0 = time.monotonic()
        assert await _get(node, wait_s=5) == "200"
        assert time.monotonic() - t0 >= 0.4
    await assert_restored(node, before)


async def test_memory_squeeze_oom_kills_through_the_api(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("memory_squeeze", node, inventory=inv, journal=journal)
    async with fault:
        pass
    assert fault.result["oom_killed"]
    await assert_restored(node, before)


async def test_rollout_and_back(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("rollout", node, inventory=inv, journal=journal,
                       config="sim-vllm-good-util85")
    async with fault:
        assert fault.result["ready"]
        assert host2.inner().state(node.docker.container).labels[  # type: ignore[union-attr]
            "faultkit.serving-config"] == "sim-vllm-good-util85"
    await assert_restored(node, before)


@pytest.mark.parametrize("kind", ["flood", "oversized_context"])
async def test_request_faults(scratch: Scratch, journal: FaultJournal, kind: str) -> None:
    inv, node = scratch
    params: dict[str, Any] = ({"rate": 10.0, "drain_s": 2.0} if kind == "flood"
                              else {"requests": 2, "input_tokens": 8000})
    async with make_fault(kind, node, inventory=inv, journal=journal, **params) as fault:
        await fault.hold(1.0)
    assert await _get(node) == "200"


async def test_host_restart_brings_the_host_and_its_nodes_back(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("host_restart", node, inventory=inv, journal=journal,
                       command=f"docker restart -t 0 {host2.CONTAINER}")
    async with fault:
        assert not host2.inner(timeout_s=2.0).ping()  # the whole host is away
    result = fault.result
    assert result["host_down_s"] is not None and result["engine_back_s"] is not None
    assert result["nodes_ready_s"][node.name] is not None and result["not_back"] == []
    await assert_restored(node, before)


def test_host_restart_is_never_this_machine(lab_inventory: Inventory) -> None:
    from faultkit.errors import FaultRefused

    with pytest.raises(FaultRefused, match="this machine's own"):
        make_fault("host_restart", lab_inventory.node("sim-vllm"), inventory=lab_inventory,
                   dry_run=True, command="true")


@pytest.mark.parametrize(("kind", "param"), [("partition", "mode=blackhole"),
                                             ("loss", "percent=30")])
def test_a_sigkilled_inject_is_swept_through_helpers(scratch: Scratch, tmp_path: Path, kind: str,
                                                      param: str) -> None:
    """The harness dies with rules in the remote netns; `faultkit sweep` removes them through
    a helper there (and the helpers the dead harness may have left)."""
    import signal as signals
    import sys

    from testbed.scratch import write_inventory
    from tests.integration.test_faults_crash import _wait_for_line

    inv, node = scratch
    inventory_file = write_inventory(inv, tmp_path / "inventory.yaml")
    journal_dir = tmp_path / "journal"
    before = snapshot(node)
    faultkit = [sys.executable, "-m", "faultkit.cli"]
    proc = subprocess.Popen(
        [*faultkit, "inject", kind, "--node", node.name, "--inventory", str(inventory_file),
         "--duration", "120s", "--journal-dir", str(journal_dir), "--param", param],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_line(proc, "inject_end", 90)
        os.kill(proc.pid, signals.SIGKILL)  # the harness itself: a process of this machine
        proc.wait(10)
        assert snapshot(node)["netns_rules"]  # still applied, seen through a helper
        out = subprocess.run([*faultkit, "sweep", "--journal-dir", str(journal_dir),
                              "--inventory", str(inventory_file)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0 and "reverted" in out.stdout, out.stdout + out.stderr
        asyncio.run(assert_restored(node, before))
        assert _helpers(host2.inner()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
    HOST_ACTIONS.clear()  # the os.kill above is of the harness, not of the node


def test_every_fault_kind_has_a_host2_test() -> None:
    tested = {"host_restart", "kill", "kill_process", "pause", "stall", "stop", "restart",
              "node_restart", "partition", "loss", "bandwidth", "latency", "memory_squeeze",
              "rollout", "flood", "oversized_context"}
    assert set(FAULTS) == tested


def test_a_helper_left_behind_is_swept(scratch: Scratch, journal: FaultJournal) -> None:
    """A helper a killed harness left on the node's host is removed by the journalled step."""
    from faultkit.faults import undo

    engine = host2.inner()
    engine.client.containers.create(
        "faultkit/tools:bookworm", ["sleep", "60"], name="faultkit-helper-left-behind",
        labels={LABEL_OWNER: "helper", HELPER_LABEL: "kill-fk-h2-deadbeef"})
    line = undo.run_step({"op": "helpers_remove", "host": host2.HOST2_URL, "container": None,
                          "label": f"{HELPER_LABEL}=kill-fk-h2-deadbeef"})
    assert "removed 1" in line and "faultkit-helper-left-behind" not in _helpers(engine)



#: a process of the second host (not a container) listening on a node port, as the
#: ``docker-proxy`` a forced removal leaves behind does
HOLDER = ("import socket, time; s = socket.socket(); s.bind(('0.0.0.0', {port})); "
          "s.listen(); time.sleep(300)")


def test_up_frees_a_port_a_stray_process_of_the_second_host_holds(
        scratch: Scratch, lab_inventory: Inventory) -> None:
    """``testbed up`` meets a node port the second host cannot publish because a stray
    process there holds it: it restarts that engine once, the node comes up, and every
    container that ran there before runs again. Evidence from Docker and over HTTP."""
    _inv, scratch_node = scratch
    port = 18103  # one of host2.NODE_PORTS, used by no other node or test
    base = lab_inventory.node("sim-vllm-h2")
    assert base.docker is not None and scratch_node.docker is not None
    node = base.model_copy(update={
        "name": "fk-h2-held", "base_url": f"http://127.0.0.1:{port}", "prometheus": None,
        "docker": base.docker.model_copy(update={"container": "faultkit-test-h2-held"}),
    })
    inventory = Inventory(nodes=[node], serving_configs=dict(lab_inventory.serving_configs),
                          prometheus=lab_inventory.prometheus, source="<held port>")
    outer, engine = host2.outer(), host2.inner()
    if engine.exists("faultkit-test-h2-held"):
        engine.remove("faultkit-test-h2-held")
    outer.client.containers.get(host2.CONTAINER).exec_run(
        ["python3", "-c", HOLDER.format(port=port)], detach=True)
    deadline = time.monotonic() + 10
    while outer.exec(host2.CONTAINER, ["ss", "-Hltn", f"sport = :{port}"])[1].strip() == "":
        assert time.monotonic() < deadline, "the holder never listened"
        time.sleep(0.1)
    running_before = set(engine.running_names())
    assert {base.docker.container, scratch_node.docker.container} <= running_before
    engine_started = outer.state(host2.CONTAINER).started_at
    lines: list[str] = []
    try:
        host2_nodes.ensure_nodes(inventory, progress=lines.append)
        engine = host2.inner()
        assert sum("restarting that engine" in line for line in lines) == 1, lines
        assert outer.state(host2.CONTAINER).started_at != engine_started
        assert engine.state("faultkit-test-h2-held").running
        assert httpx.get(f"{node.base_url}/health", timeout=5).status_code == 200
        assert running_before <= set(engine.running_names())
    finally:
        if engine.exists("faultkit-test-h2-held"):
            engine.remove("faultkit-test-h2-held")
        outer.exec(host2.CONTAINER, ["pkill", "-f", "s.listen"])  # if it outlived a failure
