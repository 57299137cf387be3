"""A borderline candidate window is measured again and judged on both windows' requests:
which verdicts count as borderline, how two windows pool, and the rerun inside the gate's
steady phase (its load, rollout and scenario run are fakes: tests/unit/.../wiring)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faultkit.gate import run as gate
from faultkit.gate import steady as gate_steady
from faultkit.gate.order import ScenarioOrder
from faultkit.gate.steady import SteadyPhase, SteadyState
from faultkit.gate.steady_judge import borderline_checks, judge_steady_state
from faultkit.inventory import SLOSettings
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.model.gatefile import GateResult
from faultkit.model.records import RequestRecord
from reports.render import render_gate
from tests.unit.faultkit.gate.test_gate_steady_wiring import World

SLO = SLOSettings()  # TTFT p95 objective 2.5 s, error ratio 0.01


def window(ttfts: list[float], start: float, failed: int = 0) -> list[RequestRecord]:
    """One request a tenth of a second from ``start`` per TTFT (each answered 0.5 s after
    its first token), then ``failed`` failed ones."""
    records = [RequestRecord(id=f"{start}-{i}", node="n", kind="chat", t_invoke=start + i / 10,
                             status="ok", t_first_token=start + i / 10 + ttft,
                             t_end=start + i / 10 + ttft + 0.5, output_tokens=16)
               for i, ttft in enumerate(ttfts)]
    t = start + len(ttfts) / 10
    records += [RequestRecord(id=f"{start}-f{i}", node="n", kind="chat", t_invoke=t + i / 10,
                              status="fail", t_end=t + i / 10 + 0.1) for i in range(failed)]
    return records


def state(ttfts: list[float], start: float = 0.0, failed: int = 0) -> SteadyState:
    records = window(ttfts, start, failed)
    return SteadyState.of_window("cand", records, start, start + 30.0)


#: 300 requests, its p95 right at the 2.5 s objective: 280 fast, 20 at 2.4-2.6 s
AT_THE_OBJECTIVE = [0.2] * 280 + [2.4 + 0.01 * i for i in range(20)]
#: 300 requests well inside it
FAST = [0.2 + 0.001 * i for i in range(300)]


def test_a_p95_whose_interval_holds_the_objective_is_borderline() -> None:
    at = state(AT_THE_OBJECTIVE)
    verdict = judge_steady_state(at.slis, SLO, (), at.intervals)
    assert at.intervals["ttft_p95_s"][0] <= 2.5 <= at.intervals["ttft_p95_s"][1]
    assert borderline_checks(verdict, at.slis, SLO, at.intervals) == ("steady_ttft_p95",)
    fast = state(FAST)
    assert borderline_checks(judge_steady_state(fast.slis, SLO, (), fast.intervals), fast.slis,
                             SLO, fast.intervals) == ()


def test_an_error_ratio_is_borderline_only_with_a_failure_to_weigh() -> None:
    """0 of 300 failed: its Wilson interval reaches 0.0126 and holds the 0.01 objective, but
    a second window cannot make 0 failures look better; 3 of 300 (point 0.01 itself) can
    go either way."""
    clean = state(FAST)
    assert clean.intervals["error_ratio"][1] > 0.01
    verdict = judge_steady_state(clean.slis, SLO, (), clean.intervals)
    assert "borderline" in verdict.checks[0].why  # still said in gate.md
    assert borderline_checks(verdict, clean.slis, SLO, clean.intervals) == ()
    some = state(FAST[:297], failed=3)
    verdict = judge_steady_state(some.slis, SLO, (), some.intervals)
    assert borderline_checks(verdict, some.slis, SLO, some.intervals) == ("steady_error_ratio",)


def test_an_inconclusive_window_is_not_measured_again() -> None:
    """Missing evidence is not made up by a second window: it stays INCONCLUSIVE."""
    at = state(AT_THE_OBJECTIVE)
    verdict = judge_steady_state(at.slis, SLO, ("the load client fell behind",), at.intervals)
    assert verdict.outcome == "INCONCLUSIVE"
    assert borderline_checks(verdict, at.slis, SLO, at.intervals) == ()


def test_two_windows_pool_into_one_body_of_evidence() -> None:
    first, second = state(AT_THE_OBJECTIVE), state(FAST[:290], start=100.0, failed=3)
    both = first.pooled_with(second, "why")
    assert both.slis.requests == 593 and both.slis.failed == 3
    assert both.slis.start == 0.0 and both.slis.end == 130.0
    assert both.span_s == 60.0  # output tokens/s over the 60 s of load, not the 130 s apart
    assert both.slis.output_tokens_per_s == pytest.approx(590 * 16 / 60.0)
    assert both.slis.ttft_p95_s is not None and both.slis.ttft_p95_s < 2.4
    assert both.first_window is first and both.to_json()["rerun"]["why"] == "why"


class RerunWorld(World):
    """The gate's world, its steady windows from the TTFT lists in ``windows_by_side``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                 sides: dict[str, list[float]]) -> None:
        super().__init__(monkeypatch, tmp_path)
        self.sides = sides
        monkeypatch.setattr(gate_steady, "run_steady_state", self.steady_from_ttfts)

    async def steady_from_ttfts(self, *_args: object, side: str,
                                config: str | None = None) -> SteadyState:
        self.log.append(f"steady {side}")
        start = 100.0 * len(self.log)
        return SteadyState.of_window(config, window(self.sides[side], start), start,
                                     start + 30.0)


