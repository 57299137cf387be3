"""Accepted findings: known, explained failures a node's inventory accepts until a date.

A node may list ``accepted_findings`` (:class:`faultkit.inventory.AcceptedFinding`): a
scenario pattern, a check name, a reason and an optional expiry date. :func:`apply_accepted`
turns a FAIL whose failed checks are *all* covered by unexpired findings for that scenario
into ACCEPTED (``Verdict.accepted`` lists the findings applied). It never hides anything
new: a failed check no finding covers keeps the verdict FAIL; a check that could not be
judged, or run-level missing evidence, keeps it FAIL/INCONCLUSIVE as before; an expired
finding no longer applies and is recorded in ``Verdict.expired`` so the report says so.

Scenario patterns: ``bad_input`` matches every case of that scenario (the name as in
run.json ``scenario``); ``bad_input[llama]`` or ``oom[*-long-prefill]`` match only the
cases whose pytest id (what is between the brackets of ``test_oom[sim-vllm-long-prefill]``)
matches the glob after the name (``*`` any text, ``?`` one character; nothing else is
special). A finding is valid through its ``expires`` date (inclusive).

Pure: no clock, no I/O (``today`` is an argument).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from datetime import date
from typing import Protocol

from slo.verdict import Acceptance, Verdict

#: ``name`` or ``name[case-glob]``
SCENARIO_PATTERN = r"^[A-Za-z0-9_]+(\[[^\[\]]+\])?$"
_PATTERN = re.compile(SCENARIO_PATTERN)


class Finding(Protocol):
    """What :func:`apply_accepted` reads from an accepted finding (the inventory's model)."""

    @property
    def scenario(self) -> str: ...

    @property
    def check(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def expires(self) -> date | None: ...


def _glob(pattern: str) -> re.Pattern[str]:
    parts = (".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile("".join(parts), re.DOTALL)


def scenario_matches(pattern: str, scenario: str, case: str | None = None) -> bool:
    """Whether a finding's ``pattern`` covers ``scenario`` (and its case id, if it names
    one). A pattern naming a case never matches when the case is not known."""
    if not _PATTERN.match(pattern):
        return False
    name, _, rest = pattern.partition("[")
    if name != scenario:
        return False
    if not rest:
        return True
    return case is not None and _glob(rest[:-1]).fullmatch(case) is not None


def _acceptance(finding: Finding, check: str) -> Acceptance:
    expires = finding.expires.isoformat() if finding.expires is not None else None
    return Acceptance(check=check, reason=finding.reason, scenario=finding.scenario,
                      expires=expires)


def apply_accepted(
    verdict: Verdict,
    findings: Iterable[Finding],
    scenario: str,
    today: date,
    case: str | None = None,
) -> Verdict:
    """``verdict`` with the node's accepted findings for ``scenario`` applied.

    Only a FAIL changes: for each failed check, the first unexpired finding (``today`` ≤
    ``expires``, or no ``expires``) whose scenario pattern and check name match covers it;
    expired ones that match are recorded instead. If every failed check is covered and no
    check went unjudged, the result is ACCEPTED (``accepted`` = the findings applied);
    otherwise it stays FAIL, with only the expired findings recorded. PASS and INCONCLUSIVE
    come back as they are (without any findings a previous call attached).
    """
    base = dataclasses.replace(verdict, accepted=(), expired=())
    if base.outcome != "FAIL":
        return base
    relevant = [f for f in findings if scenario_matches(f.scenario, scenario, case)]
    accepted: list[Acceptance] = []
    expired: list[Acceptance] = []
    for failed in base.failures:
        matching = [f for f in relevant if f.check == failed.name]
        live = [f for f in matching if f.expires is None or today <= f.expires]
        if live:
            accepted.append(_acceptance(live[0], failed.name))
        else:
            expired.extend(_acceptance(f, failed.name) for f in matching)
    covered = len(accepted) == len(base.failures) and not base.unjudged
    return dataclasses.replace(
        base, accepted=tuple(accepted) if covered else (), expired=tuple(expired)
    )
