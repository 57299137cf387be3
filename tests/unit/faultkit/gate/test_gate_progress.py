"""``faultkit gate``'s progress: the feed plugin and the scenario list / result lines."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

from faultkit.gate.scenarios import run_scenarios
from faultkit.runtime.progress import Progress

_TESTS = '''
import pytest

def test_ok():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n == 1

@pytest.fixture
def broken():
    raise RuntimeError("setup")

def test_setup_error(broken):
    pass

def test_skipped():
    pytest.skip("not here")

@pytest.mark.slow
def test_deselected():
    pass
'''


def _argv(tmp_path: Path) -> list[str]:
    (tmp_path / "test_some.py").write_text(_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers = slow\n")
    return [sys.executable, "-m", "pytest", str(tmp_path / "test_some.py"), "-q",
            "-p", "no:cacheprovider", "-m", "not slow", "-p", "faultkit.gate.feed"]


def test_plain_lines_list_the_scenarios_then_one_mark_each(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = Progress(live=False, stream=out, tick_s=None)
    code = asyncio.run(run_scenarios(_argv(tmp_path), tmp_path, progress))
    assert code == 1
    lines = out.getvalue().splitlines()
    assert lines[:6] == [
        "5 gate scenarios:",
        "  · test_ok",
        "  · test_param[1]",
        "  · test_param[2]",
        "  · test_setup_error",
        "  · test_skipped",
    ]
    results = [line.rsplit(" (", 1)[0] for line in lines[6:]]
    assert results == [
        "✓ [1/5] test_ok: PASSED",
        "✓ [2/5] test_param[1]: PASSED",
        "✗ [3/5] test_param[2]: FAILED",
        "✗ [4/5] test_setup_error: ERROR",
        "✗ [5/5] test_skipped: SKIPPED",
    ]
    events = [json.loads(line) for line in (tmp_path / "feed.jsonl").read_text().splitlines()]
    assert events[0] == {"event": "collected", "names": [
        "test_ok", "test_param[1]", "test_param[2]", "test_setup_error", "test_skipped"]}


def test_live_mode_writes_pytest_output_to_a_log(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = Progress(live=True, stream=out, tick_s=None)
    code = asyncio.run(run_scenarios(_argv(tmp_path), tmp_path, progress))
    assert code == 1
    text = out.getvalue()
    assert "✓ [1/5] test_ok: PASSED" in text and "✗ [5/5] test_skipped: SKIPPED" in text
    assert "1 failed, 2 passed, 1 skipped" in (tmp_path / "pytest.log").read_text()
