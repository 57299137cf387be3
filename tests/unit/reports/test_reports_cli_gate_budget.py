"""`faultkit report` from files alone, and the gate / budget renderers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.rundir import GateResult
from reports import render_budget, render_gate
from tests.unit.reports_helpers import GOLDEN, copy_run, table_problems


def test_report_command_renders_each_run_dir(tmp_path: Path) -> None:
    a, b = copy_run("pass-kill", tmp_path), copy_run("failed-rollout", tmp_path)
    result = CliRunner().invoke(cli, ["report", str(a), str(b)])
    assert result.exit_code == 0, result.output
    for d in (a, b):
        assert (d / "incident.md").read_text() == (GOLDEN / f"{d.name}.incident.md").read_text()
        assert (d / "timeline.png").stat().st_size > 20_000
        assert f"wrote {d / 'incident.md'}" in result.output


def test_report_command_rejects_a_non_run_dir(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    good = copy_run("pass-kill", tmp_path)
    result = CliRunner().invoke(cli, ["report", str(good), str(tmp_path / "empty")])
    assert result.exit_code == 2
    assert not (good / "incident.md").exists()  # every path checked before any is rendered
    assert "not a run directory" in result.output
    assert "run.json" in result.output
    result = CliRunner().invoke(cli, ["report"])
    assert result.exit_code == 2
    assert "at least one RUN_DIR" in result.output


def test_report_command_refuses_a_gate_steady_state_window(tmp_path: Path) -> None:
    """A steady-state window is a run with no fault, judged in its gate's gate.json: no
    incident report is written for it, and the user is told where its judgement is."""
    steady = tmp_path / "20261207T000000.000Z-steady_state-current-n"
    steady.mkdir()
    (steady / "run.json").write_text(json.dumps({"scenario": "steady_state", "case": "current",
                                                 "node": "n"}))
    result = CliRunner().invoke(cli, ["report", str(steady)])
    assert result.exit_code == 2, result.output
    assert "steady-state window" in result.output and "--gate" in result.output
    assert sorted(p.name for p in steady.iterdir()) == ["run.json"]


GATE: dict[str, Any] = {
    "node": "sim-vllm-a",
    "candidate": "ctx-32k",
    "current": "default",
    "config_diff": [
        "--- default",
        "+++ ctx-32k",
        "@@ -1,2 +1,2 @@",
        "-  max_model_len: 4096",
        "+  max_model_len: 32768",
        "```",
    ],
    "scenarios": [
        {
            "name": "kill",
            "passed": True,
            "detection_s": 4.0,
            "recovery_s": 8.3,
            "lost": 19,
            "why": "all checks passed",
            "run_dir": "runs/20260101T120000Z-kill-sim-vllm-a",
        },
        {
            "name": "rollout",
            "passed": False,
            "detection_s": 6.0,
            "recovery_s": None,
            "lost": 161,
            "why": "lost 161 > 50 | candidate never ready",
            "run_dir": "runs/x-rollout",
        },
    ],
    "decision": "fail",
    "why": "1 of 2 gate scenarios failed",
    "promoted": False,
    "rolled_back": True,
    "junit_xml": "runs/gate-junit.xml",
}


def test_gate_summary(tmp_path: Path) -> None:
    md = render_gate(GateResult.from_json(GATE), tmp_path / "gate.md").read_text()
    assert md.startswith("# Gate: ctx-32k on sim-vllm-a")
    assert "**Decision: FAIL** — 1 of 2 gate scenarios failed" in md
    assert "````diff\n--- default\n" in md
    assert "+  max_model_len: 32768" in md
    assert "| kill | PASS | 4.0 s | 8.3 s | 19 |" in md
    assert "| rollout | FAIL | 6.0 s | not reached | 161 | lost 161 &gt; 50 \\| candidate" in md
    assert "| Rolled back | yes |" in md
    assert "| Promoted | no |" in md
    assert "1 of 2 scenarios passed." in md
    assert table_problems(md) == []


def test_gate_summary_tolerates_missing_keys(tmp_path: Path) -> None:
    md = render_gate(GateResult.from_json({"decision": "pass"}), tmp_path / "gate.md").read_text()
    assert "**Decision: PASS** — not captured" in md
    assert "No scenario ran." in md
    assert table_problems(md) == []


BUDGET: dict[str, Any] = {
    "generated_at": 1767268800.0,
    "window": "30d",
    "prometheus": "http://127.0.0.1:9090",
    "nodes": [
        {
            "node": "sim-vllm-a",
            "engine": "vllm",
            "slos": [
                {
                    "slo": "availability",
                    "objective": 0.99,
                    "sli": 0.9931,
                    "budget_total": 1234.5,
                    "budget_spent_fraction": 0.69,
                    "budget_remaining_fraction": 0.31,
                    "burn_rates": {"1h": 15.2, "6h": 2.0, "1d": 0.9, "3d": 0.7},
                    "thresholds": {"page": 14.4, "ticket": 1},
                    "alerts_firing_now": ["SLOBurnFast"],
                    "note": "windows scaled down for the testbed",
                },
                {
                    "slo": "ttft",
                    "objective": 0.95,
                    "sli": None,
                    "budget_total": None,
                    "budget_spent_fraction": None,
                    "budget_remaining_fraction": None,
                    "burn_rates": {},
                    "thresholds": {},
                    "alerts_firing_now": [],
                    "note": "no traffic in window",
                },
            ],
        }
    ],
    "chaos_runs": [
        {
            "run_dir": "runs/a",
            "scenario": "kill",
            "node": "sim-vllm-a",
            "t_start": 1767268780.0,
            "lost": 19,
            "budget_spent_fraction": 0.0154,
        }
    ],
}


def test_budget_review(tmp_path: Path) -> None:
    md = render_budget(BUDGET, tmp_path / "budget.md").read_text()
    assert "| Generated at | 2026-01-01 12:00:00.000 UTC |" in md
    assert (
        "| availability | 0.9900 | 0.9931 | 1234.500 | 69 % | 31 % | 15.20 | 2.00 | 0.90 "
        "| 0.70 | SLOBurnFast |"
    ) in md
    assert "| ttft | 0.9500 | — | — | — | — | — | — | — | — | none |" in md
    assert "windows scaled down for the testbed" in md
    assert "| 2026-01-01 11:59:40.000 | kill | sim-vllm-a | 19 | 1.54 % |" in md
    assert table_problems(md) == []


def test_report_command_renders_gate_and_budget(tmp_path: Path) -> None:
    (tmp_path / "gate.json").write_text(json.dumps(GATE))
    (tmp_path / "budget.json").write_text(json.dumps(BUDGET))
    result = CliRunner().invoke(
        cli,
        [
            "report",
            "--gate",
            str(tmp_path / "gate.json"),
            "--budget",
            str(tmp_path / "budget.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "gate.md").exists()
    assert (tmp_path / "budget.md").exists()
    (tmp_path / "bad.json").write_text("[1]")
    result = CliRunner().invoke(cli, ["report", "--gate", str(tmp_path / "bad.json")])
    assert result.exit_code == 1
    assert "must be an object" in result.output


def test_budget_review_links_the_runs_it_can_find(tmp_path: Path) -> None:
    run = copy_run("pass-kill", tmp_path / "runs")
    data = {**BUDGET, "chaos_runs": [
        {**BUDGET["chaos_runs"][0], "run_dir": str(run)},
        {**BUDGET["chaos_runs"][0], "run_dir": "runs/deleted-since"},
    ]}
    md = render_budget(data, tmp_path / "review" / "budget.md").read_text()
    assert "| [`../runs/pass-kill`](../runs/pass-kill/incident.md) |" in md
    assert "| `runs/deleted-since` |" in md
    assert table_problems(md) == []
