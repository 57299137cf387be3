"""What the scenario catalogue must conclude on the testbed, scenario by scenario, and the
judge of a catalogue run against it: the e2e suite's verdict test
(``test_scenario_verdicts``) and ``bench/catalogue_repeat.py`` read the same expectations.

A harness that passes everything is broken, so the expectations include failures and
known findings, each with why. Everything not listed must PASS.
"""

from __future__ import annotations

import re

from tests.e2e.scenario_suite import EMPTY_PARAMETERS, Outcome

#: Scenarios expected to FAIL on the testbed, with the reason. Everything else must pass
#: (PASS, or ACCEPTED where EXPECTED_ACCEPTED says so).
EXPECTED_FAILURES: dict[str, str] = {}

#: Scenarios expected to be ACCEPTED (a pass whose only failures are accepted findings of
#: the node, testbed/inventory.yaml ``accepted_findings``), checked through the JUnit
#: ``faultkit_verdict`` property, with the reason.
EXPECTED_ACCEPTED: dict[str, str] = {
    r"test_bad_input\[llama\]": (
        "llama.cpp answers a chat message without 'role' with HTTP 500 (and ignores some "
        "wrongly typed fields with 200): a known engine behaviour, accepted until 2027-06-30"
    ),
}


#: Scenarios expected to be SKIPPED, with the reason: a skip reads green, so every other
#: skip of the catalogue is a failure of this module. Rows pytest writes for a parameter
#: set left empty in one scenario process (a node another lane runs) are not skips of a
#: scenario; :func:`tests.e2e.scenario_suite.merge_outcomes` lets the lane that ran it win.
EXPECTED_SKIPS: dict[str, str] = {
    r"test_host_restart\[llama\]": (
        "llama's Docker host is this machine's own engine: the harness cannot restart the "
        "host it runs on (the second host's case, [sim-vllm-h2], must run)"
    ),
    r"test_contained_failure_across_hosts\[llama\]": (
        "the same: this machine's host is never the one restarted"
    ),
}


def expected_skip(test_id: str) -> str | None:
    return next(
        (why for pattern, why in EXPECTED_SKIPS.items() if re.fullmatch(pattern, test_id)), None
    )


def expected_to_fail(test_id: str) -> str | None:
    return next(
        (why for pattern, why in EXPECTED_FAILURES.items() if re.fullmatch(pattern, test_id)), None
    )


def expected_accepted(test_id: str) -> str | None:
    return next(
        (why for pattern, why in EXPECTED_ACCEPTED.items() if re.fullmatch(pattern, test_id)), None
    )


def unexpected_verdicts(outcomes: dict[str, Outcome]) -> list[str]:
    """One line per scenario whose outcome is not the expected one (empty: all as
    expected): a skip not listed, a listed skip that ran, a FAIL or INCONCLUSIVE where a
    PASS was expected (or the reverse), an ACCEPTED where none was expected (or missing)."""
    wrong = []
    for test_id, outcome in sorted(outcomes.items()):
        if outcome.skipped:
            if expected_skip(test_id) is None and EMPTY_PARAMETERS not in outcome.message:
                wrong.append(f"{test_id}: SKIPPED ({outcome.message[:300]}), expected to run")
            continue
        if expected_skip(test_id) is not None:
            wrong.append(f"{test_id}: ran, but it was expected to be skipped")
            continue
        why = expected_to_fail(test_id)
        accepted = expected_accepted(test_id)
        if why is None and not outcome.passed:
            wrong.append(f"{test_id}: expected PASS, got {outcome.verdict or 'FAIL'}: "
                         f"{outcome.message[:400]}")
        elif why is not None and outcome.passed:
            wrong.append(f"{test_id}: expected FAIL ({why}), got PASS")
        elif accepted is not None and outcome.verdict != "ACCEPTED":
            wrong.append(f"{test_id}: expected ACCEPTED ({accepted}), got {outcome.verdict}")
        elif accepted is None and outcome.verdict == "ACCEPTED":
            wrong.append(f"{test_id}: ACCEPTED, but no accepted finding was expected")
    return wrong
