"""The pytest plugin reports an INCONCLUSIVE verdict apart from FAIL, and still fails the run.

The pure pieces (faultkit.plugin.status) on hand-made reports, then the real plugin in a
pytester session whose conftest attaches a fake experiment to the item exactly as the
``experiment`` fixture does (``status.attach``) — no Docker, no testbed.
"""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from faultkit.plugin.status import (
    INCONCLUSIVE_STATUS,
    VERDICT_PROPERTY,
    inconclusive_lines,
    mark_inconclusive,
    message_of,
    outcome_of,
    verdict_status,
)

pytest_plugins = ["pytester"]


def report(
    outcome: str = "failed",
    when: str = "call",
    longrepr: object = "boom",
    verdict: str | None = None,
) -> pytest.TestReport:
    props: list[tuple[str, object]] = [] if verdict is None else [(VERDICT_PROPERTY, verdict)]
    return pytest.TestReport(
        "t.py::test_x",
        ("t.py", 1, "test_x"),
        {},
        outcome,  # type: ignore[arg-type]
        longrepr if outcome != "passed" else None,  # type: ignore[arg-type]
        when,  # type: ignore[arg-type]
        user_properties=props,
    )


# --------------------------------------------------------------------------- pure functions


def test_only_a_failed_inconclusive_call_gets_the_inconclusive_status() -> None:
    assert verdict_status(report(verdict="INCONCLUSIVE")) == INCONCLUSIVE_STATUS
    assert INCONCLUSIVE_STATUS == ("inconclusive", "I", "INCONCLUSIVE")
    assert verdict_status(report(verdict="FAIL")) is None
    assert verdict_status(report()) is None
    assert verdict_status(report(when="teardown", verdict="INCONCLUSIVE")) is None
    assert verdict_status(report(outcome="passed", verdict="INCONCLUSIVE")) is None


def test_outcome_of_reads_the_property() -> None:
    assert outcome_of(report(verdict="PASS")) == "PASS"
    assert outcome_of(report(verdict="nonsense")) is None
    assert outcome_of(report()) is None


def test_mark_inconclusive_fails_a_passed_report() -> None:
    rep = report(outcome="passed")
    mark_inconclusive(rep, "INCONCLUSIVE: missing evidence: x")
    assert rep.failed
    assert message_of(rep) == "INCONCLUSIVE: missing evidence: x"


def test_mark_inconclusive_keeps_a_string_traceback_after_the_message() -> None:
    rep = report(longrepr="Traceback: AssertionError")
    mark_inconclusive(rep, "INCONCLUSIVE: missing evidence: x")
    assert rep.failed
    assert str(rep.longrepr) == "INCONCLUSIVE: missing evidence: x\n\nTraceback: AssertionError"
    assert inconclusive_lines([rep]) == [
        "INCONCLUSIVE t.py::test_x - INCONCLUSIVE: missing evidence: x"
    ]


def test_mark_inconclusive_leaves_skips_alone() -> None:
    rep = report(outcome="skipped", longrepr=("t.py", 1, "Skipped: dry run"))
    mark_inconclusive(rep, "INCONCLUSIVE: x")
    assert rep.skipped


# --------------------------------------------------------------------------- the real plugin

CONFTEST = """
import pytest

from faultkit.plugin.status import attach


class FakeExperiment:
    def __init__(self):
        self.verdict = None

    def check(self, verdict):
        self.verdict = verdict
        return verdict


@pytest.fixture
def experiment(request):
    exp = FakeExperiment()
    request.node.user_properties.append(("faultkit_run_dir", "runs/fake"))
    attach(request.node, exp)  # what faultkit.plugin's experiment fixture does
    yield exp
    request.node.user_properties.append(("faultkit_report", f"runs/{request.node.name}.md"))
"""

