"""One fault per node: the node lock refuses a second fault (same process or another), names
its holder, frees itself when the holder dies, shows in `faultkit sweep --list`, and makes
the sweep wait for a live fault on the node."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.synchronize
import os
import re
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.errors import FaultRefused, JournalError, NodeBusy
from faultkit.faults import make_fault
from faultkit.faults.locks import NodeLock, lock_key
from faultkit.inventory import Inventory
from faultkit.journal import FaultJournal, JournalRecord, NodeHolder
from faultkit.sweep import sweep
from tests.unit.faults_fake import WORLD, FakeFault, node


@pytest.fixture(autouse=True)
def _clean_world() -> None:
    WORLD.clear()


def _hold_in_child(directory: str, ready: multiprocessing.synchronize.Event,
                   ids: multiprocessing.Queue[str]) -> None:
    """Inject a fake fault on n1 in this (child) process and keep it applied."""

    async def main() -> None:
        fault = FakeFault(node(), journal=FaultJournal(Path(directory)))
        await fault.inject()
        ids.put(fault.id)
        ready.set()
        await asyncio.sleep(60)

    asyncio.run(main())


async def test_second_fault_on_the_node_in_this_process_is_refused(tmp_path: Path) -> None:
    first = FakeFault(node(), journal=FaultJournal(tmp_path), key="a")
    second = FakeFault(node(), journal=FaultJournal(tmp_path), key="b")
    async with first:
        with pytest.raises(NodeBusy) as refused:  # a FaultRefused the experiment can tell
            await second.inject()
        message = str(refused.value)
        assert f"locked by fault {first.id} (pause, pid {os.getpid()}, " in message
        assert "Nothing was done" in message
        assert "b" not in WORLD  # the second fault did not act
        assert [r.id for r in FaultJournal(tmp_path).records()] == [first.id]
        await second.revert()  # refused: nothing to revert, the first stays applied
        assert WORLD["a"] == "broken"
    async with second:  # the first was reverted: the node is free again
        assert WORLD["b"] == "broken"
    assert WORLD == {"a": "ok", "b": "ok"}


async def test_one_container_is_one_lock_whatever_the_node_is_called(tmp_path: Path) -> None:
    docker = {"host": "unix:///var/run/docker.sock", "container": "engine"}
    first = FakeFault(node("a", docker=docker), journal=FaultJournal(tmp_path), key="a")
    alias = FakeFault(node("b", docker=docker), journal=FaultJournal(tmp_path), key="b")
    other = FakeFault(node("c", docker={**docker, "container": "other"}),
                      journal=FaultJournal(tmp_path), key="c")
    async with first:
        with pytest.raises(FaultRefused, match=f"node a locked by fault {first.id}"):
            await alias.inject()
        async with other:
            assert WORLD["c"] == "broken"


def test_other_process_holds_then_dies(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    ids: multiprocessing.Queue[str] = ctx.Queue()
    proc = ctx.Process(target=_hold_in_child, args=(str(tmp_path), ready, ids))
    proc.start()
    try:
        assert ready.wait(10)
        held_by = ids.get(timeout=5)
        fault = FakeFault(node(), journal=FaultJournal(tmp_path), key="mine")
        with pytest.raises(FaultRefused) as refused:
            asyncio.run(fault.inject())
        assert re.search(rf"node n1 locked by fault {held_by} \(pause, pid {proc.pid}, \d+ s\)",
                         str(refused.value)), refused.value
        assert "mine" not in WORLD
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)  # the holder dies: the kernel drops its locks
        proc.join(10)
        # ... but its fault is still applied: the node is blocked until the sweep reverts it
        blocked = FakeFault(node(), journal=FaultJournal(tmp_path), key="mine")
        with pytest.raises(FaultRefused, match=f"node n1 is BLOCKED by fault {held_by} "):
            asyncio.run(blocked.inject())
        assert "mine" not in WORLD
        (line,) = sweep(FaultJournal(tmp_path))
        assert line.startswith(f"reverted {held_by} ")
        again = FakeFault(node(), journal=FaultJournal(tmp_path), key="mine")

        async def inject_and_revert() -> None:
            async with again:
                assert WORLD["mine"] == "broken"

        asyncio.run(inject_and_revert())
        assert WORLD["mine"] == "ok"
    finally:
        if proc.is_alive():
            proc.kill()


def _lock_and_exit(directory: str) -> None:
    journal = FaultJournal(Path(directory))
    holder = NodeHolder(node="n1", fault_id="kill-n1-dead", kind="kill", pid=os.getpid(),
                        t_locked=time.time())
    assert journal.nodes.take("node n1", holder) is None
    os._exit(0)  # no cleanup at all, as after a SIGKILL


def test_dead_holder_frees_the_lock(tmp_path: Path) -> None:
    proc = multiprocessing.get_context("fork").Process(target=_lock_and_exit,
                                                       args=(str(tmp_path),))
    proc.start()
    proc.join(10)
    assert proc.exitcode == 0
    journal = FaultJournal(tmp_path)
    assert journal.nodes.holders() == []  # the file stays, with a stale holder: not held
    me = NodeHolder(node="n1", fault_id="pause-n1-x", kind="pause", pid=os.getpid(), t_locked=1)
    assert journal.nodes.take("node n1", me) is None
    assert [h.fault_id for h in journal.nodes.holders()] == ["pause-n1-x"]
    journal.nodes.drop("node n1")
    assert journal.nodes.holders() == []


def test_node_lock_files_are_private_and_never_followed(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path / "j")
    me = NodeHolder(node="n1", fault_id="f", kind="pause", pid=os.getpid(), t_locked=1)
    assert journal.nodes.take("node n1", me) is None
    (path,) = journal.directory.glob("node-*.lock")
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600
    journal.nodes.drop("node n1")
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    path.unlink()
    path.symlink_to(target)
    with pytest.raises(JournalError, match="should be a plain file"):
        journal.nodes.take("node n1", me)
    assert target.read_text() == "precious"


def test_sweep_list_shows_the_holder(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    ids: multiprocessing.Queue[str] = ctx.Queue()
    proc = ctx.Process(target=_hold_in_child, args=(str(tmp_path), ready, ids))
    proc.start()
    try:
        assert ready.wait(10)
        held_by = ids.get(timeout=5)
        result = CliRunner().invoke(cli, ["sweep", "--list", "--journal-dir", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert f"its harness (pid {proc.pid}) is running" in result.output
        assert re.search(rf"node n1 locked by fault {held_by} \(pause, pid {proc.pid}, \d+ s\)",
                         result.output), result.output
        assert [r.id for r in FaultJournal(tmp_path).unreverted()] == [held_by]  # untouched
    finally:
        proc.kill()
        proc.join(10)
    result = CliRunner().invoke(cli, ["sweep", "--list", "--journal-dir", str(tmp_path)])
    assert f"BLOCKED node n1: fault {held_by} " in result.output
    assert "by a harness that is gone" in result.output
    assert "locked by" not in result.output


async def test_sweep_leaves_a_record_whose_node_is_locked_by_a_live_fault(
    tmp_path: Path,
) -> None:
    # a fault runs on top of a rollout (which holds the fault lock only while injecting),
    # then the rollout's harness dies: its record is orphaned under a live fault
    journal = FaultJournal(tmp_path)
    crashed = _FakeRollout(node(), journal=journal, key="a")
    await crashed.inject()
    live = FakeFault(node(), journal=FaultJournal(tmp_path), key="b")
    async with live:
        journal.release(crashed.id)  # its harness "died": its record is free for the sweep
        (line,) = sweep(FaultJournal(tmp_path))
        assert line.startswith(f"BUSY {crashed.id}")
        assert f"locked by fault {live.id}" in line
        assert WORLD["a"] == "broken"
    (line,) = sweep(FaultJournal(tmp_path))
    assert line.startswith(f"reverted {crashed.id}")
    assert WORLD["a"] == "ok"


class _FakeRollout(FakeFault):
    """Holds the node's locks as ``rollout`` does."""

    kind: ClassVar[str] = "rollout"

    def node_locks(self) -> list[NodeLock]:
        return [NodeLock(self.node, until="inject"), NodeLock(self.node, layer="rollout")]


