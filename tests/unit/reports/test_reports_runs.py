"""`faultkit runs`: the run and gate directories under --runs-dir, newest first, from the
fixture run directories (read through reports.load)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from reports.runs import list_runs, stamp_time
from tests.unit.reports_helpers import RUNS

#: (directory name, fixture) in creation order: stamps one minute apart
LAYOUT = (
    ("20260101T100000.000Z-kill-sim-vllm-a", "pass-kill"),
    ("20260101T100100.000Z-memory_squeeze-sim-vllm-b", "fail-oom"),
    ("20260101T100200.000Z-bad_input-llama", "bad-input"),
    ("20260101T100300.000Z-loss-llamacpp-a", "not-detected"),
)
GATE = "gate-20260101T100400Z-sim-vllm-a-ctx-32k"


def _copy(src: Path, dst: Path) -> None:
    """Copy a fixture run, moving its start to the time its directory name says."""
    shutil.copytree(src, dst)
    run = json.loads((dst / "run.json").read_text())
    start = stamp_time(dst.name)
    assert start is not None
    run["t_end"] = start + (run["t_end"] - run["t_start"])
    run["t_start"] = start
    (dst / "run.json").write_text(json.dumps(run))


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """Four runs, a gate with one scenario run inside, a half-written run and some clutter."""
    root = tmp_path / "runs"
    root.mkdir()
    for name, fixture in LAYOUT:
        _copy(RUNS / fixture, root / name)
    gate = root / GATE
    _copy(RUNS / "failed-rollout", gate / "runs" / "20260101T100410.000Z-rollout-sim-vllm-a")
    (gate / "gate.json").write_text(json.dumps({
        "node": "sim-vllm-a", "candidate": "ctx-32k", "decision": "fail",
        "why": "1 FAIL of 2 gate scenarios", "started_at": stamp_time(GATE),
        "finished_at": (stamp_time(GATE) or 0) + 150,
        "scenarios": [{"name": "test_rollout[sim-vllm-a]", "passed": False, "lost": 161},
                      {"name": "test_kill[sim-vllm-a]", "passed": True, "lost": 19}],
    }))
    crashed = root / "20260101T100500.000Z-pause-sim-vllm-a"  # newest: only run.json so far
    crashed.mkdir()
    (crashed / "run.json").write_text(json.dumps({"scenario": "pause", "node": "sim-vllm-a"}))
    (root / "notes.txt").write_text("not a run")
    (root / "scratch").mkdir()
    return root


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["runs", *args])
    return result.exit_code, result.output


def test_lists_newest_first_one_aligned_line_each(runs_dir: Path) -> None:
    code, out = _run("--runs-dir", str(runs_dir))
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].split() == [
        "STAMP", "SCENARIO", "NODE", "VERDICT", "DETECTION", "RECOVERY", "LOST",
    ]
    stamps = [line.split()[0] for line in lines[1:]]
    assert stamps == [
        "20260101T100500.000Z", "20260101T100400Z", "20260101T100300.000Z",
        "20260101T100200.000Z", "20260101T100100.000Z", "20260101T100000.000Z",
    ]
    # aligned: every column starts at the same offset on every line
    starts = [lines[0].index(h) for h in ("SCENARIO", "NODE", "VERDICT", "LOST")]
    for line in lines[1:]:
        for start in starts:
            assert line[start - 2 : start] == "  " and line[start] != " ", (line, start)


def _cols(out: str, stamp: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(stamp))
    return [cell for cell in line.split("  ") if cell.strip()]


def test_each_line_says_what_happened(runs_dir: Path) -> None:
    _, out = _run("--runs-dir", str(runs_dir))
    assert [c.strip() for c in _cols(out, "20260101T100000.000Z")] == [
        "20260101T100000.000Z", "kill", "sim-vllm-a", "PASS", "4.0 s (alert)", "8.3 s", "19",
    ]
    assert [c.strip() for c in _cols(out, "20260101T100100.000Z")][3:] == [
        "FAIL", "5.0 s (alert)", "31.5 s", "65",
    ]
    assert [c.strip() for c in _cols(out, "20260101T100200.000Z")][3:] == [
        "PASS", "n/a", "n/a", "0",
    ]
    assert [c.strip() for c in _cols(out, "20260101T100300.000Z")][3:] == [
        "FAIL", "not detected", "25.5 s", "10",
    ]
    assert [c.strip() for c in _cols(out, "20260101T100400Z")][1:] == [
        "gate ctx-32k (1/2 passed)", "sim-vllm-a", "FAIL", "—", "—", "180",
    ]
    assert [c.strip() for c in _cols(out, "20260101T100500.000Z")][1:] == [
        "pause", "sim-vllm-a", "—", "—", "—", "—",
    ]


def test_json_and_limit(runs_dir: Path) -> None:
    code, out = _run("--runs-dir", str(runs_dir), "--json", "--limit", "3")
    assert code == 0, out
    entries = json.loads(out)
    assert [e["name"] for e in entries] == [
        "20260101T100500.000Z-pause-sim-vllm-a", GATE, "20260101T100300.000Z-loss-llamacpp-a",
    ]
    gate, loss = entries[1], entries[2]
    assert gate["kind"] == "gate" and gate["verdict"] == "FAIL"
    assert (gate["passed"], gate["scenarios"], gate["lost"]) == (1, 2, 180)
    assert loss["verdict"] == "FAIL" and loss["detection_s"] is None
    assert (loss["recovery_s"], loss["lost"], loss["requests"]) == (25.5, 10, 130)
    assert entries[0]["verdict"] is None and entries[0]["lost"] is None
    assert Path(loss["path"]) == runs_dir / loss["name"]
    code, out = _run("--runs-dir", str(runs_dir), "--limit", "1")
    assert len(out.splitlines()) == 2


def test_a_gate_still_running_is_listed_without_a_decision(runs_dir: Path) -> None:
    (runs_dir / GATE / "gate.json").unlink()
    gate = next(e for e in list_runs(runs_dir) if e.kind == "gate")
    assert gate.verdict is None
    assert gate.problems == ("gate.json: not written (gate running or interrupted)",)
    nested = [e for e in list_runs(runs_dir, include_gate_runs=True) if GATE in str(e.path)]
    assert [e.scenario for e in nested] == ["rollout", "gate"]  # newest first


def test_torn_files_do_not_stop_the_listing(runs_dir: Path) -> None:
    (runs_dir / LAYOUT[0][0] / "verdict.json").write_text("{torn")
    entry = next(e for e in list_runs(runs_dir) if e.path.name == LAYOUT[0][0])
    assert entry.verdict is None and entry.lost == 19
    assert any("verdict.json: unreadable" in p for p in entry.problems)


def test_empty_and_missing_runs_dirs(tmp_path: Path) -> None:
    code, out = _run("--runs-dir", str(tmp_path))
    assert code == 0 and "no run directories under" in out
    assert json.loads(_run("--runs-dir", str(tmp_path), "--json")[1]) == []
    code, out = _run("--runs-dir", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in out
    code, out = _run("--runs-dir", str(tmp_path), "--limit", "0")
    assert code == 2


def test_stamps() -> None:
    assert stamp_time("20260101T120000.500Z-kill-n") == 1767268800.5
    assert stamp_time("gate-20260101T120000Z-n-c") == 1767268800.0
    assert stamp_time("pass-kill") is None
