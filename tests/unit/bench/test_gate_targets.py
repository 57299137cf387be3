"""bench/gate_targets.py: a case is met only by the expected decision within its target."""

from __future__ import annotations

from gate_targets import CASES, held


def test_a_case_is_met_by_the_expected_decision_within_its_seconds() -> None:
    good = CASES[0]
    assert held(good, {"decision": "pass", "seconds": 149.9})["met"]
    assert not held(good, {"decision": "pass", "seconds": 150.1})["met"]
    assert not held(good, {"decision": "fail", "seconds": 90.0})["met"]  # fast, but wrong
    assert not held(good, {"decision": None, "seconds": None})["met"]  # the gate wrote nothing