async def test_faults_run_on_top_of_a_rollout_but_rollouts_do_not_overlap(
    tmp_path: Path,
) -> None:
    rollout = _FakeRollout(node(), journal=FaultJournal(tmp_path), key="config")
    async with rollout:
        async with FakeFault(node(), journal=FaultJournal(tmp_path), key="a"):
            assert WORLD == {"config": "broken", "a": "broken"}
        second = _FakeRollout(node(), journal=FaultJournal(tmp_path), key="other")
        with pytest.raises(FaultRefused, match="another rollout is in place"):
            await second.inject()
    assert WORLD == {"config": "ok", "a": "ok"}


def test_node_restart_locks_every_node_on_its_docker_host() -> None:
    sock, remote = "unix:///var/run/docker.sock", "tcp://10.0.0.2:2375"
    inv = Inventory(nodes=[
        node("a", docker={"host": sock, "container": "a"}),
        node("b", docker={"host": sock, "container": "b"}),
        node("c", docker={"host": remote, "container": "c"}),
    ])
    fault = make_fault("node_restart", "a", inventory=inv, dry_run=True)
    assert [lock.key for lock in fault.node_locks()] == [
        lock_key(inv.node("a")), lock_key(inv.node("b"))]


def test_the_journal_records_the_node_locks_for_the_sweep(tmp_path: Path) -> None:
    fault = FakeFault(node(), journal=FaultJournal(tmp_path))
    asyncio.run(fault.inject())
    (record,) = FaultJournal(tmp_path).records()
    assert record.node_locks == ["node n1"]
    assert JournalRecord.from_json({**record.to_json(), "node_locks": []}).node_locks == []
    asyncio.run(fault.revert())


