"""The steady-state phase inside ``faultkit gate``'s run (``gate._run_gate``): its order, where
the gate stops, and what gate.json keeps. The rollout, the scenario run, the sweep and the
load are fakes (this is the gate's logic, not the lab); the decision code is real."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faultkit.gate import run as gate
from faultkit.gate import steady as gate_steady
from faultkit.gate.order import ScenarioOrder
from faultkit.gate.steady import SteadyPhase, SteadyState
from faultkit.inventory import Inventory, load_inventory
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.model.windows import WindowSLIs
from faultkit.probes.health import ProbeResult
from faultkit.rundir import GateDir
from tests.unit.inventory_text import one_node_inventory

INVENTORY = one_node_inventory(cand="img2")

JUNIT_ONE_PASS = '<testsuite><testcase name="test_kill[n]"/></testsuite>'


def slis(**kw: Any) -> WindowSLIs:
    values: dict[str, Any] = {
        "start": 0.0, "end": 30.0, "requests": 300, "ok": 300, "failed": 0, "error_ratio": 0.0,
        "ttft_p95_s": 0.2, "e2e_p95_s": 0.8, "output_tokens_per_s": 240.0,
    }
    values.update(kw)
    return WindowSLIs(**values)


class FakeRollout:
    """What ``_run_gate`` uses of the rollout fault; records what was done to it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.result: dict[str, Any] = {"config": "cand", "ready": True}
        self.candidate_log = ""

    def describe(self) -> str:
        return "fake rollout"

    async def inject(self) -> None:
        self.log.append("rollout")

    async def revert(self) -> None:
        self.log.append("rollback")


class World:
    """The fakes around one gate run and the order things happened in."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.log: list[str] = []
        self.windows = {"good": slis(), "cand": slis()}
        self.ready = True
        path = tmp_path / "inv.yaml"
        path.write_text(INVENTORY)
        self.inventory: Inventory = load_inventory(path)
        self.out = tmp_path / "gate"
        self.out.mkdir()
        monkeypatch.setattr(gate, "make_fault", lambda *a, **kw: FakeRollout(self.log))
        monkeypatch.setattr(gate, "sweep", lambda **kw: [])
        monkeypatch.setattr(gate, "run_scenarios", self.run_scenarios)
        monkeypatch.setattr(gate_steady, "probe", self.probe)
        monkeypatch.setattr(gate_steady, "run_steady_state", self.run_steady_state)
        #: the current config's context limit the engine states (None: it does not say)
        self.context: int | None = None
        monkeypatch.setattr(gate_steady, "context_limit_now", self.context_limit_now)

    async def context_limit_now(self, _node: object) -> tuple[int | None, str]:
        return self.context, "the fake engine" if self.context else "not read: refused"

    async def probe(self, *_a: object, **_kw: object) -> ProbeResult:
        return ProbeResult(0.0, self.ready, 200 if self.ready else None,
                           "ok" if self.ready else "refused", 0.001)

    async def run_steady_state(self, *_args: object, side: str,
                               config: str | None = None) -> SteadyState:
        assert side in ("current", "candidate")
        assert config is not None
        self.log.append(f"steady {config}")
        return SteadyState(config, self.windows[config])

    async def run_scenarios(self, _argv: object, out: Path, _progress: object = None, *,
                            only: object = None, first: object = (),
                            stop_file: object = None) -> int:
        self.log.append("scenarios")
        GateDir(out).junit_xml.write_text(JUNIT_ONE_PASS)
        return 0

    async def run(self, seconds: float = 30.0) -> dict[str, Any]:
        node = self.inventory.node("n")
        steady = SteadyPhase(node, self.inventory, seconds, BACKGROUND_PROFILE,
                             say=lambda _line: None, runs_dir=self.out / "steady")
        result = await gate.run_gate(self.inventory, [(node, steady)], "cand", self.out, False,
                                      (), self.out / "no-earlier-runs", ScenarioOrder(), True)
        return result.to_json()  # what gate.json holds


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> World:
    return World(monkeypatch, tmp_path)


async def test_a_healthy_candidate_passes_after_each_phase_in_order(world: World) -> None:
    data = await world.run()
    assert world.log == ["steady good", "rollout", "steady cand", "scenarios", "rollback"]
    assert (data["decision"], data["why"]) == ("pass", "all 1 gate scenarios passed on cand")
    steady = data["steady_state"]
    assert steady["current"]["measured"] and steady["candidate"]["measured"]
    assert steady["regressions"] == []


async def test_a_candidate_breaching_its_slos_stops_the_gate_before_any_scenario(
    world: World,
) -> None:
    world.windows["cand"] = slis(failed=30, ok=270, error_ratio=0.1)
    data = await world.run()
    assert world.log == ["steady good", "rollout", "steady cand", "rollback"]
    assert data["decision"] == "fail"
    assert data["why"] == ("cand fails its SLOs before any fault: steady_error_ratio: error "
                           "ratio 0.1 > objective 0.01 (30 of 300 failed)")
    assert data["scenarios"] == [] and data["rolled_back"] is True
    assert data["steady_state"]["candidate"]["verdict"]["outcome"] == "FAIL"


async def test_an_unjudgeable_candidate_stops_the_gate_too(world: World) -> None:
    world.windows["cand"] = WindowSLIs(start=0.0, end=30.0)
    data = await world.run()
    assert "scenarios" not in world.log
    assert data["decision"] == "fail"
    assert "INCONCLUSIVE — missing evidence: no request arrived" in data["why"]


async def test_a_regression_fails_the_gate_before_any_scenario(world: World) -> None:
    """A regression is the steady-state phase failing: the gate stops there."""
    world.windows["cand"] = slis(ttft_p95_s=0.6)
    data = await world.run()
    assert world.log == ["steady good", "rollout", "steady cand", "rollback"]
    assert data["decision"] == "fail" and data["scenarios"] == []
    assert data["why"] == ("regression vs current (good): TTFT p95 0.600 s vs 0.200 s (above "
                           "1.5× and +0.1 s)")
    assert data["steady_state"]["regressions"] == [
        "TTFT p95 0.600 s vs 0.200 s (above 1.5× and +0.1 s)"]


async def test_a_node_not_ready_now_is_no_failure_of_the_candidate(world: World) -> None:
    world.ready = False
    world.windows["cand"] = slis(ttft_p95_s=0.6)  # would regress, had there been a baseline
    data = await world.run()
    assert world.log == ["rollout", "steady cand", "scenarios", "rollback"]
    assert data["decision"] == "pass"
    assert data["steady_state"]["current"] == {
        "measured": False,
        "why": "not measured: n was not ready before the rollout (refused); no baseline to "
               "compare with",
    }


async def test_steady_s_0_runs_the_gate_as_before(world: World) -> None:
    world.windows["cand"] = slis(ttft_p95_s=9.0)  # would breach, had it been measured
    data = await world.run(seconds=0)
    assert world.log == ["rollout", "scenarios", "rollback"]
    assert data["decision"] == "pass"
    assert data["steady_state"]["checked"] is False


#: a start-up traceback as the simnode and vLLM print it, the engine's arguments (with the
#: candidate's secret token) logged before it
CANDIDATE_LOG = """\
INFO args: Namespace(model='m', hf_token='hf_plantedTokenValue1234')
ERROR EngineCore failed to start.
Traceback (most recent call last):
  File "engine.py", line 9, in start
