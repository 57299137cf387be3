"""The harness torture, a few trials per fault kind (docs/faults.md's table comes from
``bench/fault_torture.py``, 20 per kind): kill ``faultkit inject`` between its journal write
and its revert, sweep, and find nothing left behind — judged by Docker's inspect and the
kernel's rule tables (``testbed.scratch.snapshot``), not by what faultkit reports."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from faultkit.docker.host import docker_host
from faultkit.inventory import Inventory, Node
from testbed.scratch import remove_scratch, write_inventory
from testbed.torture import CASES, FaultCase, draw_delays, repair, run_trial, torture_node

pytestmark = pytest.mark.docker

#: one early kill (in or just after the act) and one late (in the hold or the revert)
DELAYS = draw_delays(2, seed=7)


@pytest.fixture(scope="module")
def torture(
    lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Node, Path]]:
    inventory, node = torture_node(lab_inventory, "fk-torture")
    inventory_file = write_inventory(inventory, tmp_path_factory.mktemp("torture") / "inv.yaml")
    yield node, inventory_file
    remove_scratch(docker_host(node.docker.host), node.docker.container)  # type: ignore[union-attr]


@pytest.mark.parametrize("delay_s", DELAYS, ids=["early", "late"])
@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_sigkill_then_sweep_leaves_nothing_behind(
    case: FaultCase, delay_s: float, torture: tuple[Node, Path], tmp_path: Path
) -> None:
    node, inventory_file = torture
    trial = run_trial(case, node, inventory_file, tmp_path, signal.SIGKILL, delay_s)
    if trial.left_behind:
        repair(tmp_path / "journal")  # the next trial starts from a clean node
    assert trial.exit_code == -signal.SIGKILL, trial
    assert trial.left_behind == (), trial


@pytest.mark.parametrize("delay_s", [0.0, 0.05, 1.0], ids=["at-journal", "mid-act", "holding"])
def test_ctrl_c_reverts_by_itself(
    delay_s: float, torture: tuple[Node, Path], tmp_path: Path
) -> None:
    node, inventory_file = torture
    case = FaultCase("partition", {"mode": "blackhole"})
    trial = run_trial(case, node, inventory_file, tmp_path, signal.SIGINT, delay_s)
    if trial.left_behind:
        repair(tmp_path / "journal")
    assert trial.exit_code == 128 + signal.SIGINT, trial
    assert trial.sweep == (), trial  # nothing swept: the harness reverted by itself
    assert trial.left_behind == (), trial
