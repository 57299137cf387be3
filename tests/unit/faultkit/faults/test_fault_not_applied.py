"""A fault the platform refuses never crashes a run (issue 42).

Acts retry transient Docker errors with the undo steps' bound, each retry logged; an act
that still fails leaves nothing applied, says whether anything had taken effect
(``not_applied``: ``applied`` none / partly) and raises :class:`FaultNotApplied`; the
experiment measures such a run anyway and judges it INCONCLUSIVE "the fault could not be
applied: …", and through the plugin it reads as an INCONCLUSIVE verdict with its run
directory complete. A real ``pause`` fault against a fake Docker engine
(:func:`tests.unit.faults_fake.fake_engine`), a loopback engine for the load, no Docker.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tenacity import wait_none

from faultkit.errors import DockerError, FaultNotApplied
from faultkit.faults import make_fault, undo
from faultkit.faults.base import Fault
from faultkit.faults.params import ParamSpec
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.model.events import EventKind
from faultkit.model.records import Event
from tests.paths import REPO
from tests.unit.faults_fake import WORLD, FakeDockerAPI, api_error, fake_engine, node

pytest_plugins = ["pytester"]

#: what runc answers through Docker when the cgroup v1 freezer cannot freeze the container
FREEZER = "Cannot pause container ffff: OCI runtime pause failed: unable to freeze: unknown"


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(undo, "UNDO_WAIT", wait_none())


@pytest.fixture(autouse=True)
def _clean_world() -> None:
    WORLD.clear()


def _engine_node(tmp_path: Path, api: FakeDockerAPI, **kw: Any) -> Node:
    """A node whose container is ``api``'s, on an engine URL of this test's own."""
    url = f"unix://{tmp_path}/docker.sock"
    fake_engine(url, api)
    return node(base_url=f"http://127.0.0.1:{api.port}",
                docker={"host": url, "container": api.name}, **kw)


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


# --------------------------------------------------------------------------- the fault


async def test_a_pause_refused_twice_then_done_is_applied_after_3_attempts_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    api = FakeDockerAPI("engine", 9, pause_failures=2, pause_error=api_error(500, FREEZER))
    events: list[Event] = []
    fault = make_fault("pause", _engine_node(tmp_path, api),
                       journal=FaultJournal(tmp_path / "journal"), timeline=events.append)
    with caplog.at_level(logging.INFO, logger="faultkit.faults.base"):
        async with fault:
            assert api.paused
            assert FaultJournal(tmp_path / "journal").records()[0].state == "applied"
    assert api.calls.count("pause") == 3
    assert not api.paused  # and reverted as usual
    tries = [r.getMessage() for r in caplog.records if " act pause engine " in r.getMessage()]
    assert len(tries) == 3, tries
    assert "failed (attempt 1 of 5)" in tries[0] and "unable to freeze" in tries[0]
    assert "failed (attempt 2 of 5)" in tries[1]
    assert "succeeded (attempt 3 of 5)" in tries[2]
    assert _kinds(events) == ["inject_start", "act", "inject_end", "revert_start", "revert_end"]


async def test_a_pause_the_freezer_always_refuses_is_not_applied_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    api = FakeDockerAPI("engine", 9, pause_failures=1000, pause_error=api_error(500, FREEZER))
    events: list[Event] = []
    journal = FaultJournal(tmp_path / "journal")
    fault = make_fault("pause", _engine_node(tmp_path, api), journal=journal,
                       timeline=events.append)
    with pytest.raises(FaultNotApplied) as raised:
        await fault.inject()
    error = raised.value
    assert error.reason.startswith("the fault could not be applied: ")
    assert FREEZER in error.reason  # Docker's own words
    assert "cgroup freezer cannot freeze the container" in error.reason
    assert "e.g. SIGSTOP of the engine's processes" in error.reason
    assert "never switches by itself" in error.reason
    assert error.reason.endswith("(after 5 attempts; nothing was applied)")
    assert (error.attempts, error.applied, error.steps_done) == (5, "none", [])
    assert isinstance(error.__cause__.__cause__, DockerError)  # type: ignore[union-attr]
    assert api.calls.count("pause") == undo.UNDO_ATTEMPTS
    assert _kinds(events) == ["inject_start", "act", "not_applied", "revert_start",
                              "revert_end"]
    data = events[2].data
    assert (data["attempts"], data["applied"], data["steps_done"]) == (5, "none", [])
    assert FREEZER in data["error"]
    # nothing left applied: the record is reverted, the container not paused
    (record,) = journal.records()
    assert record.state == "reverted"
    assert journal.unreverted() == []
    assert not api.paused
    await fault.revert()  # idempotent: nothing more to do
    assert "unpause" not in api.calls


async def test_an_answer_that_will_not_change_is_tried_once(tmp_path: Path) -> None:
    api = FakeDockerAPI("engine", 9, pause_failures=1000,
                        pause_error=api_error(409, "Container ffff is not running"))
    fault = make_fault("pause", _engine_node(tmp_path, api),
                       journal=FaultJournal(tmp_path / "journal"))
    with pytest.raises(FaultNotApplied, match=r"is not running \(nothing was applied\)$") as raised:
        await fault.inject()
    assert raised.value.attempts == 1
    assert api.calls.count("pause") == 1


def _break(key: str) -> None:
    WORLD[key] = "broken"


class _TwoActs(Fault):
    """Breaks WORLD["a"], then WORLD["b"]; Docker refuses the second act (transiently, each
    time), unless it is done ``once``."""

    kind: ClassVar[str] = "pause"
    acts_on_container: ClassVar[bool] = False
    PARAMS: ClassVar[ParamSpec] = {"once": (bool, False)}
    tries_b = 0

    async def _prepare(self) -> list[dict[str, Any]]:
        return [{"op": "fake_restore", "key": k, "value": "ok"} for k in ("a", "b")]

    async def _apply(self) -> None:
        await self.act(_break, "a")
        second = self.act_once if self.params["once"] else self.act
        await second(self._break_b)

    def _break_b(self) -> None:
        type(self).tries_b += 1
        raise DockerError("engine: Docker API error: 503 busy", transient=True)


@pytest.mark.parametrize(("once", "tries"), [(False, 5), (True, 1)])
async def test_a_fault_half_done_is_partly_applied_and_reverted(
    tmp_path: Path, once: bool, tries: int,
) -> None:
    _TwoActs.tries_b = 0
    events: list[Event] = []
    journal = FaultJournal(tmp_path)
    fault = _TwoActs(node(), journal=journal, timeline=events.append, once=once)
    with pytest.raises(FaultNotApplied) as raised:
        await fault.inject()
    assert _TwoActs.tries_b == tries
    assert (raised.value.applied, raised.value.steps_done) == ("partly", ["_break a"])
    assert "partly applied (_break a done), then reverted" in raised.value.reason
    (gone,) = [e for e in events if e.kind == EventKind.NOT_APPLIED]
    assert (gone.data["applied"], gone.data["attempts"]) == ("partly", tries)
    assert WORLD == {"a": "ok", "b": "ok"}
    assert journal.records()[0].state == "reverted"


async def test_a_bug_in_apply_stays_a_bug(tmp_path: Path) -> None:
    """Only the harness's own errors mean "not applied"; anything else is raised as is."""

    class Buggy(_TwoActs):
        async def _apply(self) -> None:
            await self.act(_break, "a")
            raise KeyError("a bug")

    events: list[Event] = []
    with pytest.raises(KeyError):
        await Buggy(node(), journal=FaultJournal(tmp_path), timeline=events.append).inject()
    assert EventKind.NOT_APPLIED not in _kinds(events)
    assert WORLD["a"] == "ok"


