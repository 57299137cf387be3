"""Process, memory and request faults on throwaway testbed nodes: effect seen, node restored."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from faultkit.constants import LABEL_NODE, LOCAL_DOCKER
from faultkit.docker.host import docker_host
from faultkit.faults import make_fault
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.model.records import Event
from testbed.scratch import stopped_processes
from tests.integration.faults_support import assert_restored, remove_scratch, scratch_node, snapshot

pytestmark = pytest.mark.docker
DOCKER = LOCAL_DOCKER
Scratch = tuple[Inventory, Node]  # what the scratch fixtures yield


@pytest.fixture(scope="module")
def scratch(lab_inventory: Inventory) -> Iterator[tuple[Inventory, Node]]:
    inv, node = scratch_node(lab_inventory, "fk-proc")
    yield inv, node
    assert node.docker is not None
    remove_scratch(docker_host(DOCKER), node.docker.container)


@pytest.fixture
def journal(tmp_path: Path) -> FaultJournal:
    return FaultJournal(tmp_path / "journal")


async def _health(node: Node, wait_s: float = 2.0) -> str:
    try:
        async with httpx.AsyncClient() as client:
            r = await client.get(node.base_url + node.health_path, timeout=wait_s)
            return str(r.status_code)
    except httpx.TimeoutException:
        return "timeout"
    except httpx.HTTPError as exc:
        return type(exc).__name__


async def test_kill_sigkill_restart_policy_brings_it_back(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    events: list[Event] = []
    fault = make_fault("kill", node, inventory=inv, journal=journal, timeline=events.append)
    async with fault:
        pass
    assert fault.result["exit_code"] == 137
    assert fault.result["restart_count_after"] == fault.result["restart_count_before"] + 1
    assert 0 < fault.result["time_to_ready_s"] < 60
    # the first-token probe retries until the node serves: the figure is always there
    assert fault.result.get("first_token_finding") is None, fault.result["first_token_finding"]
    assert fault.result["time_to_ready_s"] <= fault.result["time_to_first_token_s"] < 60
    kinds = [e.kind for e in events]
    assert kinds == ["inject_start", "act", "inject_end", "revert_start", "restarted",
                     "ready", "first_token", "revert_end"]
    await assert_restored(node, before)
    assert journal.unreverted() == []


async def test_docker_kill_is_not_restarted_by_docker(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("kill", node, inventory=inv, journal=journal, docker_kill=True,
                       first_token=False)
    async with fault:
        await asyncio.sleep(1.5)  # well past Docker's first restart back-off
        st = docker_host(DOCKER).state(node.docker.container)  # type: ignore[union-attr]
        assert not st.running
        assert await _health(node) != "200"
    await assert_restored(node, before)


@pytest.mark.parametrize("kind", ["stop", "restart"])
async def test_cold_start_times_recorded(
        kind: str, scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault(kind, node, inventory=inv, journal=journal)
    async with fault:
        if kind == "stop":
            assert await _health(node) != "200"
    assert fault.result.get("first_token_finding") is None, fault.result["first_token_finding"]
    assert 0 < fault.result["time_to_ready_s"] <= fault.result["time_to_first_token_s"] < 60
    assert fault.result["ready_not_serving_s"] >= 0
    await assert_restored(node, before)


async def test_pause_hangs_requests_then_unpauses(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    async with make_fault("pause", node, inventory=inv, journal=journal):
        assert await _health(node, wait_s=1.0) == "timeout"
    await assert_restored(node, before)


async def test_stall_stops_the_engine_then_sigcont_resumes_it(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    assert before["stopped_processes"] == 0
    fault = make_fault("stall", node, inventory=inv, journal=journal)  # the engine's pattern
    async with fault:
        # the engine hangs with its port open, and the kernel says its process is stopped
        assert await _health(node, wait_s=1.0) == "timeout"
        assert stopped_processes(node) == len(fault.result["stopped"]) >= 1
    assert stopped_processes(node) == 0
    await assert_restored(node, before)


async def test_stall_whole_stops_every_process_of_the_container(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("stall", node, inventory=inv, journal=journal, whole=True)
    async with fault:
        assert await _health(node, wait_s=1.0) == "timeout"
        # docker-init too: the whole container is frozen, as a docker pause freezes it
        assert stopped_processes(node) == len(fault.result["stopped"]) >= 2
    await assert_restored(node, before)


async def test_node_restart_restarts_every_selected_container(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    host = docker_host(DOCKER)
    name = node.docker.container  # type: ignore[union-attr]
    started = host.state(name).started_at
    before = snapshot(node)
    fault = make_fault("node_restart", node, inventory=inv, journal=journal,
                       label=f"{LABEL_NODE}={node.name}")
    async with fault:
        pass
    assert fault.result["containers"] == [name]
    assert host.state(name).started_at > started  # type: ignore[operator]
    await assert_restored(node, before)


async def test_request_faults_record_how_the_node_answered(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    fault = make_fault("oversized_context", node, inventory=inv, journal=journal,
                       input_tokens=2000, concurrency=2, requests=4)
    async with fault:
        await fault.hold(5)
    assert fault.result["issued"] == 4
    assert fault.result["by_outcome"] == {"http_4xx": 4}  # llama-server: clean 400
    assert fault.result["crashed"] is False
    flood = make_fault("flood", node, inventory=inv, journal=journal, rate=20)
    t0 = time.monotonic()
    async with flood:
        await flood.hold(2)
    assert time.monotonic() - t0 < 15
    assert flood.result["issued"] >= 20
    assert sum(flood.result["by_outcome"].values()) == flood.result["issued"]


@pytest.fixture(scope="module")
def sim_scratch(lab_inventory: Inventory) -> Iterator[tuple[Inventory, Node]]:
    inv, node = scratch_node(lab_inventory, "fk-mem", base_name="sim-vllm")
    yield inv, node
    remove_scratch(docker_host(DOCKER), node.docker.container)  # type: ignore[union-attr]


async def test_memory_squeeze_oom_kills_and_revert_restores_limit(
        sim_scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = sim_scratch
    host = docker_host(DOCKER)
    name = node.docker.container  # type: ignore[union-attr]
    before = snapshot(node)
    fault = make_fault("memory_squeeze", node, inventory=inv, journal=journal, fraction=0.4)
    load = make_fault("flood", node, inventory=inv, journal=journal, rate=200, input_tokens=2048,
                      output_tokens=64)
    async with load:  # users are being served when the squeeze hits
        await asyncio.sleep(1.0)
        async with fault:
            applied = fault.result["limit_applied"]
            assert host.memory_limits(name)[0] == applied < before["limits"][0]
            for _ in range(40):
                st = host.state(name)
                if st.oom_killed or st.restart_count > fault.result["restart_count_before"]:
                    break
                await asyncio.sleep(0.25)
    assert fault.result["oom_killed"] is True
    assert load.result["by_outcome"].get("ok", 0) < load.result["issued"]  # users saw it
    await assert_restored(node, before)
