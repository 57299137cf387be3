"""Where the test code finds the repository and its fixtures, whatever a test's depth."""

from __future__ import annotations

from pathlib import Path

#: the repository's root (the directory holding pyproject.toml)
REPO = Path(__file__).resolve().parents[1]
#: hand-made run directories, recorded Prometheus answers and other test inputs
FIXTURES = REPO / "tests" / "fixtures"
