"""Accepted findings: a FAIL made only of a node's unexpired accepted findings reads ACCEPTED
(a pass) and never hides anything new. The matching (slo.accepted), the inventory field,
the verdict's JSON, the pytest plugin's status, the gate's decision and the report line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from faultkit.errors import InventoryError
from faultkit.gate.decision import ScenarioOutcome, decide, read_junit
from faultkit.inventory import load_inventory, parse_inventory
from faultkit.plugin.status import ACCEPTED_STATUS, VERDICT_PROPERTY, verdict_status
from faultkit.rundir import GateResult
from reports import render_gate, render_incident
from slo.accepted import apply_accepted, scenario_matches
from slo.verdict import Acceptance, CheckResult, Verdict
from tests.paths import REPO
from tests.unit.faultkit.plugin.test_plugin_inconclusive import CONFTEST, report
from tests.unit.reports_helpers import copy_run, table_problems

pytest_plugins = ["pytester"]

REASON = "llama.cpp answers a chat message without 'role' with HTTP 500"
TODAY = date(2026, 11, 30)
UNTIL = date(2027, 6, 30)

OK = CheckResult("lost_requests", True, "≤ 0 lost", "0 lost", "0 requests lost, limit 0")
BAD = CheckResult(
    "malformed_rejected_4xx", False, "every malformed request answered 4xx",
    "40 sent, 3 not 4xx", "3 malformed requests got 500",
)
CRASH = CheckResult(
    "node_not_crashed", False, "no restart", "restart_count 0 → 1", "the node crashed",
)
GAP = CheckResult("ttft_p95_after", False, "≤ 2 s", "no data", "no requests after",
                  inconclusive=True)


@dataclass(frozen=True)
class F:
    """A finding as the inventory gives it (``faultkit.inventory.AcceptedFinding``)."""

    scenario: str = "bad_input"
    check: str = "malformed_rejected_4xx"
    reason: str = REASON
    expires: date | None = UNTIL


def accept(verdict: Verdict, *findings: F, scenario: str = "bad_input",
           today: date = TODAY, case: str | None = "llama") -> Verdict:
    return apply_accepted(verdict, findings, scenario, today, case=case)


# --------------------------------------------------------------------------- matching


def test_a_failure_covered_by_a_finding_is_accepted_and_counts_as_a_pass() -> None:
    verdict = accept(Verdict((OK, BAD)), F())
    assert verdict.outcome == "ACCEPTED"
    assert verdict.passed
    assert verdict.failures == (BAD,)  # nothing is hidden: the failed check is still there
    assert verdict.accepted == (
        Acceptance("malformed_rejected_4xx", REASON, "bad_input", "2027-06-30"),
    )
    assert verdict.summary() == f"ACCEPTED (known finding: {REASON}, until 2027-06-30)"
    assert verdict.accepted_lines() == (
        f"malformed_rejected_4xx: 3 malformed requests got 500 (accepted: {REASON}, "
        "until 2027-06-30)",
    )


def test_a_finding_without_expiry_applies_and_says_so() -> None:
    verdict = accept(Verdict((OK, BAD)), F(expires=None))
    assert verdict.outcome == "ACCEPTED"
    assert verdict.summary() == f"ACCEPTED (known finding: {REASON}, no expiry)"


def test_a_partly_covered_failure_stays_fail() -> None:
    verdict = accept(Verdict((OK, BAD, CRASH)), F())
    assert verdict.outcome == "FAIL"
    assert not verdict.passed
    assert verdict.accepted == ()
    assert verdict.summary().startswith("FAIL: malformed_rejected_4xx: ")
    assert "node_not_crashed: the node crashed" in verdict.summary()


def test_every_failed_check_needs_its_own_finding() -> None:
    both = accept(Verdict((BAD, CRASH)), F(), F(check="node_not_crashed", reason="flaky"))
    assert both.outcome == "ACCEPTED"
    assert both.summary() == (
        f"ACCEPTED (known finding: {REASON}, until 2027-06-30; "
        "known finding: flaky, until 2027-06-30)"
    )


def test_an_expired_finding_no_longer_applies_and_the_verdict_says_it_expired() -> None:
    verdict = accept(Verdict((OK, BAD)), F(expires=date(2026, 11, 29)))
    assert verdict.outcome == "FAIL"
    assert verdict.accepted == ()
    assert verdict.expired == (
        Acceptance("malformed_rejected_4xx", REASON, "bad_input", "2026-11-29"),
    )
    assert verdict.summary() == (
        "FAIL: malformed_rejected_4xx: 3 malformed requests got 500 (accepted finding for "
        f"malformed_rejected_4xx expired on 2026-11-29: {REASON})"
    )


def test_a_finding_applies_through_its_expiry_day() -> None:
    assert accept(Verdict((BAD,)), F(expires=TODAY)).outcome == "ACCEPTED"
    assert accept(Verdict((BAD,)), F(expires=TODAY), today=date(2026, 12, 1)).outcome == "FAIL"


def test_an_unexpired_finding_wins_over_an_expired_one() -> None:
    verdict = accept(Verdict((BAD,)), F(expires=date(2020, 1, 1)), F())
    assert verdict.outcome == "ACCEPTED"
    assert verdict.expired == ()


@pytest.mark.parametrize(
    "verdict",
    [
        Verdict((OK, BAD), inconclusive=("Prometheus not ready",)),  # run-level gap
        Verdict((BAD, GAP)),  # a check that could not be judged
        Verdict(inconclusive=("not in steady state before injection",)),
        Verdict((GAP,)),
    ],
)
def test_inconclusive_is_never_accepted(verdict: Verdict) -> None:
    accepted = accept(verdict, F(), F(check="ttft_p95_after"))
    assert accepted.outcome == verdict.outcome
    assert accepted.accepted == ()
    assert not accepted.passed


def test_a_fail_with_an_unjudged_check_is_not_accepted() -> None:
    """The accepted failure is covered, but a check was not judged: nothing new is hidden."""
    verdict = accept(Verdict((BAD, GAP)), F())
    assert verdict.outcome == "FAIL"
    assert "not judged: ttft_p95_after" in verdict.summary()


def test_pass_is_left_alone() -> None:
    assert accept(Verdict((OK,)), F()) == Verdict((OK,))


@pytest.mark.parametrize(
    ("finding", "scenario", "case"),
    [
        (F(scenario="kill"), "bad_input", "llama"),  # another scenario
        (F(check="lost_requests"), "bad_input", "llama"),  # another check
        (F(scenario="bad_input[sim-vllm]"), "bad_input", "llama"),  # another node's case
        (F(scenario="bad_input[llama]"), "bad_input", None),  # case unknown
        (F(scenario="bad"), "bad_input", "llama"),  # no prefix matching
    ],
)
def test_findings_for_another_scenario_check_or_case_do_not_match(
    finding: F, scenario: str, case: str | None
) -> None:
    verdict = accept(Verdict((OK, BAD)), finding, scenario=scenario, case=case)
    assert verdict.outcome == "FAIL"
    assert verdict.accepted == ()


def test_findings_of_another_node_are_not_applied(tmp_path: Path) -> None:
    """Findings live on their node: the testbed's llama accepts bad_input, sim-vllm does not."""
    inventory = load_inventory(REPO / "testbed" / "inventory.yaml")
    llama, sim = inventory.node("llama"), inventory.node("sim-vllm")
    assert accept(Verdict((BAD,)), *llama.accepted_findings).outcome == "ACCEPTED"  # type: ignore[arg-type]
    assert accept(Verdict((BAD,)), *sim.accepted_findings, case="sim-vllm").outcome == "FAIL"  # type: ignore[arg-type]
    assert llama.accepted_findings[0].expires == UNTIL


