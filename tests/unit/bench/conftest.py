"""The bench scripts run as scripts (no package: each a top-level module importing its
siblings by name); their tests import them the same way, with bench/ on the path."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = str(Path(__file__).resolve().parents[3] / "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)
