"""The journal is private and follows no symlink; the sweep trusts the inventory, not the
journal, for what to run, and does not replay old records unless forced (CLI and plugin)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

import faultkit.plugin as plugin
from faultkit.cli import cli
from faultkit.errors import JournalError
from faultkit.inventory import Inventory, Node, ServingConfig
from faultkit.journal import FaultJournal, JournalRecord
from faultkit.sweep import MAX_AGE_S, sweep
from tests.unit.faults_fake import WORLD


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _record(rid: str, undo: list[dict[str, Any]], *, age_s: float = 0.0) -> JournalRecord:
    return JournalRecord(id=rid, kind="rollout", node="n", description=f"test {rid}",
                         undo=undo, t_created=time.time() - age_s)


def orphan(journal: FaultJournal, record: JournalRecord) -> None:
    """Write ``record`` as a harness that then died would have left it."""
    journal.begin(record)
    journal.release(record.id)


def inventory(rollback: str | None = None, source: str = "inv.yaml") -> Inventory:
    configs = {"cfg": ServingConfig(image="img", apply="true", rollback=rollback)} if rollback \
        else {}
    return Inventory(nodes=[Node(name="n", engine="sim", personality="vllm", model="m",
                                 base_url="http://127.0.0.1:9")],
                     serving_configs=configs, source=source)


# permissions and symlinks ----------------------------------------------------------------

def test_directory_0700_and_files_0600(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path / "home" / "journal")
    journal.begin(_record("r1", []))
    assert mode(journal.directory) == 0o700
    assert mode(journal.directory / "r1.json") == 0o600
    assert mode(journal.directory / "r1.lock") == 0o600


def test_existing_loose_directory_is_tightened(tmp_path: Path) -> None:
    loose = tmp_path / "journal"
    loose.mkdir()
    loose.chmod(0o755)
    FaultJournal(loose)
    assert mode(loose) == 0o700


def test_symlinked_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "journal").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(JournalError, match="symlink or not a directory"):
        FaultJournal(tmp_path / "journal")


def test_records_are_created_exclusively_without_following_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
        opened.append((str(path), flags, mode))
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(os, "open", spy)
    journal = FaultJournal(tmp_path / "j")
    journal.begin(_record("r1", []))
    creates = [(p, f, m) for p, f, m in opened if f & os.O_CREAT]
    tmp = [(f, m) for p, f, m in creates if p.endswith(".tmp")]
    locks = [(f, m) for p, f, m in creates if p.endswith(".lock")]
    assert tmp and all(f & os.O_EXCL and f & os.O_NOFOLLOW and m == 0o600 for f, m in tmp)
    assert locks and all(f & os.O_NOFOLLOW and m == 0o600 for f, m in locks)


def test_planted_symlinks_are_never_followed(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path / "j")
    victim = tmp_path / "victim.json"
    victim.write_text('{"id": "r1", "kind": "x", "node": "n", "description": "d"}')
    (journal.directory / "r1.json").symlink_to(victim)
    assert journal.read("r1") is None  # not followed: quarantined as unreadable
    assert (journal.directory / "r1.json.corrupt").is_symlink()
    journal.begin(_record("r2", []))
    (journal.directory / "r2.json").unlink()
    (journal.directory / "r2.json").symlink_to(victim)
    journal.update(_record("r2", []))  # replaces the link, never writes through it
    assert not (journal.directory / "r2.json").is_symlink()
    assert victim.read_text().startswith('{"id": "r1"')
    (journal.directory / "r3.lock").symlink_to(victim)
    with pytest.raises(JournalError, match="should be a plain file"):
        journal.begin(_record("r3", []))


# the sweep policy ------------------------------------------------------------------------

def test_shell_step_runs_only_as_an_inventory_rollback(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command = f"touch {marker}"
    journal = FaultJournal(tmp_path / "j")
    orphan(journal, _record("r1", [{"op": "shell", "command": command}]))

    for inv in (None, inventory(rollback="true")):
        lines = sweep(journal, inventory=inv)
        assert len(lines) == 1 and lines[0].startswith("REFUSED to replay r1"), lines
        assert f"`{command}`" in lines[0] and "Nothing was run" in lines[0]
        assert str(journal.path_of("r1")) in lines[0]
        assert not marker.exists()
        assert [r.id for r in journal.orphans()] == ["r1"]  # left for a human

    lines = sweep(journal, inventory=inventory(rollback=command))
    assert lines[0].startswith("reverted r1")
    assert marker.exists()
    assert journal.orphans() == []


def test_old_records_are_listed_not_replayed_unless_forced(tmp_path: Path) -> None:
    WORLD["old"] = "broken"
    journal = FaultJournal(tmp_path / "j")
    orphan(journal, _record("r1", [{"op": "fake_restore", "key": "old", "value": "ok"}],
                            age_s=MAX_AGE_S + 60))
    lines = sweep(journal)
    assert len(lines) == 1 and lines[0].startswith("NOT REPLAYED r1"), lines
    assert "1 h 1 min ago" in lines[0] and "--force" in lines[0]
    assert WORLD["old"] == "broken"
    assert sweep(journal, max_age_s=2 * MAX_AGE_S)[0].startswith("reverted r1")
    assert WORLD["old"] == "ok"

    WORLD["old"] = "broken"
    orphan(journal, _record("r2", [{"op": "fake_restore", "key": "old", "value": "ok"}],
                            age_s=10 * MAX_AGE_S))
    assert sweep(journal, force=True)[0].startswith("reverted r2")
    assert WORLD["old"] == "ok"


def test_old_record_with_nothing_to_undo_is_just_closed(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path / "j")
    orphan(journal, _record("r1", [], age_s=10 * MAX_AGE_S))
    assert sweep(journal)[0].startswith("reverted r1")
    assert journal.orphans() == []


def test_force_does_not_vouch_for_a_shell_step(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path / "j")
    orphan(journal, _record("r1", [{"op": "shell", "command": "true"}], age_s=10 * MAX_AGE_S))
    assert sweep(journal, force=True)[0].startswith("REFUSED")


# the CLI ---------------------------------------------------------------------------------

def test_sweep_cli_refuses_lists_and_exits_1(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        "nodes:\n  - {name: n, engine: llamacpp, base_url: 'http://127.0.0.1:9', model: m}\n"
        "serving_configs:\n  c: {image: i, apply: 'true', rollback: 'true'}\n"
    )
    journal = FaultJournal(tmp_path / "j")
    orphan(journal, _record("r1", [{"op": "shell", "command": f"touch {marker}"}]))
    args = ["sweep", "--journal-dir", str(journal.directory), "--inventory", str(inv)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert "REFUSED to replay r1" in result.output and "not the rollback: of any" in result.output
    assert not marker.exists()


def test_sweep_cli_max_age_and_force(tmp_path: Path) -> None:
    journal = FaultJournal(tmp_path / "j")
    WORLD["cli"] = "broken"
    orphan(journal, _record("r1", [{"op": "fake_restore", "key": "cli", "value": "ok"}],
                            age_s=2 * 3600))
    base = ["sweep", "--journal-dir", str(journal.directory)]
    result = CliRunner().invoke(cli, base)
    assert result.exit_code == 1 and "NOT REPLAYED r1" in result.output
    result = CliRunner().invoke(cli, [*base, "--max-age", "3h"])
    assert result.exit_code == 0 and "reverted r1" in result.output, result.output
    assert WORLD["cli"] == "ok"
    bad = CliRunner().invoke(cli, [*base, "--max-age", "soon"])
    assert bad.exit_code == 2 and "Invalid value for '--max-age'" in bad.stderr


# the plugin's session sweep ---------------------------------------------------------------

def test_pytest_session_sweep_follows_the_same_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path / "home"))
    trusted, untrusted = tmp_path / "trusted", tmp_path / "untrusted"
    journal = FaultJournal()
    orphan(journal, _record("ok", [{"op": "shell", "command": f"touch {trusted}"}]))
    orphan(journal, _record("evil", [{"op": "shell", "command": f"touch {untrusted}"}]))
    WORLD["plugin"] = "broken"
    orphan(journal, _record("old", [{"op": "fake_restore", "key": "plugin", "value": "ok"}],
                            age_s=2 * MAX_AGE_S))
    lines: list[str] = []
    config = SimpleNamespace(option=SimpleNamespace(collectonly=False),
                             get_terminal_writer=lambda: SimpleNamespace(line=lines.append))
    # looked up where sweep_left_faults is implemented (the package re-exports it)
    monkeypatch.setattr(plugin.collection, "settings_of",
                        lambda cfg: SimpleNamespace(dry_run=False))
    monkeypatch.setattr(plugin.collection, "inventory_of",
                        lambda cfg: inventory(rollback=f"touch {trusted}"))
    plugin.sweep_left_faults(config)  # type: ignore[arg-type]
    assert trusted.exists() and not untrusted.exists()
    assert WORLD["plugin"] == "broken"
    text = "\n".join(lines)
    assert "reverted ok" in text and "REFUSED to replay evil" in text
    assert "NOT REPLAYED old" in text
