"""faultkit lanes --run (faultkit.commands.lanes_run): which processes run, in which order,
with which selection, and how their statuses combine."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from faultkit.commands.lanes_run import (
    AGAIN,
    PassResult,
    exit_status,
    merged_outcomes,
    outcome_lines,
    rerun_lines,
    run_plan,
)
from faultkit.gate.feed import ONLY_ENV
from faultkit.lanes import FollowPass, Lane, LanePlan


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``name``'s last occurrence (``-m`` comes first as ``python -m pytest``)."""
    at = [i for i, arg in enumerate(argv) if arg == name]
    return argv[at[-1] + 1] if at else None


class FakePytest:
    """Stands in for ``subprocess.run``: records each pass's argv in order of start, writes
    a pytest-like last line to its log, exits with the status given per node selection."""

    def __init__(self, codes: dict[str | None, int]) -> None:
        self.codes = codes
        self.started: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        with self.lock:
            self.started.append(argv)
        nodes = _option(argv, "--node")
        stdout.write("collected\n.....\n===== 5 passed, 1 skipped in 1.23s =====\n")
        return subprocess.CompletedProcess(argv, self.codes.get(nodes, 0))


def _plan() -> LanePlan:
    whole = Lane(("h2",), 1.0, host_wide=("h2",))
    return LanePlan(lanes=(Lane(("a",), 1.0), whole), alone=("big",),
                    followers=(FollowPass(("gw",), (0,)),))


def test_every_pass_runs_once_with_its_selection_and_the_exclusive_pass_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakePytest({})
    monkeypatch.setattr(subprocess, "run", fake)
    lines: list[str] = []
    results = run_plan(_plan(), Path("inv.yaml"), tmp_path, lines.append, stagger_s=0)
    assert [r.label for r in results] == ["lane-1", "lane-2", "after-1", "alone", "exclusive"]
    by_label = {r.label: r for r in results}
    assert by_label["after-1"].nodes == "gw" and by_label["alone"].nodes == "big"
    argv_of = {(_option(a, "--node"), _option(a, "-m")): a for a in fake.started}
    assert set(argv_of) == {("a", "not exclusive"), ("h2", "not exclusive or host_wide"),
                            ("gw", "not exclusive"), ("big", "not exclusive"),
                            (None, "exclusive")}
    # the alone pass and then the exclusive pass start after every lane and follower
    assert [_option(a, "--node") for a in fake.started[-2:]] == ["big", None]
    exclusive = argv_of[(None, "exclusive")]
    assert _option(exclusive, "-k") == "not (host_wide and ([h2]))"
    assert all(_option(a, "--inventory") == "inv.yaml" for a in fake.started)
    assert f"--junitxml={tmp_path / 'lane-2.xml'}" in argv_of[("h2", "not exclusive or host_wide")]
    assert by_label["lane-1"].summary == "5 passed, 1 skipped in 1.23s"
    assert (tmp_path / "exclusive.log").exists()
    assert sum("started" in line for line in lines) == 5
    assert any("lane-1 (a): ok after" in line and "5 passed" in line for line in lines)


def test_the_worst_status_wins_and_nothing_collected_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakePytest({"gw": 1, None: 5})
    monkeypatch.setattr(subprocess, "run", fake)
    lines: list[str] = []
    results = run_plan(_plan(), Path("inv.yaml"), tmp_path, lines.append, stagger_s=0)
    assert exit_status(results) == 1
    assert any("after-1 (gw): exit 1 after" in line for line in lines)
    ok = [PassResult("x", "", 5, 1.0, "", tmp_path), PassResult("y", "", 0, 1.0, "", tmp_path)]
    assert exit_status(ok) == 0
    assert exit_status([*ok, PassResult("z", "", 2, 1.0, "", tmp_path)]) == 2


