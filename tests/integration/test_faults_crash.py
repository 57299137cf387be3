"""A SIGKILLed `faultkit inject` leaves its fault applied; `faultkit sweep` restores the node.

Also: blast-radius refusals through the CLI leave everything untouched, rollouts roll back
on their own, and a short hypothesis state machine of inject / revert / crash / sweep
against a real container.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from faultkit.constants import LABEL_SERVING_CONFIG, LOCAL_DOCKER
from faultkit.docker.host import docker_host
from faultkit.errors import FaultRefused
from faultkit.faults import Fault, make_fault
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.sweep import sweep
from tests.integration.faults_support import (
    assert_restored,
    remove_scratch,
    scratch_node,
    snapshot,
    write_inventory,
)

pytestmark = pytest.mark.docker
DOCKER = LOCAL_DOCKER
FAULTKIT = [sys.executable, "-m", "faultkit.cli"]
Scratch = tuple[Inventory, Node]  # what the scratch fixture yields


@pytest.fixture(scope="module")
def scratch(lab_inventory: Inventory) -> Iterator[tuple[Inventory, Node]]:
    inv, node = scratch_node(lab_inventory, "fk-crash")
    good = inv.serving_config("llama-good")
    alt = good.model_copy(update={"command": [a if a != "2" else "1" for a in good.command]})
    inv = inv.model_copy(update={"serving_configs": {**inv.serving_configs, "llama-alt": alt}})
    yield inv, node
    remove_scratch(docker_host(DOCKER), node.docker.container)  # type: ignore[union-attr]


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout_s: float) -> str:
    """Read the child's stderr (in a thread: select() cannot see Python's read buffer)."""
    assert proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    stream = proc.stderr

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no {needle!r} from faultkit inject; it said: {''.join(seen)}")


def _applied(
    kind: str, params: dict[str, str], before: dict[str, Any], now: dict[str, Any]
) -> bool:
    """Is the fault visibly in effect in snapshot ``now``?"""
    if kind == "pause":
        return bool(now["paused"])
    if kind == "stall":
        return bool(now["stopped_processes"])
    if kind == "stop":
        return not now["running"]
    if kind == "partition" and params["mode"] == "refuse":
        return bool(now["networks"] == {})
    if kind in ("partition", "loss"):
        return bool(now["netns_rules"])
    if kind == "latency":
        return len(now["host_nat_rules"]) > len(before["host_nat_rules"])
    if kind == "bandwidth":
        return bool(now["qdiscs"])
    if kind == "memory_squeeze":
        return bool(now["limits"] != before["limits"])
    if kind == "rollout":
        return bool(now["spec"].command != before["spec"].command)
    raise AssertionError(kind)


CASES = [
    ("pause", {}),
    ("stall", {"whole": "true"}),
    ("stop", {}),
    ("partition", {"mode": "refuse"}),
    ("partition", {"mode": "blackhole"}),
    ("loss", {"percent": "30"}),
    ("latency", {"delay_ms": "200"}),
    ("bandwidth", {"rate": "1mbit"}),
    ("memory_squeeze", {"limit": "64m"}),
    ("rollout", {"config": "llama-alt"}),
]


@pytest.mark.parametrize(
    ("kind", "params"), CASES, ids=[f"{k}-{'-'.join(p.values())}" for k, p in CASES]
)
def test_sigkilled_inject_then_sweep_restores(
    kind: str, params: dict[str, str], scratch: Scratch, tmp_path: Path
) -> None:
    inv, node = scratch
    inventory_file = write_inventory(inv, tmp_path / "inventory.yaml")
    journal_dir = tmp_path / "journal"
    before = snapshot(node)
    argv = [*FAULTKIT, "inject", kind, "--node", node.name, "--inventory", str(inventory_file),
            "--duration", "120s", "--journal-dir", str(journal_dir)]
    for key, value in params.items():
        argv += ["--param", f"{key}={value}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_line(proc, "inject_end", 90)
        assert _applied(kind, params, before, snapshot(node))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        time.sleep(0.5)
        # the harness is dead; the fault is still there
        assert _applied(kind, params, before, snapshot(node))
        out = subprocess.run([*FAULTKIT, "sweep", "--journal-dir", str(journal_dir)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "reverted" in out.stdout
        asyncio.run(assert_restored(node, before))
        again = subprocess.run([*FAULTKIT, "sweep", "--journal-dir", str(journal_dir)],
                               capture_output=True, text=True, timeout=60, check=False)
        assert "nothing to sweep" in again.stdout  # idempotent
    finally:
        if proc.poll() is None:
            proc.kill()
        sweep(FaultJournal(journal_dir))


def test_cli_refuses_protected_node_and_touches_nothing(scratch: Scratch, tmp_path: Path) -> None:
    inv, node = scratch
    protected = inv.model_copy(update={"nodes": [node.model_copy(update={"protected": True})]})
    inventory_file = write_inventory(protected, tmp_path / "inventory.yaml")
    before = snapshot(node)
    out = subprocess.run(
        [*FAULTKIT, "inject", "pause", "--node", node.name, "--inventory", str(inventory_file),
         "--duration", "5s", "--journal-dir", str(tmp_path / "journal")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode != 0
    assert "is protected" in out.stderr
    assert snapshot(node) == before
    assert FaultJournal(tmp_path / "journal").records() == []


async def test_rollout_of_a_bad_config_is_rolled_back_by_itself(
        scratch: Scratch, tmp_path: Path) -> None:
    inv, node = scratch
    before = await asyncio.to_thread(snapshot, node)
    started = time.time()
    fault = make_fault("rollout", node, inventory=inv, journal=FaultJournal(tmp_path),
                       config="llama-bad-model")
    async with fault:
        await assert_restored(node, before)  # already back while the body runs
    r = fault.result
    assert r["rolled_back"] is True
    assert r["ready"] is False
    assert "restart loop" in r["failed_reason"] or "not ready" in r["failed_reason"]
    assert r["t_failed_detected"] <= r["t_restored"]
    if "restart loop" in r["failed_reason"]:
        # the exit code quoted is the candidate's own, as Docker's die events give it (its
        # state reads 0 again while the restart policy starts it)
        assert node.docker is not None
        client = docker_host(DOCKER).client
        dies = list(client.events(since=int(started), until=int(r["t_failed_detected"]) + 1,
                                  decode=True, filters={"container": node.docker.container,
                                                        "event": "die"}))
        codes = {str(e["Actor"]["Attributes"]["exitCode"]) for e in dies} - {"137"}
        assert codes and f"(exit {codes.pop()}" in r["failed_reason"], (codes, r["failed_reason"])
    await assert_restored(node, before)


async def test_rollout_promote_keeps_candidate(scratch: Scratch, tmp_path: Path) -> None:
    inv, node = scratch
    before = await asyncio.to_thread(snapshot, node)
    journal = FaultJournal(tmp_path)
    fault = make_fault("rollout", node, inventory=inv, journal=journal, config="llama-alt")
    try:
        async with fault:
            assert fault.result["ready"] is True
            fault.promote()  # type: ignore[attr-defined]
        now = await asyncio.to_thread(snapshot, node)
        assert now["spec"].command != before["spec"].command
        assert now["spec"].labels[LABEL_SERVING_CONFIG] == "llama-alt"
        assert sweep(journal) == []
    finally:
        back = make_fault("rollout", node, inventory=inv, journal=journal, config="llama-good")
        async with back:
            back.promote()  # type: ignore[attr-defined]
    await assert_restored(node, before)


async def test_rollout_command_pair_mode(scratch: Scratch, tmp_path: Path) -> None:
    inv, node = scratch
    name = node.docker.container  # type: ignore[union-attr]
    broken = inv.serving_config("llama-good").model_copy(update={
        "apply": f"docker stop -t 0 {name}", "rollback": f"docker start {name}",
        "ready_timeout_s": 3,
    })
    configs = {**inv.serving_configs, "compose-bad": broken}
    inv2 = inv.model_copy(update={"serving_configs": configs})
    before = await asyncio.to_thread(snapshot, node)
    fault = make_fault("rollout", node, inventory=inv2, journal=FaultJournal(tmp_path),
                       config="compose-bad")
    async with fault:
        pass
    assert fault.mode == "commands"
    assert fault.result["rolled_back"] is True
    await assert_restored(node, before)


# --------------------------------------------------------------------------- state machine

class RealFaultSequences(RuleBasedStateMachine):
    """inject / revert / crash (journal lock dropped) / sweep against a real container.

    The model: one fault per node (a second is refused as locked); after a crash, the
    fault left applied blocks the node (refused as BLOCKED) until a sweep reverts it; a
    refusal touches nothing; after a sweep with nothing live, the node is as it was.
    """

    inv: Inventory
    node: Node
    directory: Path

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.journal = FaultJournal(self.directory)
        self.live: dict[str, Fault] = {}
        self.crashed: set[str] = set()
        self.before = snapshot(self.node)

    @rule(kind=st.sampled_from(["pause", "blackhole", "loss"]))
    def inject(self, kind: str) -> None:
        by_kind: dict[str, dict[str, Any]] = {"pause": {}, "blackhole": {"mode": "blackhole"},
                                              "loss": {"percent": 20}}
        params = by_kind[kind]
        name = "partition" if kind == "blackhole" else kind
        fault = make_fault(name, self.node, inventory=self.inv, journal=self.journal, **params)
        refusal = None
        if self.live:  # one fault per node: the second is refused
            refusal = f"locked by fault {next(iter(self.live.values())).id}"
        elif self.crashed:  # a fault left applied by a dead harness blocks it until a sweep
            refusal = "is BLOCKED by fault"
        if refusal is not None:
            state = snapshot(self.node)
            with pytest.raises(FaultRefused, match=refusal):
                self.loop.run_until_complete(fault.inject())
            assert snapshot(self.node) == state, "a refused fault touched the node"
            return
        self.loop.run_until_complete(fault.inject())
        self.live[kind] = fault

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def revert(self, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(sorted(self.live)))
        self.loop.run_until_complete(self.live.pop(kind).revert())

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(sorted(self.live)))
        self.journal.release(self.live.pop(kind).id)
        self.crashed.add(kind)

    @rule()
    def sweep_now(self) -> None:
        sweep(FaultJournal(self.directory))
        self.crashed.clear()

    @invariant()
    def after_sweep_nothing_left(self) -> None:
        if not self.live and not self.crashed:
            assert snapshot(self.node) == self.before

    def teardown(self) -> None:
        for fault in self.live.values():
            self.loop.run_until_complete(fault.revert())
        sweep(FaultJournal(self.directory))
        assert snapshot(self.node) == self.before
        self.loop.close()


def test_state_machine_against_real_container(scratch: Scratch, tmp_path: Path) -> None:
    inv, node = scratch
    RealFaultSequences.inv, RealFaultSequences.node = inv, node
    RealFaultSequences.directory = tmp_path / "journal"
    run_state_machine_as_test(RealFaultSequences, settings=settings(
        max_examples=5, stateful_step_count=6, deadline=None,
        suppress_health_check=list(HealthCheck),
    ))


@pytest.mark.parametrize(("signum", "code"), [
    (signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129),
])
def test_sigterm_sighup_and_ctrl_c_revert(
        signum: int, code: int, scratch: Scratch, tmp_path: Path) -> None:
    inv, node = scratch
    inventory_file = write_inventory(inv, tmp_path / "inventory.yaml")
    before = snapshot(node)
    proc = subprocess.Popen(
        [*FAULTKIT, "inject", "pause", "--node", node.name, "--inventory", str(inventory_file),
         "--duration", "60s", "--journal-dir", str(tmp_path / "journal")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for_line(proc, "inject_end", 60)
        assert snapshot(node)["paused"] is True
        proc.send_signal(signum)
        assert proc.wait(30) == code
        assert snapshot(node) == before
        assert FaultJournal(tmp_path / "journal").unreverted() == []
    finally:
        if proc.poll() is None:
            proc.kill()
        sweep(FaultJournal(tmp_path / "journal"))
