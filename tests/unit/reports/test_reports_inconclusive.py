"""Incident reports for INCONCLUSIVE verdicts and harness interventions, on copies of the
hand-made fixture runs with their verdict.json / measurement.json edited."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reports import render_incident
from tests.unit.reports_helpers import RUNS, copy_run, section, table_problems

#: every run directory tests/fixtures/runs/build_fixtures.py writes
FIXTURE_NAMES = tuple(sorted(p.name for p in RUNS.iterdir() if (p / "run.json").exists()))

PROM = "Prometheus not ready at http://127.0.0.1:1 (connection refused)"
PROM_MD = PROM  # reads as written: nothing in it needs escaping
UNJUDGED = {
    "name": "ttft_p95_after",
    "passed": False,
    "expected": "after ttft_p95_s ≤ 2 s",
    "observed": "no data",
    "why": "no requests in the after window to judge",
    "inconclusive": True,
}


def _edit(path: Path, change: dict[str, Any]) -> None:
    data = json.loads(path.read_text())
    # fixture runs written before t_inject became t_effect still load
    for old, new in (("t_inject", "t_effect"), ("in_flight_at_inject", "in_flight_at_effect")):
        if old in data and path.name == "measurement.json":
            data[new] = data.pop(old)
    data.update(change)
    path.write_text(json.dumps(data))


def _render(tmp_path: Path, verdict: dict[str, Any], measurement: dict[str, Any]) -> str:
    d = copy_run("pass-kill", tmp_path)
    _edit(d / "verdict.json", verdict)
    _edit(d / "measurement.json", measurement)
    md = render_incident(d).read_text()
    assert table_problems(md) == []
    return md


def test_inconclusive_verdict_line_and_missing_evidence_section(tmp_path: Path) -> None:
    old = json.loads((copy_run("pass-kill", tmp_path / "x") / "verdict.json").read_text())
    md = _render(
        tmp_path,
        {"inconclusive": [PROM], "checks": [*old["checks"], UNJUDGED]},
        {"inconclusive": [PROM, "clock skew of 3 s between host and Prometheus"]},
    )
    assert (
        f"**Verdict: INCONCLUSIVE** — missing evidence: {PROM_MD}; "
        "ttft_p95_after: no requests in the after window to judge\n" in md
    )
    missing = section(md, "Missing evidence")
    assert "so the verdict is INCONCLUSIVE" in missing
    assert [line for line in missing.splitlines() if line.startswith("- ")] == [
        f"- {PROM_MD}",
        "- ttft_p95_after: no requests in the after window to judge",
        "- clock skew of 3 s between host and Prometheus",
    ]
    assert "Verdict: FAIL" not in md
    assert "Verdict: PASS" not in md


def test_inconclusive_with_a_failed_check_names_both(tmp_path: Path) -> None:
    failed = {"name": "lost", "passed": False, "expected": "≤ 50", "observed": "65",
              "why": "65 requests lost, limit 50"}
    md = _render(tmp_path, {"inconclusive": [PROM], "checks": [failed]}, {})
    assert (
        f"**Verdict: INCONCLUSIVE** — missing evidence: {PROM_MD} "
        "(also failed: lost: 65 requests lost, limit 50)" in md
    )


def test_nothing_judged_is_inconclusive(tmp_path: Path) -> None:
    md = _render(tmp_path, {"checks": [], "passed": True}, {})
    assert "**Verdict: INCONCLUSIVE** — missing evidence: no checks were judged" in md
    assert "- no checks were judged" in section(md, "Missing evidence")


def test_fail_with_an_unjudged_check_stays_fail_and_lists_the_gap(tmp_path: Path) -> None:
    failed = {"name": "lost", "passed": False, "expected": "≤ 50", "observed": "65",
              "why": "65 requests lost, limit 50"}
    md = _render(tmp_path, {"checks": [failed, UNJUDGED]}, {})
    assert "**Verdict: FAIL** — lost: 65 requests lost, limit 50\n" in md
    missing = section(md, "Missing evidence")
    assert "were not judged" in missing
    assert "- ttft_p95_after: no requests in the after window to judge" in missing


def test_harness_intervention_is_said_plainly(tmp_path: Path) -> None:
    md = _render(
        tmp_path,
        {},
        {"harness_intervened": ["started the container its restart policy (no) left down"]},
    )
    assert (
        "**The harness intervened:** started the container its restart policy (no) left "
        "down. The node did not recover on its own" in md
    )


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_complete_evidence_has_no_missing_evidence_section(tmp_path: Path, name: str) -> None:
    md = render_incident(copy_run(name, tmp_path)).read_text()
    assert "## Missing evidence" not in md
    assert "The harness intervened" not in md
    outcome = json.loads((RUNS / name / "verdict.json").read_text())["outcome"]
    assert outcome in ("PASS", "FAIL")
    assert f"**Verdict: {outcome}**" in md
    assert md.count("**Verdict: ") == 1