ValueError: max_model_len 16384 is greater than the model's 8192
"""


async def test_a_candidate_that_never_starts_is_failed_with_its_own_last_log_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """The rollout rolled back: no steady state of the candidate, no scenario; the why
    quotes the engine's exception line, and candidate.log keeps the tail with the
    candidate's secret redacted (it is in the log, it must be in no file)."""
    world = World(monkeypatch, tmp_path)
    (tmp_path / "inv.yaml").write_text(
        INVENTORY + "  secret: {image: img3, env: {HF_TOKEN: hf_plantedTokenValue1234}}\n")
    world.inventory = load_inventory(tmp_path / "inv.yaml")

    class NeverReady(FakeRollout):
        async def inject(self) -> None:
            self.log.append("rollout")
            self.result = {"config": "cand", "ready": False, "rolled_back": True,
                           "failed_reason": "restart loop: 2 restarts (exit 1)"}
            self.candidate_log = CANDIDATE_LOG

    monkeypatch.setattr(gate, "make_fault", lambda *a, **kw: NeverReady(world.log))
    data = await world.run()
    assert world.log == ["steady good", "rollout", "rollback"]  # revert: a no-op after a rollback
    assert data["decision"] == "fail" and data["rolled_back"] is True and data["scenarios"] == []
    assert data["why"] == (
        "cand did not become ready (restart loop: 2 restarts (exit 1); its last log line: "
        "\"ValueError: max_model_len 16384 is greater than the model's 8192\"); "
        "it was rolled back automatically")
    kept = GateDir(world.out).candidate_log.read_text()
    assert "EngineCore failed to start." in kept and "hf_plantedTokenValue1234" not in kept


async def test_a_candidate_with_no_log_is_failed_without_a_log_line(
    monkeypatch: pytest.MonkeyPatch, world: World,
) -> None:
    class NeverReady(FakeRollout):
        async def inject(self) -> None:
            self.result = {"rolled_back": True, "failed_reason": "not ready within 30 s"}

    monkeypatch.setattr(gate, "make_fault", lambda *a, **kw: NeverReady(world.log))
    data = await world.run()
    assert data["why"] == ("cand did not become ready (not ready within 30 s); "
                           "it was rolled back automatically")
    assert not GateDir(world.out).candidate_log.exists()