# --------------------------------------------------------------------------- the experiment


async def test_the_experiment_measures_it_and_judges_it_inconclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real run_fault("pause") against a loopback engine (Prometheus unreachable) whose
    container's freezer refuses: no traceback, a complete run directory, INCONCLUSIVE."""
    from faultkit.experiment import Experiment
    from faultkit.load.fakeserver import serve
    from faultkit.load.profile import LoadProfile
    from faultkit.rundir import RunDir

    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path / "home"))
    (tmp_path / "run").mkdir()
    runner, port = await serve()
    try:
        api = FakeDockerAPI("engine", port, pause_failures=1000,
                            pause_error=api_error(500, FREEZER))
        target = _engine_node(tmp_path, api, name="n", engine="vllm", model="ok",
                              slo={"recovery_hold_s": 0.5, "recovery_s_max": 5})
        exp = Experiment(
            scenario="pause", node=target,
            inventory=Inventory(nodes=[target], prometheus={"url": "http://127.0.0.1:1"}),
            run=RunDir(tmp_path / "run"),
            load_profile=LoadProfile(rate=10, output_tokens=4, input_tokens=8),
        )
        measurement = await exp.run_fault("pause", hold_s=1, baseline_s=1.0)
        assert exp.verdict is not None and exp.verdict.outcome == "INCONCLUSIVE"
        verdict = exp.check()
    finally:
        await runner.cleanup()
    (reason,) = [r for r in measurement.inconclusive if "could not be applied" in r]
    assert reason.startswith("the fault could not be applied: ") and FREEZER in reason
    assert verdict.outcome == "INCONCLUSIVE"
    assert reason in verdict.inconclusive
    assert verdict.summary().startswith("INCONCLUSIVE: missing evidence: ")
    assert reason in verdict.summary()
    gaps = [e for e in exp.events if e.kind == EventKind.EVIDENCE_GAP]
    assert reason in [e.data["reason"] for e in gaps]
    (gone,) = [e for e in exp.events if e.kind == EventKind.NOT_APPLIED]
    assert (gone.source, gone.data["applied"], gone.data["attempts"]) == ("fault", "none", 5)
    on_disk = json.loads((tmp_path / "run" / "verdict.json").read_text())
    assert on_disk["outcome"] == "INCONCLUSIVE" and reason in on_disk["inconclusive"]
    for name in ("measurement.json", "container.json", "timeline.jsonl"):
        assert (tmp_path / "run" / name).exists(), name
    assert FaultJournal(tmp_path / "home" / "journal").unreverted() == []
    assert not api.paused
    exp.finalize()
    assert "the fault could not be applied" in (tmp_path / "run" / "incident.md").read_text()


