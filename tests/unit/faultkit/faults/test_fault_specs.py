"""One home per fault fact: every kind in :data:`faultkit.model.kinds.FAULTS` has a spec whose
implementation is that kind's class, a scenario (or a reason it has none), a row in
docs/faults.md, and a diagnosis that names its spec's cause. Adding a fault kind means
adding one spec and one implementation; this test names whatever else is missing."""

from __future__ import annotations

import re

import pytest

from faultkit.faults import fault_class
from faultkit.model.kinds import ACTIONS, FAULT_KINDS, FAULTS, fault_phrase, kinds_of, spec_of
from tests.paths import REPO

ROOT = REPO
#: kinds with no scenario of their own, and why
NO_SCENARIO: dict[str, str] = {
    "restart": "the cold-start path is test_cold_start's `stop`; `restart` is the same path "
               "in one act, covered by the integration tests",
    "loss": "needs sch_netem for realistic loss; covered by the integration tests",
    "bandwidth": "covered by the integration tests (tc tbf in the container's netns)",
    "stall": "test_pause runs it (whole=true) on a node whose inventory says pause_with: "
             "sigstop; covered by the integration tests",
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_every_fault_kind_has_its_class_a_scenario_and_a_docs_row(kind: str) -> None:
    spec = FAULTS[kind]
    assert fault_class(kind).kind == kind
    assert spec.cause and spec.family
    scenarios = "".join(p.read_text() for p in (ROOT / "scenarios").glob("*.py"))
    assert f'fault("{kind}"' in scenarios or kind in NO_SCENARIO, (
        f"{kind}: add a scenario (@pytest.mark.fault({kind!r})) or a reason to NO_SCENARIO")
    docs = (ROOT / "docs" / "faults.md").read_text()
    assert re.search(rf"^\| `{kind}` \|", docs, re.M), f"{kind}: add its row to docs/faults.md"


def test_the_specs_hold_the_facts_the_reports_read() -> None:
    assert {k for k, s in FAULTS.items() if s.kills_the_engine} == {"kill", "kill_process"}
    assert kinds_of("network") == {"partition", "loss", "bandwidth", "latency"}
    assert {k for k, s in FAULTS.items() if s.request_level} == {"oversized_context", "flood"}
    assert set(FAULT_KINDS) == set(FAULTS) | set(ACTIONS)
    assert all(s.implementation is None for s in ACTIONS.values())
    assert spec_of("bad_input") is ACTIONS["bad_input"] and spec_of(None) is None
    assert fault_phrase("latency", {"delay_ms": 300}) == "300 ms of added latency"
    assert fault_phrase("nope", {}) == "the nope fault"


def test_no_fault_class_restates_a_spec_fact() -> None:
    """The facts live in the spec: a class attribute of the same name would be a second home."""
    for kind in FAULTS:
        cls = fault_class(kind)
        for fact in ("family", "revert_words", "revert_is_the_fix", "kills_the_engine"):
            assert not hasattr(cls, fact), f"{cls.__name__}.{fact}: it is FAULTS[{kind!r}]'s"
