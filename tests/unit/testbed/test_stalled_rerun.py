"""CI's catalogue runs a scenario once more when it was INCONCLUSIVE because the harness
stalled, and only then (:func:`tests.e2e.scenario_suite.rerun_stalled`); the later
attempt's outcome stands and the suite's exit status follows it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from faultkit.model.records import RequestRecord
from slo.gaps import client_gaps
from tests.e2e import scenario_suite
from tests.e2e.scenario_suite import Outcome, rerun_stalled, suite_exit_code


def _outcome(tmp_path: Path, test_id: str, verdict: str, lost: dict[str, int],
             sent_late: int = 0, inconclusive: Sequence[str] = ()) -> Outcome:
    run_dir = tmp_path / test_id
    run_dir.mkdir()
    (run_dir / "measurement.json").write_text(json.dumps({"lost_by_class": lost,
                                                          "sent_late": sent_late,
                                                          "inconclusive": list(inconclusive)}))
    passed = verdict in ("PASS", "ACCEPTED")
    return Outcome(test_id=test_id, passed=passed, skipped=False,
                   message="" if passed else f"{verdict}: …", run_dir=run_dir,
                   verdict=verdict, classname="scenarios.test_pause")


def test_only_an_inconclusive_with_a_stalled_client_is_the_harness_stalling(
        tmp_path: Path) -> None:
    assert _outcome(tmp_path, "a", "INCONCLUSIVE", {"client_stalled": 1}).harness_stalled()
    assert not _outcome(tmp_path, "b", "INCONCLUSIVE", {"timeout_connect": 4}).harness_stalled()
    assert not _outcome(tmp_path, "c", "FAIL", {"client_stalled": 1}).harness_stalled()
    assert not _outcome(tmp_path, "d", "PASS", {}).harness_stalled()
    # requests it sent late in the judged span: the client stalled too
    assert _outcome(tmp_path, "e", "INCONCLUSIVE", {}, sent_late=3).harness_stalled()
    assert not _outcome(tmp_path, "f", "FAIL", {}, sent_late=3).harness_stalled()
    # a harness action the node served through (test_bad_input): its stalled timeouts are
    # no loss, only the measurement's reason names the stall — as slo.gaps words it
    stalled_requests = [RequestRecord(
        id="r", node="n", kind="chat", t_invoke=10.6, status="unknown", t_end=12.6,
        error_class="client_stalled", error_detail="timeout_connect", t_scheduled=10.0)]
    [reason] = client_gaps(stalled_requests)
    assert _outcome(tmp_path, "g", "INCONCLUSIVE", {}, inconclusive=[reason]).harness_stalled()
    assert not _outcome(tmp_path, "h", "INCONCLUSIVE", {},
                        inconclusive=["Prometheus was unreachable during the run"]
                        ).harness_stalled()


def test_the_node_id_is_the_tests_file_and_name() -> None:
    outcome = Outcome("test_pause[sim-vllm]", False, False, "", None, "INCONCLUSIVE",
                      classname="scenarios.test_pause")
    assert outcome.node_id() == "scenarios/test_pause.py::test_pause[sim-vllm]"


def test_a_stalled_scenario_is_rerun_alone_and_its_later_outcome_stands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stalled = _outcome(tmp_path, "test_pause[sim-vllm]", "INCONCLUSIVE",
                       {"client_stalled": 1, "timeout_connect": 4})
    failed = _outcome(tmp_path, "test_kill[llama]", "FAIL", {"timeout_connect": 9})
    inconclusive = _outcome(tmp_path, "test_oom[vllm]", "INCONCLUSIVE", {})
    passed = _outcome(tmp_path, "test_pause[llama]", "PASS", {})
    outcomes = {o.test_id: o for o in (stalled, failed, inconclusive, passed)}
    calls: list[list[str]] = []

    def fake_run(out: Path, *args: str, tests: Sequence[str] = (), **_: object) -> tuple[
            int, dict[str, Outcome], str]:
        calls.append(list(tests))
        again = _outcome(tmp_path, "again", "PASS", {})
        return 0, {"test_pause[sim-vllm]": again}, "1 passed"

    monkeypatch.setattr(scenario_suite, "run_scenarios", fake_run)
    merged, result = rerun_stalled(tmp_path / "rerun", outcomes)
    assert calls == [["scenarios/test_pause.py::test_pause[sim-vllm]"]]
    assert result is not None and result[0] == 0
    assert merged["test_pause[sim-vllm]"].passed
    assert merged["test_pause[sim-vllm]"].earlier == (stalled,)
    for other in (failed, inconclusive, passed):
        assert merged[other.test_id] is other


def test_nothing_is_rerun_when_nothing_stalled(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(*_: object, **__: object) -> None:
        raise AssertionError("rerun without a stalled scenario")

    monkeypatch.setattr(scenario_suite, "run_scenarios", fake_run)
    outcomes = {"f": _outcome(tmp_path, "f", "FAIL", {"client_stalled": 2})}
    assert rerun_stalled(tmp_path, outcomes) == (outcomes, None)


def test_the_suite_exits_by_the_outcomes_after_the_rerun(tmp_path: Path) -> None:
    ok = {"a": _outcome(tmp_path, "a", "PASS", {})}
    bad = {**ok, "b": _outcome(tmp_path, "b", "INCONCLUSIVE", {"client_stalled": 1})}
    assert suite_exit_code([1, 0, 5], ok) == 0  # the lane's 1 was the stalled run, since rerun
    assert suite_exit_code([0, 0], bad) == 1
    assert suite_exit_code([1, 2], ok) == 2  # an interrupted process is never a pass