SCENARIOS = """
from slo.verdict import CheckResult, Verdict

OK = CheckResult("recovery", True, "<= 60 s", "8 s", "recovered in time")
BAD = CheckResult("lost_requests", False, "<= 0 lost", "3 lost", "3 lost > 0 allowed")
GAP = CheckResult("ttft_p95_after", False, "<= 2 s", "no data", "no requests in the after window",
                  inconclusive=True)
PROM = "Prometheus not ready at http://127.0.0.1:1 (connection refused)"


def test_pass(experiment):
    verdict = experiment.check(Verdict((OK,)))
    assert verdict.passed, verdict.summary()


def test_fail(experiment):
    verdict = experiment.check(Verdict((OK, BAD)))
    assert verdict.passed, verdict.summary()


def test_prometheus_down(experiment):
    verdict = experiment.check(Verdict((OK,), inconclusive=(PROM,)))
    assert verdict.passed, verdict.summary()


def test_body_forgets_to_assert(experiment):
    experiment.check(Verdict((OK, GAP)))


def test_aborted_before_injecting(experiment):
    experiment.verdict = Verdict(inconclusive=("not in steady state before injection",))
    raise RuntimeError("INCONCLUSIVE: not in steady state before injection")


def test_no_experiment():
    assert True
"""


@pytest.fixture
def session(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scenarios=SCENARIOS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # --dry-run: the plugin then sweeps no faults before the tests (nothing here acts on any);
    # no:warnings: the nested session's own warnings would join the summary line
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:warnings", "--dry-run", *args)


def test_summary_line_and_exit_code(session: pytest.Pytester) -> None:
    result = _run(session)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"failed": 1, "passed": 2, "inconclusive": 3}
    result.stdout.fnmatch_lines(["*1 failed, 2 passed, 3 inconclusive*"])


def test_letters_and_verbose_words(session: pytest.Pytester) -> None:
    result = _run(session)
    result.stdout.fnmatch_lines(["test_scenarios.py .FIII. *"])
    verbose = _run(session, "-v")
    verbose.stdout.fnmatch_lines(
        [
            "*::test_pass PASSED*",
            "*::test_fail FAILED*",
            "*::test_prometheus_down INCONCLUSIVE*",
            "*::test_body_forgets_to_assert INCONCLUSIVE*",
            "*::test_aborted_before_injecting INCONCLUSIVE*",
        ]
    )


def test_terminal_names_the_missing_evidence(session: pytest.Pytester) -> None:
    result = _run(session)
    result.stdout.fnmatch_lines(
        [
            "*faultkit: INCONCLUSIVE (counted as failures)*",
            "INCONCLUSIVE *::test_prometheus_down - INCONCLUSIVE: missing evidence: "
            "Prometheus not ready at http://127.0.0.1:1 (connection refused)",
        ]
    )


def test_a_single_inconclusive_test_fails_the_run(session: pytest.Pytester) -> None:
    result = _run(session, "-k", "prometheus_down")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"inconclusive": 1, "deselected": 5}