@pytest.mark.parametrize(
    ("pattern", "scenario", "case", "matches"),
    [
        ("bad_input", "bad_input", "llama", True),
        ("bad_input", "bad_input", None, True),
        ("bad_input[llama]", "bad_input", "llama", True),
        ("oom[*-long-prefill]", "oom", "sim-vllm-long-prefill", True),
        ("oom[*-long-prefill]", "oom", "sim-vllm-over-context", False),
        ("oom[sim-?llm*]", "oom", "sim-vllm-x", True),
        ("bad_input[ll.ma]", "bad_input", "llama", False),  # "." is not a wildcard
        ("bad_input[llama", "bad_input", "llama", False),  # malformed pattern
        ("bad_input", "bad_input_2", "llama", False),
    ],
)
def test_scenario_patterns(pattern: str, scenario: str, case: str | None, matches: bool) -> None:
    assert scenario_matches(pattern, scenario, case) is matches


def test_verdict_json_records_the_findings_and_reads_back() -> None:
    verdict = accept(Verdict((OK, BAD)), F())
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["outcome"] == "ACCEPTED" and data["passed"] is True
    assert data["accepted_findings"] == [
        {"check": "malformed_rejected_4xx", "reason": REASON, "scenario": "bad_input",
         "expires": "2027-06-30"}
    ]
    assert data["expired_findings"] == []
    assert Verdict.from_json(data) == verdict
    # an older file without the keys still reads; outcome is recomputed, never trusted
    old = {k: v for k, v in data.items() if not k.endswith("_findings")}
    assert Verdict.from_json(old).outcome == "FAIL"


