"""Network faults against a throwaway llama node: each mode this kernel supports, and its revert."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from faultkit.constants import LOCAL_DOCKER
from faultkit.docker.host import docker_host
from faultkit.errors import FaultNotApplied, FaultUnsupported
from faultkit.faults import make_fault
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.platform import netns
from tests.integration.faults_support import assert_restored, remove_scratch, scratch_node, snapshot

pytestmark = pytest.mark.docker
DOCKER = LOCAL_DOCKER
Scratch = tuple[Inventory, Node]  # what the scratch fixture yields


@pytest.fixture(scope="module")
def scratch(lab_inventory: Inventory) -> Iterator[tuple[Inventory, Node]]:
    inv, node = scratch_node(lab_inventory, "fk-net")
    yield inv, node
    remove_scratch(docker_host(DOCKER), node.docker.container)  # type: ignore[union-attr]


@pytest.fixture
def journal(tmp_path: Path) -> FaultJournal:
    return FaultJournal(tmp_path / "journal")


async def _get(node: Node, path: str = "/health", wait_s: float = 2.0) -> tuple[str, float]:
    t0 = time.monotonic()
    try:
        async with httpx.AsyncClient() as client:
            r = await client.get(node.base_url + path, timeout=wait_s)
            return str(r.status_code), time.monotonic() - t0
    except httpx.TimeoutException:
        return "timeout", time.monotonic() - t0
    except httpx.HTTPError as exc:
        return type(exc).__name__, time.monotonic() - t0


async def test_partition_refuse_disconnects_then_reconnects(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    async with make_fault("partition", node, inventory=inv, journal=journal, mode="refuse"):
        assert docker_host(DOCKER).endpoints(node.docker.container) == {}  # type: ignore[union-attr]
        outcome, took = await _get(node)
        assert outcome not in ("200", "timeout")  # refused / reset, fast
        assert took < 1.5
    await assert_restored(node, before)


async def test_partition_blackhole_times_out(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    async with make_fault("partition", node, inventory=inv, journal=journal, mode="blackhole"):
        assert (await _get(node, wait_s=1.5))[0] == "timeout"
    await assert_restored(node, before)


async def test_loss_drops_packets(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("loss", node, inventory=inv, journal=journal, percent=100)
    async with fault:
        assert fault.result["mode"] in ("netem", "iptables")
        assert (await _get(node, wait_s=1.5))[0] == "timeout"
    await assert_restored(node, before)


async def test_loss_partial_installs_statistic_rule(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    fault = make_fault("loss", node, inventory=inv, journal=journal, percent=25)
    async with fault:
        if fault.result["mode"] == "iptables":
            pid = docker_host(DOCKER).host_pid(node.docker.container)  # type: ignore[union-attr]
            rules = netns.tagged_rules(pid, "filter", netns.comment_for(fault.id))
            assert len(rules) == 1
            assert "--probability 0.25" in rules[0]
    await assert_restored(node, before)


async def test_bandwidth_slows_a_large_answer(scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    body = {"model": node.model, "prompt": "hello", "max_tokens": 200, "ignore_eos": True,
            "stream": True}

    async def timed() -> float:
        t0 = time.monotonic()
        async with httpx.AsyncClient(timeout=60) as client:
            r = await client.post(node.base_url + "/v1/completions", json=body)
            assert r.status_code == 200
            assert len(r.content) > 20_000
        return time.monotonic() - t0

    baseline = await timed()
    async with make_fault("bandwidth", node, inventory=inv, journal=journal, rate="256kbit",
                          burst="16kbit"):
        slowed = await timed()
    assert slowed > baseline + 0.5  # ~41 KB at 32 KB/s ≈ 1.3 s
    await assert_restored(node, before)


async def test_latency_adds_delay_in_the_mode_this_kernel_has(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    before = snapshot(node)
    base = min([(await _get(node))[1] for _ in range(3)])
    fault = make_fault("latency", node, inventory=inv, journal=journal, delay_ms=400)
    async with fault:
        outcome, took = await _get(node)
        assert outcome == "200"
        assert took >= base + 0.35
        if fault.result["mode"] == "proxy":
            assert fault.result["netem_available"] is False
    assert fault.result.get("proxied_connections", 1) >= 1
    outcome, took = await _get(node)
    assert took < base + 0.3
    await assert_restored(node, before)


async def test_netem_mode_reports_unsupported_without_sch_netem(
        scratch: Scratch, journal: FaultJournal) -> None:
    inv, node = scratch
    pid = docker_host(DOCKER).host_pid(node.docker.container)  # type: ignore[union-attr]
    if netns.netem_available(pid):
        pytest.skip("this kernel has sch_netem")
    before = snapshot(node)
    fault = make_fault("latency", node, inventory=inv, journal=journal, mode="netem")
    with pytest.raises(FaultNotApplied, match="sch_netem") as raised:
        await fault.inject()
    assert isinstance(raised.value.__cause__, FaultUnsupported)
    await assert_restored(node, before)
    assert journal.unreverted() == []
