"""End-to-end tests drive the ``faultkit`` CLI and the scenario suite as a user does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from testbed.lab import Lab
    from tests.e2e.known_good_gate import PlantedGate

REPO = Path(__file__).resolve().parents[2]
FAULTKIT = [sys.executable, "-m", "faultkit.cli"]


def run_cli(*args: str, timeout: float = 600, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FAULTKIT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )


@pytest.fixture(scope="session")
def planted_gate(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> PlantedGate:
    """The known-good gate, run once, with planted secrets (see ``known_good_gate``)."""
    from tests.e2e.known_good_gate import run_planted_gate

    return run_planted_gate(tmp_path_factory.mktemp("planted-gate"))