async def _gate(world: World) -> dict[str, Any]:
    node = world.inventory.node("n")
    steady = SteadyPhase(node, world.inventory, 30.0, BACKGROUND_PROFILE,
                         say=lambda _line: None, runs_dir=world.out / "steady")
    result = await gate.run_gate(world.inventory, [(node, steady)], "cand", world.out, False,
                                  (), world.out / "none", ScenarioOrder(), True)
    return result.to_json()


async def test_a_borderline_candidate_is_measured_again_and_passes_on_both_windows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = RerunWorld(monkeypatch, tmp_path, {"current": FAST, "candidate": AT_THE_OBJECTIVE,
                                               "candidate-rerun": FAST})
    data = await _gate(world)
    assert [e for e in world.log if e.startswith("steady")] == [
        "steady current", "steady candidate", "steady candidate-rerun"]
    assert "scenarios" in world.log and data["decision"] == "pass", data["why"]
    candidate = data["steady_state"]["candidate"]
    assert candidate["slis"]["requests"] == 600
    assert candidate["rerun"]["why"].startswith("steady_ttft_p95 borderline in the first window")
    assert candidate["rerun"]["first_window"]["slis"]["requests"] == 300
    md = render_gate(GateResult.from_json(data), world.out / "gate.md").read_text()
    assert "The candidate was measured twice" in md.replace("\\", "")


async def test_a_candidate_slow_in_both_windows_fails_on_their_pooled_evidence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    slow = [0.2] * 270 + [2.6] * 30  # p95 2.6 s: borderline alone, over the objective pooled
    world = RerunWorld(monkeypatch, tmp_path, {"current": FAST, "candidate": AT_THE_OBJECTIVE,
                                               "candidate-rerun": slow})
    data = await _gate(world)
    assert "steady candidate-rerun" in world.log and "scenarios" not in world.log
    assert data["decision"] == "fail" and "fails its SLOs before any fault" in data["why"]
    assert data["steady_state"]["candidate"]["slis"]["requests"] == 600


async def test_a_clear_candidate_is_measured_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = RerunWorld(monkeypatch, tmp_path, {"current": FAST, "candidate": FAST})
    data = await _gate(world)
    assert "steady candidate-rerun" not in world.log and data["decision"] == "pass"
    assert "rerun" not in data["steady_state"]["candidate"]