def test_a_hand_made_acceptance_covering_only_part_is_still_fail() -> None:
    verdict = Verdict((BAD, CRASH), accepted=(Acceptance(BAD.name, "r", "bad_input"),))
    assert verdict.outcome == "FAIL"


# --------------------------------------------------------------------------- inventory

NODE = """\
nodes:
  - name: llama
    engine: llamacpp
    base_url: http://127.0.0.1:18080
    model: m
    accepted_findings:
      - scenario: {scenario}
        check: malformed_rejected_4xx
{extra}"""


def errors_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as info:
        parse_inventory(text, source="inv.yaml")
    return info.value.problems


def test_inventory_reads_findings() -> None:
    text = NODE.format(scenario="bad_input", extra="        reason: known\n"
                                                   "        expires: 2027-06-30\n")
    (finding,) = parse_inventory(text).nodes[0].accepted_findings
    assert (finding.scenario, finding.check, finding.reason, finding.expires) == (
        "bad_input", "malformed_rejected_4xx", "known", UNTIL
    )
    no_expiry = NODE.format(scenario="'oom[*-long-prefill]'", extra="        reason: known\n")
    assert parse_inventory(no_expiry).nodes[0].accepted_findings[0].expires is None


@pytest.mark.parametrize(
    ("scenario", "extra", "expected"),
    [
        ("bad_input", "", "inv.yaml:7 nodes[0].accepted_findings[0].reason: Field required"),
        ("bad_input", "        reason: '  '\n",
         "inv.yaml:9 nodes[0].accepted_findings[0].reason: must not be blank"),
        ("bad_input", "        reason: r\n        expires: next year\n",
         "inv.yaml:10 nodes[0].accepted_findings[0].expires: "),
        ("bad_input", "        reason: r\n        owner: me\n",
         "inv.yaml:10 nodes[0].accepted_findings[0].owner: unknown key (allowed here: "
         "scenario, check, reason, expires)"),
        ("'bad input'", "        reason: r\n",
         "inv.yaml:7 nodes[0].accepted_findings[0].scenario: String should match pattern"),
    ],
)
def test_inventory_rejects_bad_findings_with_file_and_line(
    scenario: str, extra: str, expected: str
) -> None:
    problems = errors_of(NODE.format(scenario=scenario, extra=extra))
    assert any(p.startswith(expected) for p in problems), problems


# --------------------------------------------------------------------------- pytest plugin


def test_only_a_passed_accepted_call_gets_the_accepted_status() -> None:
    assert ACCEPTED_STATUS == ("passed", "A", "ACCEPTED")
    assert verdict_status(report(outcome="passed", verdict="ACCEPTED")) == ACCEPTED_STATUS
    assert verdict_status(report(verdict="ACCEPTED")) is None  # failed for another reason
    assert verdict_status(report(outcome="passed", when="teardown", verdict="ACCEPTED")) is None