def test_request_faults_take_no_node_lock() -> None:
    """A flood or oversized prompts change nothing on the node: they combine with a fault
    that does (the memory-squeeze experiment floods the node it squeezes)."""
    inv = Inventory(nodes=[node("a", docker={"host": "unix:///var/run/docker.sock",
                                              "container": "a"})])
    for kind in ("flood", "oversized_context"):
        assert make_fault(kind, "a", inventory=inv, dry_run=True).node_locks() == []
    assert [lock.key for lock in make_fault("pause", "a", inventory=inv,
                                            dry_run=True).node_locks()] == [
        lock_key(inv.node("a"))]


async def test_a_record_is_claimed_only_under_its_node_locks(tmp_path: Path) -> None:
    """While a sweeper holds a record's claim the record looks live, so a new fault's
    BLOCKED check would not see it: the sweep must already hold the node's locks then, so
    the new fault is refused as busy instead of stacking on the fault left applied."""
    crashed = FakeFault(node(), journal=FaultJournal(tmp_path), key="a")
    await crashed.inject()
    assert crashed.journal is not None
    crashed.journal.release(crashed.id)  # its harness "died"
    crashed.journal.nodes.drop(lock_key(node()))
    sweeper = FaultJournal(tmp_path)
    seen: list[str] = []
    claim = sweeper.claim

    @contextlib.contextmanager
    def claim_then_try_a_new_fault(record_id: str) -> Iterator[JournalRecord | None]:
        with claim(record_id) as claimed:
            assert claimed is not None
            seen.append("claimed")
            # the record is claimed (it looks live): a new fault on the node now
            newcomer = FakeFault(node(), journal=FaultJournal(tmp_path), key="b")
            with pytest.raises(FaultRefused, match="sweep of pause"):
                asyncio.run(newcomer.inject())
            assert "b" not in WORLD
            yield claimed

    sweeper.claim = claim_then_try_a_new_fault  # type: ignore[method-assign]
    (line,) = await asyncio.to_thread(sweep, sweeper)
    assert seen == ["claimed"] and line.startswith(f"reverted {crashed.id}"), line
    assert WORLD["a"] == "ok"
