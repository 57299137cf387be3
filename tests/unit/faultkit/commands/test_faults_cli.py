"""`faultkit inject` / `faultkit sweep` argument handling (no Docker: dry runs and refusals)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import testbed
from faultkit import cli as cli_module
from faultkit.cli import cli
from faultkit.commands import input as input_module
from faultkit.commands.inject import _hold, parse_duration, parse_params
from faultkit.commands.input import default_inventory
from faultkit.errors import JournalUnwritable


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("2m", 120), ("500ms", 0.5),
                                               ("45", 45), ("1h", 3600)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_parse_duration_rejects_garbage() -> None:
    with pytest.raises(click.BadParameter):
        parse_duration("soon")


def test_parse_params() -> None:
    assert parse_params(("mode=blackhole", "percent=30")) == {"mode": "blackhole", "percent": "30"}
    with pytest.raises(click.BadParameter):
        parse_params(("novalue",))


def test_the_default_inventory_is_the_local_file_else_the_installed_labs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/inventory.md, "Which inventory": ./inventory.yaml, else the lab's."""
    monkeypatch.chdir(tmp_path)
    lab = default_inventory()
    assert lab == Path(testbed.__file__).resolve().parent / "inventory.yaml" and lab.is_file()
    (tmp_path / "inventory.yaml").write_text("nodes: []\n")
    assert default_inventory().resolve() == tmp_path / "inventory.yaml"


def test_without_a_lab_the_default_is_the_local_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(input_module, "entry_points", lambda group: [])
    assert default_inventory() == Path("inventory.yaml")


def test_the_lab_command_comes_through_its_entry_point() -> None:
    """faultkit names no lab: the testbed's command is a plugin of the faultkit group."""
    assert "testbed" not in cli_module.COMMANDS
    assert "testbed" in cli_module.plugin_commands()
    shown = CliRunner().invoke(cli_module.cli, ["--help"])
    assert shown.exit_code == 0
    assert "bring the local lab up / down / show its status" in shown.output
    assert CliRunner().invoke(cli_module.cli, ["testbed", "--help"]).exit_code == 0


def test_nothing_below_the_lab_names_it_in_a_string() -> None:
    """The `no-testbed` contract sees imports; this sees what it cannot: a module path or
    package resource of the lab written as a string in faultkit, slo or reports."""
    root = Path(cli_module.__file__).resolve().parents[1]
    named = re.compile(r"""(?:["']testbed[.:]\w|files\(\s*["']testbed["'])""")
    found = [f"{path.relative_to(root)}:{n}" for package in ("faultkit", "slo", "reports")
             for path in sorted((root / package).rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if named.search(line)]
    assert found == []


INVENTORY = """
nodes:
  - name: a
    engine: llamacpp
    base_url: http://127.0.0.1:9
    model: m
    docker: {container: a}
    faults: [kill]
  - name: p
    engine: llamacpp
    base_url: http://127.0.0.1:9
    model: m
    docker: {container: p}
    faults: ["*"]
    protected: true
"""


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    return path


def test_dry_run_prints_plan_and_writes_nothing(inv: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["inject", "kill", "--node", "a", "--inventory", str(inv),
                                      "--dry-run", "--param", "docker_kill=true",
                                      "--journal-dir", str(tmp_path / "j")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("plan: kill on a (a): docker_kill=True")
    assert "will NOT restart" in result.output
    assert not (tmp_path / "j").exists()


class _RefusedByItsJournal:
    """A fault whose journal record cannot be written: it raises on entry, before acting."""

    def describe(self) -> str:
        return "kill on a"

    async def __aenter__(self) -> None:
        raise JournalUnwritable("cannot write fault journal record: [Errno 28] No space "
                                "left; the fault was not applied")

    async def __aexit__(self, *exc: object) -> None:
        raise AssertionError("a fault that never entered is never exited")


def test_a_fault_its_journal_refuses_is_never_announced_as_applied(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``faultkit inject`` says "applied:" once the fault holds, never before its journal
    record is written: a full disk reads as one line saying it was not applied."""
    with pytest.raises(JournalUnwritable):
        asyncio.run(_hold(_RefusedByItsJournal(), 1.0))
    assert "applied" not in capsys.readouterr().out


@pytest.mark.parametrize(("kind", "node_name", "message"), [
    ("pause", "a", "does not allow fault 'pause'"),
    ("kill", "p", "is protected"),
    ("kill", "zz", "no node 'zz'"),
    ("kill", "a", "no param 'speed'"),
])
def test_refusals_exit_nonzero(kind: str, node_name: str, message: str, inv: Path,
                               tmp_path: Path) -> None:
    args = ["inject", kind, "--node", node_name, "--inventory", str(inv),
            "--journal-dir", str(tmp_path / "j")]
    if message.startswith("no param"):
        args += ["--param", "speed=3"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    assert message in result.output
    assert list((tmp_path / "j").glob("*.json")) == []


def test_sweep_with_empty_journal(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sweep", "--journal-dir", str(tmp_path / "j")])
    assert result.exit_code == 0
    assert "nothing to sweep" in result.output
