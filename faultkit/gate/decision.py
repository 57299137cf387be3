"""The gate's decision: each scenario's result read from JUnit and its run directory, then
pass or fail for the candidate config (:func:`decide`), and the config diff shown in gate.md.

Pure functions over files the scenario run wrote; ``faultkit gate`` (:mod:`.gate`) runs the
scenarios and acts on the decision. Only PASS and ACCEPTED (a FAIL made only of the node's
accepted findings) pass; FAIL, INCONCLUSIVE (evidence missing) and SKIPPED (not run: no
evidence at all) fail the gate, each with its reasons.
"""

from __future__ import annotations

import difflib
import xml.etree.ElementTree as ET
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from faultkit.gate.baseline import run_figures
from faultkit.inventory import Inventory
from faultkit.rundir import RunDir, UnreadableRunFile
from slo.gaps import harness_stalled
from slo.types import read_verdict
from slo.verdict import Verdict

__all__ = ["GateDecision", "NotRun", "ScenarioOutcome", "ScenarioResult", "client_stalled",
           "config_diff", "decide", "merge_junit", "not_run", "read_junit", "replace_cases"]


#: a gate scenario's result: its verdict, or SKIPPED (did not run: no evidence at all)
ScenarioResult = Literal["PASS", "FAIL", "INCONCLUSIVE", "SKIPPED", "ACCEPTED"]
#: the one-line lead of each non-passing result, before its reasons
_LEADS: dict[str, str] = {
    "ACCEPTED": "ACCEPTED — ",
    "FAIL": "FAIL — ",
    "INCONCLUSIVE": "INCONCLUSIVE — missing evidence: ",
    "SKIPPED": "SKIPPED — not run: ",
}


@dataclass(frozen=True)
class ScenarioOutcome:
    """One gate scenario: its result and why (failed checks, missing evidence, skip reason)."""

    name: str
    outcome: ScenarioResult
    why: str
    run_dir: str | None
    detection_s: float | None = None
    recovery_s: float | None = None
    lost: int | None = None
    #: the overload scenario's served rate under its flood (its saturation point)
    peak_rps: float | None = None
    #: INCONCLUSIVE because the load client stalled (:func:`slo.gaps.harness_stalled`): it
    #: says nothing of the node, and the gate runs it again once
    harness_stalled: bool = False

    @property
    def passed(self) -> bool:
        """PASS or ACCEPTED (accepted findings count as a pass)."""
        return self.outcome in ("PASS", "ACCEPTED")

    def line(self) -> str:
        """``"<name>: PASS"``, ``"<name>: ACCEPTED — <check>: <why> (accepted: <reason>,
        until <date>)"``, ``"<name>: FAIL — <why>"``, ``"<name>: INCONCLUSIVE — missing
        evidence: <why>"`` or ``"<name>: SKIPPED — not run: <why>"``."""
        if self.outcome == "PASS":
            return f"{self.name}: PASS"
        return f"{self.name}: {_LEADS[self.outcome]}{self.why}"

    def to_json(self) -> dict[str, Any]:
        """The gate.json entry: the fields plus ``passed`` and ``line``."""
        return {**asdict(self), "passed": self.passed, "line": self.line()}


@dataclass(frozen=True)
class GateDecision:
    """What the gate decided, why, and one line per scenario that did not pass."""

    decision: Literal["pass", "fail"]
    why: str
    not_passed: tuple[str, ...] = ()
    #: one line per ACCEPTED scenario (it did not fail the gate)
    accepted: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotRun:
    """A gate scenario the run collected and never ran, and why."""

    name: str
    why: str

    def line(self) -> str:
        return f"{self.name}: not run — {self.why}"

    def to_json(self) -> dict[str, str]:
        return {**asdict(self), "line": self.line()}


def not_run(collected: Sequence[str], outcomes: Sequence[ScenarioOutcome], pytest_exit: int,
            *, stopped_at: str | None) -> list[NotRun]:
    """The scenarios of ``collected`` (one run's own list, in its order) with no outcome:
    those the gate did not run once ``stopped_at`` (the first scenario that did not pass —
    in this run, or on another node of a pool) decided it, else those an early end of
    pytest left."""
    ran = {o.name for o in outcomes}
    if stopped_at is not None:
        why = (f"the decision was FAIL at {stopped_at}; the gate stops at its first scenario "
               "that does not pass (--full runs them all)")
    else:
        why = f"the scenario run ended before it (pytest exit {pytest_exit})"
    return [NotRun(name, why) for name in collected if name not in ran]


