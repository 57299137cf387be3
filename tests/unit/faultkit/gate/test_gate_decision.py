"""The gate's decision: only PASS passes; FAIL, INCONCLUSIVE and SKIPPED each fail it, on
their own line with their reasons (gate.json and gate.md). No rollout, no Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultkit.gate.decision import ScenarioOutcome, decide, read_junit
from faultkit.rundir import GateResult
from reports import render_gate
from slo.verdict import CheckResult, Verdict
from tests.unit.faultkit.plugin.test_plugin_inconclusive import CONFTEST, SCENARIOS
from tests.unit.reports_helpers import table_problems

pytest_plugins = ["pytester"]

PROM = "Prometheus not ready at http://127.0.0.1:1 (connection refused)"


def outcome(name: str, result: str, why: str = "") -> ScenarioOutcome:
    return ScenarioOutcome(name, result, why or "all checks passed", None)  # type: ignore[arg-type]


KILL = outcome("test_kill[sim-vllm]", "PASS")
LOST = outcome("test_pause[sim-vllm]", "FAIL", "lost_requests: 3 lost > 0 allowed")
GAP = outcome("test_partition[sim-vllm]", "INCONCLUSIVE", PROM)
SKIP = outcome("test_oom[sim-vllm]", "SKIPPED", "dry run: oom on sim-vllm")


def test_all_pass_passes() -> None:
    decision = decide([KILL, KILL], 0, "ctx-32k")
    assert decision.decision == "pass"
    assert decision.why == "all 2 gate scenarios passed on ctx-32k"
    assert decision.not_passed == ()


@pytest.mark.parametrize(
    ("bad", "line"),
    [
        (LOST, "test_pause[sim-vllm]: FAIL — lost_requests: 3 lost > 0 allowed"),
        (GAP, f"test_partition[sim-vllm]: INCONCLUSIVE — missing evidence: {PROM}"),
        (SKIP, "test_oom[sim-vllm]: SKIPPED — not run: dry run: oom on sim-vllm"),
    ],
)
def test_anything_but_pass_fails_on_its_own_line(bad: ScenarioOutcome, line: str) -> None:
    decision = decide([KILL, bad], 1 if bad.outcome != "SKIPPED" else 0, "ctx-32k")
    assert decision.decision == "fail"
    assert decision.not_passed == (line,)
    assert decision.why == f"1 {bad.outcome} of 2 gate scenarios: {line}"


def test_mixed_results_are_counted_and_kept_apart() -> None:
    decision = decide([KILL, LOST, GAP, SKIP], 1, "c")
    assert decision.why.startswith("1 FAIL, 1 INCONCLUSIVE, 1 SKIPPED of 4 gate scenarios: ")
    assert [line.split(": ", 1)[1].split(" — ")[0] for line in decision.not_passed] == [
        "FAIL", "INCONCLUSIVE", "SKIPPED"
    ]


@pytest.mark.parametrize(("outcomes", "code"), [([], 5), ([], 0), ([KILL], 2), ([KILL], 4)])
def test_a_run_that_did_not_run_cleanly_fails(outcomes: list[ScenarioOutcome], code: int) -> None:
    decision = decide(outcomes, code, "c")
    assert decision.decision == "fail"
    assert decision.why == f"the gate scenarios did not run cleanly (pytest exit {code})"


def test_a_failure_no_scenario_accounts_for_fails() -> None:
    decision = decide([KILL], 1, "c")
    assert decision.decision == "fail"
    assert "pytest exited 1 although all 1 scenarios passed" in decision.why


def test_outcome_json_keeps_passed_for_older_readers() -> None:
    data = GAP.to_json()
    assert data["outcome"] == "INCONCLUSIVE"
    assert data["passed"] is False
    assert data["line"] == GAP.line()
    assert KILL.to_json()["passed"] is True


# --------------------------------------------------------------------------- JUnit XML


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="scenarios.test_kill" name="test_kill[n]">
  <properties><property name="faultkit_verdict" value="PASS"/></properties>
</testcase>
<testcase classname="scenarios.test_pause" name="test_pause[n]">
  <properties><property name="faultkit_verdict" value="FAIL"/></properties>
  <failure message="AssertionError: FAIL: lost_requests: 3 lost &gt; 0 allowed">tb</failure>
</testcase>
<testcase classname="scenarios.test_partition" name="test_partition[n]">
  <properties>
    <property name="faultkit_run_dir" value="{run_dir}"/>
    <property name="faultkit_verdict" value="INCONCLUSIVE"/>
  </properties>
  <failure message="INCONCLUSIVE: missing evidence: truncated…">tb</failure>
</testcase>
<testcase classname="scenarios.test_latency" name="test_latency[n]">
  <failure message="INCONCLUSIVE: missing evidence: no steady state">tb</failure>
</testcase>
<testcase classname="scenarios.test_oom" name="test_oom[n]">
  <skipped type="pytest.skip" message="dry run: oom on n">skip</skipped>
</testcase>
</testsuite></testsuites>
"""


