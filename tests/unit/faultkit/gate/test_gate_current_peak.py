"""The current config's peak throughput, measured by the gate itself when no earlier
passing run holds it (``faultkit.gate.current_peak`` inside ``faultkit gate``'s run). The
rollout, the scenario runs and the load are fakes (this is the gate's logic, not the lab):
each scenario run leaves a run directory as the plugin does, with the flood's saturation
point the fake engine serves on the config it was given; the decision code is real."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from faultkit.gate import current_peak
from faultkit.gate import run as gate
from faultkit.gate.order import ScenarioOrder
from faultkit.gate.steady import SteadyPhase
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.model.runfiles import RunInfo
from faultkit.rundir import GateDir, RunDir
from reports import render_gate
from tests.unit.faultkit.gate.test_gate_steady_wiring import World

OVERLOAD = "test_overload[n]"


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


class Engine:
    """The scenario runs: ``test_overload[n]`` on whichever config the run names, served
    at ``peaks[config]`` req/s (``None``: that run is INCONCLUSIVE, no peak)."""

    def __init__(self, world: World, peaks: dict[str, float | None], *,
                 candidate_outcome: str = "PASS") -> None:
        self.world, self.peaks, self.candidate_outcome = world, peaks, candidate_outcome

    async def run_scenarios(self, argv: list[str], out: Path, _progress: object = None, *,
                            only: object = None, first: object = (),
                            stop_file: object = None) -> int:
        config = _option(argv, "--serving-config")
        self.world.log.append(f"scenarios {config}")
        peak = self.peaks[config]
        outcome = ("INCONCLUSIVE" if peak is None
                   else self.candidate_outcome if config == "cand" else "PASS")
        run = RunDir.create(Path(_option(argv, "--runs-dir")) / f"{config}-{time.time_ns()}",
                            "overload", "n")
        run.write_info(RunInfo().updated(scenario="overload", case="n", node="n",
                                         serving_config=config, t_start=time.time()))
        run.write_json(run.verdict_json, {"outcome": outcome, "passed": outcome == "PASS"})
        run.write_json(run.measurement_json, {"detection_s": None, "recovery_s": 3.0,
                                              "lost_total": 0})
        if peak is not None:
            (run.path / "timeline.jsonl").write_text(json.dumps(
                {"t": time.time(), "source": "harness", "kind": "saturation", "node": "n",
                 "data": {"offered_rps": 100.0, "served_rps": peak}}) + "\n")
        failure = ("" if outcome == "PASS" else
                   f'<failure message="{outcome}: lost_requests: 9 lost"/>')
        GateDir(out).junit_xml.write_text(
            f'<testsuite><testcase name="{OVERLOAD}"><properties><property '
            f'name="faultkit_run_dir" value="{run.path}"/><property name="faultkit_verdict" '
            f'value="{outcome}"/></properties>{failure}</testcase></testsuite>')
        return 0 if outcome == "PASS" else 1


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> World:
    return World(monkeypatch, tmp_path)


def serve(monkeypatch: pytest.MonkeyPatch, world: World, engine: Engine) -> None:
    monkeypatch.setattr(gate, "run_scenarios", engine.run_scenarios)
    monkeypatch.setattr(current_peak, "run_scenarios", engine.run_scenarios)


async def gate_once(world: World, out: Path, *, promote: bool = False) -> dict[str, Any]:
    """One gate of ``cand`` on node ``n`` into ``out``; earlier runs searched under the
    gates' parent directory, as the command's default does."""
    await asyncio.to_thread(out.mkdir, parents=True)
    node = world.inventory.node("n")
    steady = SteadyPhase(node, world.inventory, 30.0, BACKGROUND_PROFILE,
                         say=lambda _line: None, runs_dir=out / "steady")
    result = await gate.run_gate(world.inventory, [(node, steady)], "cand", out, promote, (),
                                 out.parent, ScenarioOrder(), True)
    render_gate(result, out / "gate.md")
    return result.to_json()


async def test_a_first_gate_measures_the_current_peak_once_restored_and_fails_less_throughput(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, world, Engine(world, {"good": 30.0, "cand": 19.0}))
    data = await gate_once(world, world.out / "g1")
    # measured on the current config after it was put back, never beside the candidate
    assert world.log == ["steady good", "rollout", "steady cand", "scenarios cand",
                         "rollback", "scenarios good"]
    assert data["decision"] == "fail" and data["rolled_back"]
    assert data["not_passed"] == [
        "regression — test_overload[n]: peak throughput (served under the overload's flood) "
        "30 req/s on the current config, 19 req/s on the candidate (below both 1/1.5 and "
        "−2 req/s)"]
    assert data["baseline"]["measured_now"] == [OVERLOAD]
    run_dir = data["baseline"]["runs"][OVERLOAD]["run_dir"]
    assert run_dir.startswith(str(world.out / "g1" / current_peak.CURRENT_DIR / "n"))
    md = (world.out / "g1" / "gate.md").read_text()
    assert "**30 req/s → 19 req/s — regression**" in md
    assert "made by this gate, on the current config itself (once it was restored)" in md


async def test_the_next_gate_holds_the_candidate_against_that_run_and_measures_nothing(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, world, Engine(world, {"good": 30.0, "cand": 25.0}))
    first = await gate_once(world, world.out / "g1")
    assert first["decision"] == "pass"  # 25 is within the band of 30
    world.log.clear()
    second = await gate_once(world, world.out / "g2")
    assert world.log == ["steady good", "rollout", "steady cand", "scenarios cand",
                         "rollback"]
    assert second["baseline"]["measured_now"] == []
    assert second["baseline"]["runs"][OVERLOAD]["run_dir"] == \
        first["baseline"]["runs"][OVERLOAD]["run_dir"]


@pytest.mark.parametrize("outcome", ["FAIL", "INCONCLUSIVE"])
async def test_a_candidate_whose_flood_did_not_pass_costs_no_measurement_of_the_current(
    world: World, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    serve(monkeypatch, world, Engine(world, {"good": 30.0, "cand": 12.0},
                                     candidate_outcome=outcome))
    data = await gate_once(world, world.out / "g1")
    assert "scenarios good" not in world.log
    assert data["decision"] == "fail" and data["baseline"]["measured_now"] == []


async def test_a_current_config_that_gives_no_peak_is_said_and_nothing_is_compared(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, world, Engine(world, {"good": None, "cand": 19.0}))
    data = await gate_once(world, world.out / "g1")
    assert world.log[-1] == "scenarios good"
    assert data["decision"] == "pass" and data["baseline"]["measured_now"] == []
    assert list(data["baseline"]["not_measured"]) == [OVERLOAD]
    assert data["baseline"]["not_measured"][OVERLOAD].startswith("INCONCLUSIVE: ")
    md = (world.out / "g1" / "gate.md").read_text()
    assert "The current config's peak throughput could not be measured" in md
    assert "the candidate's is not compared" in md


async def test_under_promote_the_current_peak_is_measured_before_the_rollout(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def collect(_argv: object) -> list[str]:
        return [f"scenarios/test_overload.py::{OVERLOAD}", "scenarios/test_kill.py::test_kill[n]"]

    monkeypatch.setattr(gate, "collect_gate_scenarios", collect)
    serve(monkeypatch, world, Engine(world, {"good": 30.0, "cand": 19.0}))
    data = await gate_once(world, world.out / "g1", promote=True)
    assert world.log == ["steady good", "scenarios good", "rollout", "steady cand",
                         "scenarios cand", "rollback"]
    assert data["decision"] == "fail" and not data["promoted"]
    assert data["baseline"]["measured_now"] == [OVERLOAD]


def test_the_dry_run_says_what_the_candidates_peak_will_be_held_against(
    world: World, tmp_path: Path
) -> None:
    node = world.inventory.node("n")
    now = time.time()
    line = current_peak.plan_line(node, tmp_path / "gates", promote=False, now=now)
    assert "no passing test_overload[n] of good under" in line
    assert "after the scenarios, once it is restored" in line
    assert "before the rollout" in current_peak.plan_line(node, tmp_path / "gates",
                                                          promote=True, now=now)
    run = RunDir.create(tmp_path / "gates" / "earlier", "overload", "n")
    run.write_info(RunInfo().updated(scenario="overload", case="n", node="n",
                                     serving_config="good", t_start=now - 60))
    run.write_json(run.verdict_json, {"outcome": "PASS", "passed": True})
    line = current_peak.plan_line(node, tmp_path / "gates", promote=False, now=now)
    assert line == (f"peak throughput: the candidate's test_overload[n] is held against "
                    f"good's run {run.path}")