def decide(outcomes: Sequence[ScenarioOutcome], pytest_exit: int, config: str,
           left: Sequence[NotRun] = ()) -> GateDecision:
    """The gate's decision from its scenarios' outcomes and pytest's exit code.

    Pass only if pytest ran cleanly (exit 0), at least one scenario ran and every scenario
    is PASS or ACCEPTED. FAIL, INCONCLUSIVE and SKIPPED scenarios each fail the gate and are
    listed on their own line (:meth:`ScenarioOutcome.line`); so does pytest exiting with a
    failure no scenario accounts for (an error outside the scenarios). ACCEPTED scenarios
    (known findings of the node, unexpired) do not fail it; they are listed in ``accepted``
    and counted in ``why``. Scenarios ``left`` unrun (:func:`not_run`) are counted in
    ``why`` too: a FAIL on 1 of 2 ran scenarios says the other 6 did not run.
    """
    not_passed = tuple(o.line() for o in outcomes if not o.passed)
    accepted = tuple(o.line() for o in outcomes if o.outcome == "ACCEPTED")
    if pytest_exit not in (0, 1) or not outcomes:
        why = f"the gate scenarios did not run cleanly (pytest exit {pytest_exit})"
        return GateDecision("fail", why, not_passed, accepted)
    if not_passed:
        counts = ", ".join(
            f"{n} {kind}"
            for kind in ("FAIL", "INCONCLUSIVE", "SKIPPED")
            if (n := sum(o.outcome == kind for o in outcomes))
        )
        unrun = f", {len(left)} not run" if left else ""
        why = (f"{counts} of {len(outcomes)} gate scenarios{unrun}: "
               + "; ".join(not_passed))
        return GateDecision("fail", why[:800], not_passed, accepted)
    if left:
        why = (f"all {len(outcomes)} gate scenarios that ran passed, but {len(left)} did not "
               f"run (pytest exit {pytest_exit})")
        return GateDecision("fail", why, tuple(n.line() for n in left), accepted)
    if pytest_exit != 0:
        why = (f"pytest exited {pytest_exit} although all {len(outcomes)} scenarios passed "
               "(an error outside the scenarios; see junit.xml)")
        return GateDecision("fail", why, (), accepted)
    why = f"all {len(outcomes)} gate scenarios passed on {config}"
    if accepted:
        why += f" ({len(accepted)} ACCEPTED: known findings of the node)"
    return GateDecision("pass", why, (), accepted)


def config_diff(inventory: Inventory, current: str | None, candidate: str) -> list[str]:
    """Unified diff of the two serving configs as YAML, secrets redacted.

    It goes into gate.json and gate.md, so secret-named env values, secret flags' arguments
    in ``command`` and the inventory's known secret values are ``[REDACTED]``
    (:func:`reports.text.redact_data`); a changed secret shows as an unchanged line.
    """
    from reports.text import known_secrets, redact_data

    secrets = known_secrets(inventory)

    def dump(name: str | None) -> list[str]:
        if name is None:
            return ["(unknown)\n"]
        config = inventory.serving_config(name).model_dump(mode="json", exclude_defaults=True)
        safe = redact_data(config, secrets)
        return yaml.safe_dump(safe, sort_keys=True, width=100).splitlines(keepends=True)

    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            dump(current), dump(candidate), fromfile=current or "current", tofile=candidate
        )
    ]