SCENARIOS = """
from datetime import date

from slo.accepted import apply_accepted
from slo.verdict import CheckResult, Verdict

from test_findings import FINDING

OK = CheckResult("lost_requests", True, "<= 0", "0", "none lost")
BAD = CheckResult("malformed_rejected_4xx", False, "4xx", "3 not 4xx", "3 got 500")
CRASH = CheckResult("node_not_crashed", False, "no restart", "1 restart", "crashed")


def judge(experiment, *checks, today=date(2026, 11, 30)):
    verdict = apply_accepted(Verdict(checks), [FINDING], "bad_input", today)
    return experiment.check(verdict)


def test_accepted(experiment):
    verdict = judge(experiment, OK, BAD)
    assert verdict.passed, verdict.summary()


def test_new_failure(experiment):
    verdict = judge(experiment, OK, BAD, CRASH)
    assert verdict.passed, verdict.summary()


def test_expired(experiment):
    verdict = judge(experiment, OK, BAD, today=date(2027, 7, 1))
    assert verdict.passed, verdict.summary()


def test_pass(experiment):
    verdict = judge(experiment, OK)
    assert verdict.passed, verdict.summary()
"""

FINDINGS = f"""
from datetime import date
from types import SimpleNamespace

FINDING = SimpleNamespace(scenario="bad_input", check="malformed_rejected_4xx",
                          reason={REASON!r}, expires=date(2027, 6, 30))
"""


@pytest.fixture
def session(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scenarios=SCENARIOS, test_findings=FINDINGS)
    pytester.syspathinsert()
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:warnings", "--dry-run", *args)


def test_accepted_is_a_pass_shown_as_accepted(session: pytest.Pytester) -> None:
    result = _run(session, "-v")
    result.stdout.fnmatch_lines(
        [
            "*::test_accepted ACCEPTED*",
            "*::test_new_failure FAILED*",
            "*::test_expired FAILED*",
            "*::test_pass PASSED*",
        ]
    )
    assert result.parseoutcomes() == {"passed": 2, "failed": 2}
    result.stdout.fnmatch_lines(
        [
            "E * AssertionError: FAIL: malformed_rejected_4xx: 3 got 500; node_not_crashed: "
            "crashed",
            "E * (accepted finding for malformed_rejected_4xx expired on 2027-06-30: *)",
            "*faultkit: ACCEPTED (known findings, counted as passes)*",
            f"ACCEPTED *::test_accepted - ACCEPTED (known finding: {REASON}, until 2027-06-30)",
        ]
    )
    quiet = _run(session)
    quiet.stdout.fnmatch_lines(["test_scenarios.py AFF. *"])


def test_a_suite_of_accepted_and_passed_scenarios_exits_0(session: pytest.Pytester) -> None:
    result = _run(session, "-k", "accepted or pass")
    assert result.ret == pytest.ExitCode.OK
    assert result.parseoutcomes() == {"passed": 2, "deselected": 2}