# --------------------------------------------------------------------------- the plugin

#: the nested session's conftest: the same fake engine, in that process (the session runs
#: in a subprocess, as a user runs it)
CONFTEST = """
from tenacity import wait_none

from faultkit.faults import undo
from tests.unit.faults_fake import FakeDockerAPI, api_error, fake_engine

undo.UNDO_WAIT = wait_none()
fake_engine({host!r}, FakeDockerAPI("engine", {port}, pause_failures=1000,
                                    pause_error=api_error(500, {error!r})))
"""

SCENARIO = """
import pytest


@pytest.mark.fault("pause")
async def test_pause(experiment):
    await experiment.run_fault("pause", hold_s=1, baseline_s=1.0)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
"""

INVENTORY = """
prometheus: {{url: "http://127.0.0.1:1"}}
nodes:
  - name: n
    engine: vllm
    base_url: "{base_url}"
    model: ok
    faults: [pause]
    docker: {{host: "{host}", container: engine}}
    slo: {{recovery_hold_s: 0.5, recovery_s_max: 5}}
"""


def test_through_the_plugin_it_reads_as_an_inconclusive_verdict_with_its_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from faultkit.load.fakeserver import serve_in_subprocess

    home = pytester.path / "home"
    monkeypatch.setenv("FAULTKIT_HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.delenv("FAULTKIT_LIVE", raising=False)
    pytester.makeini("[pytest]\nasyncio_mode = auto\n"
                     "asyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_scenario=SCENARIO)
    host = f"unix://{pytester.path}/docker.sock"
    with serve_in_subprocess() as base_url:
        port = int(base_url.rsplit(":", 1)[1])
        pytester.makeconftest(CONFTEST.format(host=host, port=port, error=FREEZER))
        inventory = pytester.path / "inventory.yaml"
        inventory.write_text(INVENTORY.format(base_url=base_url, host=host))
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "no:warnings", f"--inventory={inventory}",
            f"--runs-dir={pytester.path / 'runs'}", timeout=120)
    output = result.stdout.str()
    assert result.parseoutcomes() == {"inconclusive": 1}, output
    result.stdout.fnmatch_lines([
        "INCONCLUSIVE *test_pause[[]n[]] - INCONCLUSIVE: missing evidence: *"
        "the fault could not be applied: *unable to freeze*",
    ])
    assert "DockerError" not in output  # no traceback of Docker's refusal
    assert "FaultNotApplied" not in output
    (run,) = (pytester.path / "runs").iterdir()
    verdict = json.loads((run / "verdict.json").read_text())
    assert verdict["outcome"] == "INCONCLUSIVE"
    assert any(r.startswith("the fault could not be applied: ") for r in verdict["inconclusive"])
    assert "the fault could not be applied" in (run / "incident.md").read_text()
    assert FaultJournal(home / "journal").unreverted() == []
    assert [r.state for r in FaultJournal(home / "journal").records()] == ["reverted"]