def read_junit(path: Path) -> list[ScenarioOutcome]:
    """Scenario outcomes from pytest's JUnit XML (verdicts and run dirs from its properties;
    reasons from each run's verdict.json when there is one, else from the XML)."""
    if not path.exists():
        return []
    outcomes = []
    for case in ET.parse(path).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        run_dir = props.get("faultkit_run_dir")
        outcome, why = _case_result(case, props.get("faultkit_verdict"))
        verdict = _verdict(Path(run_dir)) if run_dir else None
        if verdict is not None and outcome == "FAIL" and verdict.outcome == "INCONCLUSIVE":
            outcome = "INCONCLUSIVE"  # a run from before the plugin stamped its verdict
        if outcome == "PASS" and props.get("faultkit_verdict") == "ACCEPTED":
            outcome, why = "ACCEPTED", "accepted known finding (no verdict.json)"
        if verdict is not None and outcome in ("FAIL", "INCONCLUSIVE", "ACCEPTED"):
            why = _reasons(verdict, outcome) or why
        figures = (run_figures(RunDir(Path(run_dir))) if run_dir and outcome != "SKIPPED"
                   else {})
        stalled = (outcome == "INCONCLUSIVE" and run_dir is not None
                   and client_stalled(Path(run_dir)))
        outcomes.append(
            ScenarioOutcome(
                name=case.get("name", "?"), outcome=outcome, why=why, run_dir=run_dir,
                harness_stalled=stalled, **figures
            )
        )
    return outcomes


def replace_cases(junit: Path, again: Path, names: Collection[str]) -> None:
    """Rewrite ``junit`` with its test cases named in ``names`` taken out and the test
    suites of ``again`` (a second run of them, and of what the first left) added: the
    later attempt's outcome stands, once."""
    root = ET.parse(junit).getroot() if junit.exists() else ET.Element("testsuites")
    for suite in root.iter("testsuite"):
        for case in [c for c in suite.findall("testcase") if c.get("name") in names]:
            suite.remove(case)
    if root.tag == "testsuite":
        wrapper = ET.Element("testsuites")
        wrapper.append(root)
        root = wrapper
    if again.exists():
        second = ET.parse(again).getroot()
        root.extend([second] if second.tag == "testsuite" else list(second.iter("testsuite")))
    ET.ElementTree(root).write(junit, encoding="utf-8", xml_declaration=True)


def merge_junit(parts: Sequence[Path], out: Path) -> None:
    """One JUnit XML file of every part's test suites (a part that is missing, say a
    run interrupted before pytest wrote it, adds nothing)."""
    root = ET.Element("testsuites")
    for part in parts:
        if not part.exists():
            continue
        tree = ET.parse(part).getroot()
        suites = [tree] if tree.tag == "testsuite" else list(tree.iter("testsuite"))
        root.extend(suites)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)


def _case_result(case: ET.Element, verdict: str | None) -> tuple[ScenarioResult, str]:
    """A JUnit testcase's result and the first line of its message."""
    for tag, default in (("skipped", "skipped"), ("failure", "failed"), ("error", "error")):
        element = case.find(tag)
        if element is None:
            continue
        message = (element.get("message") or default).splitlines()[0][:300]
        if tag == "skipped":
            return "SKIPPED", message
        if verdict == "INCONCLUSIVE" or message.startswith("INCONCLUSIVE:"):
            return "INCONCLUSIVE", message.removeprefix("INCONCLUSIVE:").strip().removeprefix(
                "missing evidence:"
            ).strip()
        return "FAIL", message
    return "PASS", "all checks passed"


def client_stalled(run_dir: Path) -> bool:
    """Whether the run's measurement.json says its load client stalled
    (:func:`slo.gaps.harness_stalled`; unreadable or absent: no)."""
    run = RunDir(run_dir)
    try:
        return harness_stalled(run.read_object(run.measurement_json))
    except UnreadableRunFile:
        return False


def _verdict(run_dir: Path) -> Verdict | None:
    """The run's verdict.json; ``None`` if absent or unreadable (the XML's message stands)."""
    try:
        return read_verdict(RunDir(run_dir))
    except UnreadableRunFile:
        return None


def _reasons(verdict: Verdict, outcome: ScenarioResult) -> str:
    """The verdict's own reasons: failed checks for FAIL; missing evidence (then any failed
    checks) for INCONCLUSIVE; the accepted failures with their findings for ACCEPTED."""
    failed = "; ".join(f"{c.name}: {c.why}" for c in verdict.failures)
    if outcome == "ACCEPTED":
        return "; ".join(verdict.accepted_lines())
    if outcome == "FAIL":
        return failed
    missing = "; ".join(verdict.missing_evidence)
    return missing + (f" (also failed: {failed})" if failed and missing else "")


