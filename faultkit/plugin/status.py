"""How a scenario's verdict reads in pytest's output: INCONCLUSIVE apart from FAIL.

The ``experiment`` fixture attaches its experiment to the test item (:func:`attach`). Once
the test body has run, :func:`record_verdict` (the plugin's ``pytest_runtest_makereport``
wrapper) stamps the call report with the verdict's outcome as the ``faultkit_verdict``
user property — JUnit XML carries it as a ``<property>`` — and, for an INCONCLUSIVE
verdict, makes the report a failure whose message is the verdict's summary
(``INCONCLUSIVE: missing evidence: …``). :func:`verdict_status` then gives such a report
its own terminal status: category ``inconclusive`` ("2 inconclusive" in the summary line),
letter ``I``, word ``INCONCLUSIVE``. It still counts as a failure for the exit code and
``--maxfail`` (``report.outcome`` stays ``"failed"``).

An ACCEPTED verdict (a FAIL made only of the node's accepted findings; ``slo.accepted``)
counts as a pass — ``Verdict.passed`` is true, so the scenario's ``assert verdict.passed``
holds — and a passed call report stamped ACCEPTED is shown as category ``passed`` (counted
among the passes), letter ``A``, word ``ACCEPTED``; the terminal summary lists each with
its known finding (:func:`accepted_lines`). The plugin never turns a failed report into a
pass: a test whose body failed for any other reason stays FAILED.

A dry run is reported as a skip: the experiment raises
:class:`~faultkit.experiment.outcomes.DryRunPlan` once the plan is printed, and the
plugin's ``pytest_runtest_call`` wrapper skips the test with it.

Pure functions over reports and items, so they are testable without an experiment; light
(pytest and the standard library), as the plugin's entry module imports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, cast

import pytest

if TYPE_CHECKING:
    from slo.verdict import Outcome, Verdict

#: the user property (and JUnit ``<property>``) holding the verdict:
#: PASS | FAIL | INCONCLUSIVE | ACCEPTED
VERDICT_PROPERTY = "faultkit_verdict"
#: ``pytest_report_teststatus``'s answer for an INCONCLUSIVE test: category, letter, word
INCONCLUSIVE_STATUS = ("inconclusive", "I", "INCONCLUSIVE")
#: ... and for an ACCEPTED one (counted among the passes)
ACCEPTED_STATUS = ("passed", "A", "ACCEPTED")
_OUTCOMES: frozenset[str] = frozenset({"PASS", "FAIL", "INCONCLUSIVE", "ACCEPTED"})
#: the user property holding an ACCEPTED verdict's summary (for the terminal summary)
_ACCEPTED_PROPERTY = "faultkit_accepted"


class HasVerdict(Protocol):
    """What the plugin reads from an experiment: its verdict, once judged (else ``None``)."""

    @property
    def verdict(self) -> Verdict | None: ...


_SOURCE_KEY = pytest.StashKey[HasVerdict]()


def attach(item: pytest.Item, source: HasVerdict) -> None:
    """Record on ``item`` where its verdict will be (the ``experiment`` fixture does this)."""
    item.stash[_SOURCE_KEY] = source


def verdict_of(item: pytest.Item) -> Verdict | None:
    """The verdict of the experiment attached to ``item``; ``None``: none attached or judged."""
    source = item.stash.get(_SOURCE_KEY, None)
    return None if source is None else source.verdict


def outcome_of(report: pytest.TestReport) -> Outcome | None:
    """The verdict outcome stamped on ``report`` by :func:`record_verdict`, if any."""
    for key, value in reversed(report.user_properties):
        if key == VERDICT_PROPERTY and value in _OUTCOMES:
            return cast("Outcome", value)
    return None


def _set_property(properties: list[tuple[str, object]], value: str) -> None:
    properties[:] = [p for p in properties if p[0] != VERDICT_PROPERTY]
    properties.append((VERDICT_PROPERTY, value))


def mark_inconclusive(report: pytest.TestReport, message: str) -> None:
    """Make ``report`` a failure whose one-line message (terminal short summary, JUnit
    ``message``) is ``message``; a traceback it already has is kept.

    A passed test becomes failed: a scenario whose verdict is INCONCLUSIVE never passes,
    whatever its body asserted. Skipped and xfail reports are left alone.
    """
    if report.skipped or hasattr(report, "wasxfail"):
        return
    if report.passed:
        report.outcome = "failed"
        report.longrepr = message
        return
    reprcrash = getattr(report.longrepr, "reprcrash", None)
    if reprcrash is not None and hasattr(reprcrash, "message"):
        reprcrash.message = message
    else:
        report.longrepr = message + (f"\n\n{report.longrepr}" if report.longrepr else "")


def record_verdict(item: pytest.Item, report: pytest.TestReport) -> None:
    """Stamp a call-phase ``report`` with the item's verdict (see the module docstring).

    Sets the ``faultkit_verdict`` property on the report and on the item (so the teardown
    report, which JUnit XML reads its properties from, has it too). Nothing happens for
    setup/teardown reports or an item without a judged experiment.
    """
    if report.when != "call":
        return
    verdict = verdict_of(item)
    if verdict is None:
        return
    _set_property(item.user_properties, verdict.outcome)
    _set_property(report.user_properties, verdict.outcome)
    if verdict.outcome == "INCONCLUSIVE":
        mark_inconclusive(report, verdict.summary())
    if verdict.outcome == "ACCEPTED":
        report.user_properties.append((_ACCEPTED_PROPERTY, verdict.summary()))


def verdict_status(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """:data:`INCONCLUSIVE_STATUS` for a failed call report stamped INCONCLUSIVE,
    :data:`ACCEPTED_STATUS` for a passed one stamped ACCEPTED, else ``None`` (pytest's
    own status applies)."""
    if report.when != "call":
        return None
    if report.failed and outcome_of(report) == "INCONCLUSIVE":
        return INCONCLUSIVE_STATUS
    if report.passed and outcome_of(report) == "ACCEPTED":
        return ACCEPTED_STATUS
    return None


def message_of(report: pytest.TestReport) -> str:
    """A failed report's one-line message (what JUnit XML puts in ``message``)."""
    reprcrash = getattr(report.longrepr, "reprcrash", None)
    text = str(getattr(reprcrash, "message", None) or report.longrepr or "")
    return text.splitlines()[0] if text else ""


def accepted_lines(reports: Iterable[pytest.TestReport]) -> list[str]:
    """``"ACCEPTED <nodeid> - ACCEPTED (known finding: …)"`` for each passed call report
    stamped ACCEPTED, for the terminal summary."""
    lines = []
    for r in reports:
        if r.when != "call" or not r.passed or outcome_of(r) != "ACCEPTED":
            continue
        why = next((str(v) for k, v in reversed(r.user_properties) if k == _ACCEPTED_PROPERTY),
                   "ACCEPTED")
        lines.append(f"ACCEPTED {r.nodeid} - {why}")
    return lines


def inconclusive_lines(reports: Iterable[pytest.TestReport]) -> list[str]:
    """``"INCONCLUSIVE <nodeid> - <what evidence was missing>"`` for the terminal summary."""
    return [f"INCONCLUSIVE {r.nodeid} - {message_of(r)}" for r in reports]