def _junit(pytester: pytest.Pytester) -> dict[str, ET.Element]:
    xml = Path(pytester.path) / "junit.xml"
    result = _run(pytester, f"--junitxml={xml}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    return {c.get("name", ""): c for c in ET.parse(xml).getroot().iter("testcase")}


def _props(case: ET.Element) -> dict[str | None, str | None]:
    return {p.get("name"): p.get("value") for p in case.iter("property")}


def test_junit_failure_message_and_verdict_property(session: pytest.Pytester) -> None:
    cases = _junit(session)
    for name in ("test_prometheus_down", "test_body_forgets_to_assert",
                 "test_aborted_before_injecting"):
        failure = cases[name].find("failure")
        assert failure is not None, name
        assert (failure.get("message") or "").startswith("INCONCLUSIVE:"), name
        assert _props(cases[name])["faultkit_verdict"] == "INCONCLUSIVE", name
        assert _props(cases[name])["faultkit_run_dir"] == "runs/fake", name
    assert (cases["test_prometheus_down"].find("failure").get("message") or "") == (  # type: ignore[union-attr]
        "INCONCLUSIVE: missing evidence: "
        "Prometheus not ready at http://127.0.0.1:1 (connection refused)"
    )
    assert (cases["test_aborted_before_injecting"].find("failure").get("message") or "") == (  # type: ignore[union-attr]
        "INCONCLUSIVE: missing evidence: not in steady state before injection"
    )
    fail = cases["test_fail"].find("failure")
    assert fail is not None
    assert (fail.get("message") or "").startswith("AssertionError: FAIL: lost_requests")
    assert _props(cases["test_fail"])["faultkit_verdict"] == "FAIL"
    assert cases["test_pass"].find("failure") is None
    assert _props(cases["test_pass"])["faultkit_verdict"] == "PASS"
    assert "faultkit_verdict" not in _props(cases["test_no_experiment"])


def test_incident_reports_are_listed_for_every_outcome(session: pytest.Pytester) -> None:
    """The report path is added at fixture teardown, so it is on the teardown reports."""
    result = _run(session)
    result.stdout.fnmatch_lines(
        [
            "*faultkit incident reports*",
            "runs/test_aborted_before_injecting.md",
            "runs/test_body_forgets_to_assert.md",
            "runs/test_fail.md",
            "runs/test_pass.md",
            "runs/test_prometheus_down.md",
        ]
    )


def test_a_scenario_that_cannot_run_its_experiment_is_inconclusive_not_skipped(
    tmp_path: Path,
) -> None:
    """``raise experiment.not_judgeable(why)``: the verdict on disk is INCONCLUSIVE with
    the reason as the missing evidence (a skip would read as green)."""
    from faultkit.experiment import Experiment, NotJudgeable
    from faultkit.load import LoadProfile
    from faultkit.rundir import RunDir
    from tests.unit.faultkit.experiment.test_secrets import _inventory

    inv = _inventory()
    exp = Experiment(scenario="s", node=inv.nodes[0], inventory=inv, run=RunDir(tmp_path),
                     load_profile=LoadProfile())
    with pytest.raises(NotJudgeable):
        raise exp.not_judgeable("needs two upstreams")
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert verdict["outcome"] == "INCONCLUSIVE"
    assert verdict["inconclusive"] == ["needs two upstreams"]


def test_a_runs_directory_short_of_space_ends_the_run_before_injecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under RUN_DIR_MIN_FREE_BYTES free: INCONCLUSIVE before the fault is even made to act
    (the fault here would fail loudly if entered), the reason in memory and on disk."""
    import shutil
    from collections import namedtuple

    from faultkit.experiment import Experiment, NotJudgeable, RunPlan, lifecycle
    from faultkit.load import LoadProfile
    from faultkit.rundir import RunDir
    from tests.unit.faultkit.experiment.test_secrets import _inventory

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: usage(2**30, 2**30 - 2**20, 2**20))

    class MustNotAct:
        async def __aenter__(self) -> None:
            raise AssertionError("the fault was entered")

        async def __aexit__(self, *exc: object) -> None:
            raise AssertionError("the fault was left")

    inv = _inventory()
    exp = Experiment(scenario="s", node=inv.nodes[0], inventory=inv, run=RunDir(tmp_path),
                     load_profile=LoadProfile())
    with pytest.raises(NotJudgeable, match=r"1\.0 MiB free") as aborted:
        asyncio.run(lifecycle.run_steps(exp, MustNotAct(), RunPlan(
            kind="pause", describe="pause", hold_s=1.0, baseline_s=1.0)))
    assert lifecycle.RUN_DIR_MIN_FREE_BYTES > 2**20
    assert exp.verdict is not None and exp.verdict.inconclusive == (aborted.value.reason,)
    assert json.loads((tmp_path / "verdict.json").read_text())["outcome"] == "INCONCLUSIVE"
