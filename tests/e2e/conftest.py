"""End-to-end tests drive the ``faultkit`` CLI and the scenario suite as a user does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAULTKIT = [sys.executable, "-m", "faultkit.cli"]


def run_cli(*args: str, timeout: float = 600, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FAULTKIT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False
    )