def test_read_junit_tells_the_outcomes_apart(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    verdict = Verdict(
        (CheckResult("recovery", True, "e", "o", "ok"),), inconclusive=(PROM, "clock skew 3 s")
    )
    (run / "verdict.json").write_text(json.dumps(verdict.to_json()))
    (run / "measurement.json").write_text(json.dumps({"detection_s": 2.0, "lost_total": 0}))
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT.format(run_dir=run), encoding="utf-8")
    got = {o.name: o for o in read_junit(xml)}
    assert {name: o.outcome for name, o in got.items()} == {
        "test_kill[n]": "PASS",
        "test_pause[n]": "FAIL",
        "test_partition[n]": "INCONCLUSIVE",
        "test_latency[n]": "INCONCLUSIVE",
        "test_oom[n]": "SKIPPED",
    }
    assert got["test_pause[n]"].why == "AssertionError: FAIL: lost_requests: 3 lost > 0 allowed"
    # the full reasons come from the run's verdict.json, not the XML's shortened message
    assert got["test_partition[n]"].why == f"{PROM}; clock skew 3 s"
    assert got["test_partition[n]"].detection_s == 2.0
    assert got["test_latency[n]"].why == "no steady state"
    assert got["test_oom[n]"].why == "dry run: oom on n"
    assert decide(list(got.values()), 1, "c").decision == "fail"


def test_verdict_json_makes_an_unstamped_failure_inconclusive(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "verdict.json").write_text(json.dumps(Verdict(inconclusive=(PROM,)).to_json()))
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuite><testcase name="t"><properties>'
        f'<property name="faultkit_run_dir" value="{run}"/></properties>'
        '<failure message="AssertionError: nope">tb</failure></testcase></testsuite>',
        encoding="utf-8",
    )
    (only,) = read_junit(xml)
    assert (only.outcome, only.why) == ("INCONCLUSIVE", PROM)


def test_plugin_junit_feeds_the_gate(pytester: pytest.Pytester) -> None:
    """The plugin's real JUnit XML, read by the gate: the same outcomes, each on its line."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scenarios=SCENARIOS)
    xml = Path(pytester.path) / "junit.xml"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:warnings", "--dry-run", f"--junitxml={xml}"
    )
    decision = decide(read_junit(xml), result.ret, "c")
    assert decision.decision == "fail"
    assert decision.why.startswith("1 FAIL, 3 INCONCLUSIVE of 6 gate scenarios: ")
    assert (
        f"test_prometheus_down: INCONCLUSIVE — missing evidence: {PROM}" in decision.not_passed
    )
    assert "test_fail: FAIL — AssertionError: FAIL: lost_requests: 3 lost > 0 allowed" in (
        decision.not_passed
    )


# --------------------------------------------------------------------------- gate.md


def test_gate_md_lists_inconclusive_apart_from_fail(tmp_path: Path) -> None:
    outcomes = [KILL, LOST, GAP, SKIP]
    decision = decide(outcomes, 1, "ctx-32k")
    data = {
        "node": "sim-vllm",
        "candidate": "ctx-32k",
        "scenarios": [o.to_json() for o in outcomes],
        "decision": decision.decision,
        "why": decision.why,
        "not_passed": list(decision.not_passed),
    }
    md = render_gate(GateResult.from_json(data), tmp_path / "gate.md").read_text()
    assert "**Decision: FAIL** — 1 FAIL, 1 INCONCLUSIVE, 1 SKIPPED of 4" in md
    bullets = [line for line in md.splitlines() if line.startswith("- ")]
    assert bullets == [
        "- test\\_pause\\[sim-vllm\\]: FAIL — lost\\_requests: 3 lost &gt; 0 allowed",
        "- test\\_partition\\[sim-vllm\\]: INCONCLUSIVE — missing evidence: Prometheus not "
        "ready at http://127.0.0.1:1 \\(connection refused\\)",
        "- test\\_oom\\[sim-vllm\\]: SKIPPED — not run: dry run: oom on sim-vllm",
    ]
    assert "| test\\_partition\\[sim-vllm\\] | INCONCLUSIVE |" in md
    assert "| test\\_oom\\[sim-vllm\\] | SKIPPED |" in md
    assert "| test\\_pause\\[sim-vllm\\] | FAIL |" in md
    assert "1 of 4 scenarios passed." in md
    assert table_problems(md) == []
