"""The CLI as a user runs it: clear errors, non-zero exits, readable status."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.lab import Lab
from tests.e2e.conftest import REPO, run_cli


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for command in (
        "testbed",
        "inventory",
        "load",
        "inject",
        "sweep",
        "rules",
        "budget",
        "report",
        "gate",
        "pager",
    ):
        assert command in result.stdout


def test_inventory_check_names_the_typo_line(tmp_path: Path) -> None:
    good = (REPO / "testbed" / "inventory.yaml").read_text()
    assert run_cli("inventory", "check", str(REPO / "testbed" / "inventory.yaml")).returncode == 0
    bad = tmp_path / "inv.yaml"
    bad.write_text(good.replace("    health_path: /health\n", "    helth_path: /health\n", 1))
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "helth_path" in text)
    result = run_cli("inventory", "check", str(bad))
    assert result.returncode == 1
    assert f"inv.yaml:{line} nodes[0].helth_path: unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_node_is_one_clear_error() -> None:
    result = run_cli("inject", "kill", "--node", "no-such-node", "--dry-run")
    assert result.returncode != 0
    assert "no-such-node" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.docker
def test_testbed_status_shows_every_node_ready_and_scraped(lab: Lab) -> None:
    result = run_cli("testbed", "status")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    for node in lab.lab_nodes():
        assert node.name in rows, result.stdout
        assert " ready " in rows[node.name] and " up " in rows[node.name], rows[node.name]
    assert "Prometheus http://127.0.0.1:19090: ready" in result.stdout
    assert "generation probe http://127.0.0.1:19115: ready" in result.stdout


@pytest.mark.docker
def test_testbed_up_is_idempotent_and_fast_when_running(lab: Lab) -> None:
    before = {c.name: c.id for c in lab_containers()}
    result = run_cli("testbed", "up")
    assert result.returncode == 0, result.stderr
    after = {c.name: c.id for c in lab_containers()}
    assert before == after, "a second `up` must keep the running containers"


def lab_containers() -> list:  # type: ignore[type-arg]
    from faultkit.constants import LABEL_OWNER
    from faultkit.docker.host import DockerHost

    return DockerHost().labelled(LABEL_OWNER, "testbed")