def test_junit_carries_the_accepted_verdict_and_feeds_the_gate(session: pytest.Pytester) -> None:
    xml = Path(session.path) / "junit.xml"
    result = _run(session, f"--junitxml={xml}")
    cases = {c.get("name", ""): c for c in ET.parse(xml).getroot().iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_accepted"].iter("property")}
    assert props[VERDICT_PROPERTY] == "ACCEPTED"
    assert cases["test_accepted"].find("failure") is None
    outcomes = {o.name: o for o in read_junit(xml)}
    assert outcomes["test_accepted"].outcome == "ACCEPTED"
    assert outcomes["test_accepted"].passed
    decision = decide(list(outcomes.values()), result.ret, "c")
    assert decision.decision == "fail"  # the two FAILs
    assert decision.accepted == (
        "test_accepted: ACCEPTED — accepted known finding (no verdict.json)",
    )


# --------------------------------------------------------------------------- the gate

KILL = ScenarioOutcome("test_kill[llama]", "PASS", "all checks passed", None)
ACC = ScenarioOutcome(
    "test_bad_input[llama]", "ACCEPTED",
    f"malformed_rejected_4xx: 3 got 500 (accepted: {REASON}, until 2027-06-30)", None,
)
LOST = ScenarioOutcome("test_pause[llama]", "FAIL", "lost_requests: 3 lost > 0 allowed", None)


def test_an_accepted_scenario_does_not_fail_the_gate_but_is_listed() -> None:
    decision = decide([KILL, ACC], 0, "llama-good")
    assert decision.decision == "pass"
    assert decision.why == (
        "all 2 gate scenarios passed on llama-good (1 ACCEPTED: known findings of the node)"
    )
    assert decision.not_passed == ()
    assert decision.accepted == (
        "test_bad_input[llama]: ACCEPTED — malformed_rejected_4xx: 3 got 500 "
        f"(accepted: {REASON}, until 2027-06-30)",
    )
    assert ACC.to_json()["passed"] is True
    assert ACC.to_json()["outcome"] == "ACCEPTED"


def test_an_accepted_scenario_does_not_excuse_a_failing_one() -> None:
    decision = decide([KILL, ACC, LOST], 1, "c")
    assert decision.decision == "fail"
    assert decision.why.startswith("1 FAIL of 3 gate scenarios: test_pause[llama]: FAIL")
    assert decision.accepted == (ACC.line(),)


def test_read_junit_takes_the_accepted_reasons_from_verdict_json(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    verdict = accept(Verdict((OK, BAD)), F())
    (run / "verdict.json").write_text(json.dumps(verdict.to_json()))
    xml = tmp_path / "junit.xml"
    xml.write_text(
        '<testsuite><testcase name="test_bad_input[llama]"><properties>'
        f'<property name="faultkit_run_dir" value="{run}"/>'
        '<property name="faultkit_verdict" value="ACCEPTED"/>'
        "</properties></testcase></testsuite>",
        encoding="utf-8",
    )
    (only,) = read_junit(xml)
    assert (only.outcome, only.why) == ("ACCEPTED", verdict.accepted_lines()[0])


def test_gate_md_lists_accepted_scenarios(tmp_path: Path) -> None:
    decision = decide([KILL, ACC], 0, "llama-good")
    data = {
        "node": "llama",
        "candidate": "llama-good",
        "scenarios": [o.to_json() for o in (KILL, ACC)],
        "decision": decision.decision,
        "why": decision.why,
        "not_passed": list(decision.not_passed),
        "accepted": list(decision.accepted),
    }
    md = render_gate(GateResult.from_json(data), tmp_path / "gate.md").read_text()
    assert table_problems(md) == []
    assert "**Decision: PASS** — all 2 gate scenarios passed on llama-good" in md
    assert "Accepted (known findings of the node, unexpired — they do not fail the gate):" in md
    assert "- test\\_bad\\_input\\[llama\\]: ACCEPTED — malformed\\_rejected\\_4xx" in md
    assert "| test\\_bad\\_input\\[llama\\] | ACCEPTED |" in md
    assert "2 of 2 scenarios passed." in md


# --------------------------------------------------------------------------- incident report


def _report(tmp_path: Path, verdict: Verdict) -> str:
    d = copy_run("bad-input", tmp_path)
    (d / "verdict.json").write_text(json.dumps(verdict.to_json()))
    md = render_incident(d).read_text()
    assert table_problems(md) == []
    return md


def test_incident_report_verdict_line_for_accepted(tmp_path: Path) -> None:
    md = _report(tmp_path, accept(Verdict((OK, BAD)), F()))
    assert (
        "**Verdict: ACCEPTED** — malformed_rejected_4xx: 3 malformed requests got 500 "
        f"(accepted: {REASON}, until 2027-06-30)\n" in md
    )


def test_incident_report_says_an_accepted_finding_expired(tmp_path: Path) -> None:
    md = _report(tmp_path, accept(Verdict((OK, BAD)), F(expires=date(2026, 1, 31))))
    assert (
        "**Verdict: FAIL** — malformed_rejected_4xx: 3 malformed requests got 500 "
        "(accepted finding for malformed_rejected_4xx expired on 2026-01-31: "
        f"{REASON})\n" in md
    )