def test_a_heartbeat_names_the_passes_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def slow(argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        if _option(argv, "--node") == "a":
            release.wait(5)
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", slow)
    lines: list[str] = []
    plan = LanePlan(lanes=(Lane(("a",), 1.0),), alone=())
    runner = threading.Thread(target=run_plan, args=(plan, Path("inv.yaml"), tmp_path,
                                                     lines.append),
                              kwargs={"stagger_s": 0, "heartbeat_s": 0.05})
    runner.start()
    deadline = time.monotonic() + 5
    while not any("running: lane-1 (a)" in line for line in lines):
        assert time.monotonic() < deadline, lines
        time.sleep(0.01)
    release.set()
    runner.join(5)
    assert not runner.is_alive()
    said = len(lines)
    time.sleep(0.2)  # four heartbeat periods: the heartbeat ended with the run
    assert len(lines) == said, lines[said:]


def _junit(cases: str) -> str:
    return (f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{cases}</testsuite>'
            "</testsuites>")


def test_the_passes_junit_files_merge_and_the_scenarios_that_did_not_pass_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pass writes its own JUnit file, as pytest does; the run merges them into
    junit.xml and names each FAIL and INCONCLUSIVE with why and where its run is."""
    cases = {
        "a": '<testcase name="test_kill[a]"/><testcase name="test_oom[a]"><skipped '
             'message="no oom fault allowed"/></testcase><testcase name="test_gateway_'
             'termination[a]"><skipped message="got empty parameter set for (node)"/>'
             '</testcase>',
        "gw": '<testcase name="test_upstream_failure[gateway-kill]"><properties><property '
              'name="faultkit_verdict" value="FAIL"/><property name="faultkit_run_dir" '
              'value="runs/x-upstream_failure-gw"/></properties><failure message="AssertionError: '
              'FAIL: lost_requests: 4 lost &gt; 3 allowed"/></testcase>',
        None: '<testcase name="test_host_restart[h1]"><failure message="INCONCLUSIVE: '
              'missing evidence: clock skew"/></testcase>',
    }

    def writes_junit(argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        nodes = _option(argv, "--node")
        junit = next(a.split("=", 1)[1] for a in argv if a.startswith("--junitxml="))
        if nodes in cases:  # "h2" and "big" write none: a pass interrupted before it
            Path(junit).write_text(_junit(cases[nodes]))
        return subprocess.CompletedProcess(argv, 1 if nodes in ("gw", None) else 0)

    monkeypatch.setattr(subprocess, "run", writes_junit)
    results = run_plan(_plan(), Path("inv.yaml"), tmp_path, list[str]().append, stagger_s=0)
    merged, outcomes = merged_outcomes(results, tmp_path)
    assert merged == tmp_path / "junit.xml" and merged.exists()
    assert sorted(o.name for o in outcomes) == [
        "test_gateway_termination[a]", "test_host_restart[h1]", "test_kill[a]", "test_oom[a]",
        "test_upstream_failure[gateway-kill]"]
    lines = outcome_lines(outcomes)
    # a combination that does not apply (pytest's empty parameter set) is not a skip
    assert lines[0] == "3 scenario runs (scenario × node): 1 pass, 1 fail, 1 inconclusive, " \
        "1 skipped", lines
    # no verdict.json in that run directory here: the reason is the JUnit message's
    assert sorted(lines[1:]) == [
        "  FAIL test_upstream_failure[gateway-kill] — AssertionError: FAIL: lost_requests: "
        "4 lost > 3 allowed (runs/x-upstream_failure-gw)",
        "  INCONCLUSIVE test_host_restart[h1] — clock skew",
        "  SKIPPED test_oom[a] — no oom fault allowed",
    ], lines
    assert outcome_lines([]) == ["no scenario ran"]


def _stalled_case(name: str, run_dir: Path, *, stalled: bool) -> str:
    """A JUnit case as the plugin writes it, its run directory's measurement.json saying
    whether the load client stalled (requests sent late across an outage edge)."""
    run_dir.mkdir(parents=True)
    (run_dir / "measurement.json").write_text(json.dumps({"sent_late": 2 if stalled else 0}))
    props = (f'<properties><property name="faultkit_run_dir" value="{run_dir}"/><property '
             f'name="faultkit_verdict" value="{"INCONCLUSIVE" if stalled else "PASS"}"/>'
             "</properties>")
    failure = ('<failure message="INCONCLUSIVE: missing evidence: the load client\'s event '
               'loop stalled"/>' if stalled else "")
    return f'<testcase name="{name}">{props}{failure}</testcase>'


class StallsOnce:
    """Each lane's pytest: lane "a" has ``test_pause[a]`` stall its load client, and, when
    ``fails`` names it, ``test_kill[a]`` FAIL; the ``again`` pass (the scenarios in
    ``$FAULTKIT_GATE_ONLY``) passes them unless ``stalls_again``."""

    def __init__(self, runs: Path, *, fails: bool = False, stalls_again: bool = False) -> None:
        self.runs, self.fails, self.stalls_again = runs, fails, stalls_again
        self.again: list[tuple[list[str], dict[str, str]]] = []

    def __call__(self, argv: list[str], stdout: Any, env: dict[str, str] | None = None,
                 **_: Any) -> subprocess.CompletedProcess[str]:
        junit = Path(next(a.split("=", 1)[1] for a in argv if a.startswith("--junitxml=")))
        nodes = _option(argv, "--node")
        if env is not None and ONLY_ENV in env:
            self.again.append((argv, env))
            cases = "".join(_stalled_case(name, self.runs / f"again-{name}",
                                          stalled=self.stalls_again)
                            for name in json.loads(env[ONLY_ENV]))
            junit.write_text(_junit(cases))
            return subprocess.CompletedProcess(argv, 1 if self.stalls_again else 0)
        if nodes == "a":
            kill = ('<testcase name="test_kill[a]"><failure message="FAIL: lost_requests"/>'
                    "</testcase>" if self.fails else '<testcase name="test_kill[a]"/>')
            junit.write_text(_junit(
                _stalled_case("test_pause[a]", self.runs / "pause-a", stalled=True) + kill))
            return subprocess.CompletedProcess(argv, 1)
        junit.write_text(_junit(f'<testcase name="test_kill[{nodes}]"/>'))
        return subprocess.CompletedProcess(argv, 0)


def test_a_scenario_the_load_client_stalled_in_runs_once_more_alone_and_its_pass_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine froze the harness (not the node): that scenario runs again once, alone
    after every other pass, selected by name; its later PASS stands in junit.xml and in the
    exit status, and the first outcome is still named."""
    fake = StallsOnce(tmp_path / "runs")
    monkeypatch.setattr(subprocess, "run", fake)
    lines: list[str] = []
    logs = tmp_path / "logs"
    results = run_plan(_plan(), Path("inv.yaml"), logs, lines.append, stagger_s=0)
    assert [r.label for r in results][-1] == AGAIN
    [(argv, env)] = fake.again
    assert json.loads(env[ONLY_ENV]) == ["test_pause[a]"]
    assert "faultkit.gate.feed" in argv and _option(argv, "--node") is None
    assert any("run again, once, alone: test_pause[a]" in line for line in lines)
    assert exit_status(results) == 0
    merged, outcomes = merged_outcomes(results, logs)
    cases = [c.get("name", "") for c in ET.parse(merged).getroot().iter("testcase")]
    assert sorted(cases) == sorted(["test_pause[a]", "test_kill[a]", "test_kill[h2]",
                                    "test_kill[gw]", "test_kill[big]", "test_kill[None]"])
    pause = [o for o in outcomes if o.name == "test_pause[a]"]
    assert [(o.outcome, o.run_dir) for o in pause] == [
        ("PASS", str(tmp_path / "runs" / "again-test_pause[a]"))]
    assert outcome_lines(outcomes)[0].endswith(": 6 pass")
    assert rerun_lines(results) == [
        "  ran again, alone: test_pause[a] — first INCONCLUSIVE because the load client "
        f"stalled ({tmp_path / 'runs' / 'pause-a'}); now PASS "
        f"({tmp_path / 'runs' / 'again-test_pause[a]'})"]


@pytest.mark.parametrize(("fails", "stalls_again"), [(True, False), (False, True)])
def test_a_rerun_answers_only_for_its_stall_never_for_another_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: bool, stalls_again: bool
) -> None:
    """A FAIL beside the stall in the same pass, or a second stall, still ends the run 1:
    a FAIL is never run again, and a stalled rerun is INCONCLUSIVE as it stands."""
    fake = StallsOnce(tmp_path / "runs", fails=fails, stalls_again=stalls_again)
    monkeypatch.setattr(subprocess, "run", fake)
    results = run_plan(_plan(), Path("inv.yaml"), tmp_path / "logs", list[str]().append,
                       stagger_s=0)
    assert len(fake.again) == 1  # once, whatever it finds
    assert exit_status(results) == 1
    _, outcomes = merged_outcomes(results, tmp_path / "logs")
    not_passed = sorted((o.name, o.outcome) for o in outcomes if not o.passed)
    assert not_passed == ([("test_kill[a]", "FAIL")] if fails
                          else [("test_pause[a]", "INCONCLUSIVE")])


def test_nothing_runs_again_when_no_load_client_stalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakePytest({"a": 1})
    monkeypatch.setattr(subprocess, "run", fake)
    results = run_plan(_plan(), Path("inv.yaml"), tmp_path, list[str]().append, stagger_s=0)
    assert AGAIN not in [r.label for r in results] and len(fake.started) == 5
    assert exit_status(results) == 1 and rerun_lines(results) == []
