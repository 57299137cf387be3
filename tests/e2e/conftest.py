"""End-to-end tests drive the ``faultkit`` CLI and the scenario suite as a user does."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.e2e.kernel_log import KernelLog

if TYPE_CHECKING:
    from testbed.lab import Lab
    from tests.e2e.known_good_gate import PlantedGate
    from tests.e2e.scenario_suite import Outcome

REPO = Path(__file__).resolve().parents[2]
FAULTKIT = [sys.executable, "-m", "faultkit.cli"]


def run_cli(
    *args: str, timeout: float = 600, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``faultkit ARGS…`` as a user runs it (``env``: its whole environment; default ours)."""
    return subprocess.run(
        [*FAULTKIT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
        check=False, env=env,
    )


@dataclass(frozen=True)
class SuiteRun:
    """The session's run of the whole scenario catalogue, and its known-good gate."""

    code: int  # the worst exit code of the scenario processes
    outcomes: dict[str, Outcome]
    output: str
    #: every run directory of the catalogue is under it (the gates' --baseline-dir)
    runs_root: Path
    #: the gate, or what went wrong running it: raised by the ``planted_gate`` fixture, so
    #: it fails the gate's two tests, not the catalogue's
    planted_gate: PlantedGate | Exception


@pytest.fixture(scope="session")
def kernel_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelLog]:
    """The kernel log for the session: the independent record of every OOM kill."""
    log = KernelLog(tmp_path_factory.mktemp("kernel") / "dmesg.txt").start()
    yield log
    log.stop()


@pytest.fixture(scope="session")
def suite_run(lab: Lab, kernel_log: KernelLog,
              tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """The scenario catalogue in its lanes (``scenario_suite.run_scenario_lanes``), then the
    known-good gate of ``sim-vllm`` (``known_good_gate``, planted secrets) — after the
    lanes, not beside the vLLM lane: beside it, the gate's load slows vLLM's rollout
    recovery past its 150 s objective (docs/ci.md)."""
    from tests.e2e.known_good_gate import run_planted_gate
    from tests.e2e.scenario_suite import run_scenario_lanes

    runs_root = tmp_path_factory.mktemp("suite")
    code, outcomes, output = run_scenario_lanes(runs_root, lab.inventory)
    result: PlantedGate | Exception
    try:
        result = run_planted_gate(tmp_path_factory.mktemp("planted-gate"))
    except Exception as exc:  # kept: the gate's own tests raise it
        result = exc
    return SuiteRun(code, outcomes, output, runs_root, result)


@pytest.fixture(scope="session")
def planted_gate(suite_run: SuiteRun) -> PlantedGate:
    """The known-good gate, run once, with planted secrets (see ``known_good_gate``)."""
    if isinstance(suite_run.planted_gate, Exception):
        raise suite_run.planted_gate
    return suite_run.planted_gate
