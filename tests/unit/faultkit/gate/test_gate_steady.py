"""The gate's steady-state phase (faultkit.gate.steady): the judge on the node's
SLOs (missing evidence is never a pass), the comparison with the current config and its
tolerance, the phase's decisions, gate.md's table, and the runner on a loopback fake
server (no Docker, no lab)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from faultkit.cli import cli
from faultkit.gate import steady as gate_steady
from faultkit.gate.load import gate_load_profile
from faultkit.gate.steady import SteadyPhase, SteadyState, run_steady_state
from faultkit.gate.steady_judge import (
    MIN_STEADY_REQUESTS,
    compare_steady_states,
    judge_steady_state,
)
from faultkit.inventory import Inventory, Node, SLOSettings
from faultkit.load.fakeserver import serve
from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile
from faultkit.model.windows import WindowSLIs
from faultkit.rundir import GateResult
from reports import render_gate
from tests.unit.cli_helpers import one_error_line
from tests.unit.inventory_text import one_node_inventory

SLO = SLOSettings()  # ttft_s 2.5, error_ratio_max 0.01
INVENTORY = one_node_inventory()


def slis(**kw: Any) -> WindowSLIs:
    """A healthy 30 s window of 300 requests, with ``kw`` overriding any field."""
    values: dict[str, Any] = {
        "start": 1000.0, "end": 1030.0, "requests": 300, "ok": 300, "failed": 0,
        "error_ratio": 0.0, "ttft_p95_s": 0.2, "e2e_p95_s": 0.8, "output_tokens_per_s": 240.0,
    }
    values.update(kw)
    return WindowSLIs(**values)


def node(base_url: str = "http://127.0.0.1:9", model: str = "m") -> Node:
    return Node(name="n", engine="llamacpp", base_url=base_url, model=model,
                serving_config="good", faults=["*"])


def alone(n: Node) -> Inventory:
    """An inventory of ``n`` alone, its Prometheus a port where nothing answers."""
    return Inventory(nodes=[n], serving_configs={"good": {"image": "img"}},
                     prometheus={"url": "http://127.0.0.1:9"})


# --------------------------------------------------------------------------- the judge


def test_a_healthy_window_passes_both_objectives() -> None:
    verdict = judge_steady_state(slis(), SLO)
    assert verdict.outcome == "PASS"
    assert verdict.passed
    assert [c.name for c in verdict.checks] == ["steady_error_ratio", "steady_ttft_p95"]


def test_figures_at_the_objective_pass() -> None:
    assert judge_steady_state(slis(ttft_p95_s=2.5, error_ratio=0.01, failed=3, ok=297),
                              SLO).passed


def test_ttft_p95_over_the_objective_is_a_breach_with_its_figures() -> None:
    verdict = judge_steady_state(slis(ttft_p95_s=3.1), SLO)
    assert verdict.outcome == "FAIL"
    (breach,) = verdict.failures
    assert breach.name == "steady_ttft_p95"
    assert breach.expected == "≤ 2.5 s"
    assert breach.observed == "3.100 s over 300 successful requests"
    assert breach.why == "TTFT p95 3.100 s > objective 2.5 s"


def test_error_ratio_over_the_objective_is_a_breach() -> None:
    verdict = judge_steady_state(slis(failed=6, ok=294, error_ratio=0.02), SLO)
    assert verdict.outcome == "FAIL"
    (breach,) = verdict.failures
    assert breach.name == "steady_error_ratio"
    assert breach.expected == "≤ 0.01"
    assert breach.why == "error ratio 0.02 > objective 0.01 (6 of 300 failed)"


def test_both_breaches_are_listed_and_the_nodes_own_objectives_apply() -> None:
    strict = SLOSettings(ttft_s=0.1, error_ratio_max=0.0)
    verdict = judge_steady_state(slis(failed=1, ok=299, error_ratio=1 / 300), strict)
    assert [c.name for c in verdict.failures] == ["steady_error_ratio", "steady_ttft_p95"]
    assert judge_steady_state(slis(failed=1, ok=299, error_ratio=1 / 300), SLO).passed


def test_zero_requests_is_inconclusive_not_a_pass() -> None:
    empty = WindowSLIs(start=1000.0, end=1030.0)
    verdict = judge_steady_state(empty, SLO)
    assert verdict.outcome == "INCONCLUSIVE"
    assert not verdict.passed
    assert verdict.missing_evidence[0] == "no request arrived in the 30 s window: nothing to judge"


def test_a_missing_percentile_is_inconclusive() -> None:
    # answers came back (e.g. not streamed) but none carried a first token
    verdict = judge_steady_state(slis(ttft_p95_s=None), SLO)
    assert verdict.outcome == "INCONCLUSIVE"
    assert not verdict.passed
    assert verdict.unjudged[0].name == "steady_ttft_p95"
    assert "no successful request produced a first token" in verdict.summary()


def test_too_few_requests_is_inconclusive() -> None:
    n = MIN_STEADY_REQUESTS - 1
    verdict = judge_steady_state(slis(requests=n, ok=n), SLO)
    assert verdict.outcome == "INCONCLUSIVE"
    assert f"only {n} requests arrived" in verdict.missing_evidence[0]


def test_too_few_successes_leave_the_p95_unjudged() -> None:
    verdict = judge_steady_state(slis(ok=10, failed=290, error_ratio=290 / 300), SLO)
    assert verdict.outcome == "FAIL"  # the error ratio is evidence enough
    assert verdict.unjudged[0].name == "steady_ttft_p95"
    assert not judge_steady_state(slis(ok=10, failed=0, requests=300), SLO).passed


def test_every_request_failing_is_a_breach_not_missing_evidence() -> None:
    verdict = judge_steady_state(
        slis(ok=0, failed=300, error_ratio=1.0, ttft_p95_s=None, e2e_p95_s=None), SLO
    )
    assert verdict.outcome == "FAIL"
    assert [c.name for c in verdict.failures] == ["steady_error_ratio"]


def test_a_client_side_gap_makes_even_good_figures_inconclusive() -> None:
    gap = "the load client ran out of resources (3 requests client_exhausted)"
    verdict = judge_steady_state(slis(), SLO, [gap])
    assert verdict.outcome == "INCONCLUSIVE"
    assert verdict.missing_evidence == (gap,)


# --------------------------------------------------------------------------- the comparison


def regressed(current: WindowSLIs | None, candidate: WindowSLIs) -> dict[str, bool]:
    return {row.key: row.regression for row in compare_steady_states(current, candidate)}


def test_identical_windows_do_not_regress() -> None:
    rows = compare_steady_states(slis(), slis())
    assert [r.label for r in rows] == ["TTFT p95", "error ratio", "E2E p95", "output tokens/s"]
    assert not any(r.regression for r in rows)


def test_latency_regresses_only_above_both_the_ratio_and_the_slack() -> None:
    cur = slis(ttft_p95_s=0.2, e2e_p95_s=0.8)
    assert regressed(cur, slis(ttft_p95_s=0.42))["ttft_p95_s"]  # 2.1x and +0.22 s
    assert not regressed(cur, slis(ttft_p95_s=0.29))["ttft_p95_s"]  # +0.09 s: noise
    assert not regressed(slis(ttft_p95_s=0.02), slis(ttft_p95_s=0.1))["ttft_p95_s"]  # 5x, +0.08 s
    assert not regressed(slis(ttft_p95_s=0.4), slis(ttft_p95_s=0.55))["ttft_p95_s"]  # 1.4x
    assert regressed(cur, slis(e2e_p95_s=1.3))["e2e_p95_s"]  # 1.6x and +0.5 s
    assert not regressed(cur, slis(e2e_p95_s=1.1))["e2e_p95_s"]


def test_error_ratio_regresses_beyond_one_point() -> None:
    assert regressed(slis(), slis(error_ratio=0.02))["error_ratio"]
    assert not regressed(slis(), slis(error_ratio=0.01))["error_ratio"]
    assert not regressed(slis(error_ratio=0.05), slis(error_ratio=0.055))["error_ratio"]


def test_tokens_per_second_regresses_below_four_fifths() -> None:
    assert regressed(slis(), slis(output_tokens_per_s=180.0))["output_tokens_per_s"]
    assert not regressed(slis(), slis(output_tokens_per_s=200.0))["output_tokens_per_s"]
    assert not regressed(slis(), slis(output_tokens_per_s=400.0))["output_tokens_per_s"]


def test_a_regression_says_how_it_regressed() -> None:
    (ttft, *_) = compare_steady_states(slis(), slis(ttft_p95_s=0.5))
    assert ttft.why == "TTFT p95 0.500 s vs 0.200 s (above 1.5× and +0.1 s)"
    assert (ttft.current, ttft.candidate) == (0.2, 0.5)


def test_without_a_current_measurement_nothing_is_compared() -> None:
    rows = compare_steady_states(None, slis(ttft_p95_s=9.0))
    assert not any(r.regression for r in rows)
    assert {r.why for r in rows} == {"not compared: no current figure"}
    assert [r.current for r in rows] == [None] * 4


def test_a_missing_current_figure_skips_only_that_row() -> None:
    got = regressed(slis(e2e_p95_s=None), slis(e2e_p95_s=50.0, ttft_p95_s=1.0))
    assert got == {"ttft_p95_s": True, "error_ratio": False, "e2e_p95_s": False,
                   "output_tokens_per_s": False}


# --------------------------------------------------------------------------- the phase


def phase(seconds: float = 30.0, lines: list[str] | None = None) -> SteadyPhase:
    sink = lines if lines is not None else []
    return SteadyPhase(node(), alone(node()), seconds, BACKGROUND_PROFILE,
                       say=sink.append, runs_dir=Path("/nonexistent/steady"),
                       profile_source="the scenarios' default background load")


def fake_run(state: SteadyState) -> Any:
    async def run(*_args: object, **_kw: object) -> SteadyState:
        return state

    return run


async def test_a_candidate_that_breaches_fails_before_any_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gate_steady, "run_steady_state",
                        fake_run(SteadyState("cand", slis(ttft_p95_s=4.0))))
    lines: list[str] = []
    why = await phase(lines=lines).check_candidate("cand")
    assert why == ("cand fails its SLOs before any fault: "
                   "steady_ttft_p95: TTFT p95 4.000 s > objective 2.5 s")
    assert lines[0].startswith("steady state of cand (candidate): 30 s of the gate's load")
    assert lines[1].endswith("— FAIL: steady_ttft_p95: TTFT p95 4.000 s > objective 2.5 s")


async def test_an_unjudgeable_candidate_fails_too(monkeypatch: pytest.MonkeyPatch) -> None:
    empty = WindowSLIs(start=0.0, end=30.0)
    monkeypatch.setattr(gate_steady, "run_steady_state", fake_run(SteadyState("cand", empty)))
    why = await phase().check_candidate("cand")
    assert why is not None
    assert why.startswith("cand could not be judged before any fault (steady state "
                          "INCONCLUSIVE — missing evidence: no request arrived")


async def test_a_healthy_candidate_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_steady, "run_steady_state", fake_run(SteadyState("cand", slis())))
    assert await phase().check_candidate("cand") is None


async def test_steady_s_0_measures_nothing() -> None:
    off = phase(seconds=0)
    await off.measure_current("good")  # would probe 127.0.0.1:9 and fail if it ran
    assert await off.check_candidate("cand") is None
    assert off.current is None
    assert off.regression_why() is None
    assert off.to_json() == {"checked": False, "seconds": 0,
                             "why": "steady state not checked (--steady-s 0)"}


async def test_a_node_not_ready_is_not_measured_and_says_why() -> None:
    lines: list[str] = []
    p = phase(lines=lines)
    await p.measure_current("good")  # nothing listens on 127.0.0.1:9
    assert p.current is None
    side = p.to_json()["current"]
    assert side["measured"] is False
    assert side["why"].startswith("not measured: n was not ready before the rollout (")
    assert lines == [f"steady state of good (current): {side['why']}"]


def test_a_regression_fails_with_its_figures_and_a_missing_current_does_not() -> None:
    p = phase()
    p.candidate = SteadyState("cand", slis(ttft_p95_s=0.5, output_tokens_per_s=100.0))
    assert p.regression_why() is None  # no current: nothing to regress from
    p.current = SteadyState("good", slis())
    assert p.regression_why() == (
        "regression vs current (good): TTFT p95 0.500 s vs 0.200 s (above 1.5× and +0.1 s); "
        "output tokens/s 100.0 vs 240.0 (below 0.8×)"
    )
    data = p.to_json()
    assert data["regressions"] == [r["why"] for r in data["comparison"] if r["regression"]]
    assert data["candidate"]["summary"] == "PASS (2 checks)"
    assert data["tolerance"]["latency_ratio_max"] == 1.5


def test_the_gate_load_profile_follows_the_scenarios_settings() -> None:
    assert gate_load_profile((), {}) == (BACKGROUND_PROFILE,
                                        "the scenarios' default background load")
    profile, source = gate_load_profile(("-x", "--load-profile", "rate=2"), {})
    assert (profile, source) == (LoadProfile(rate=2.0), "--load-profile")
    assert gate_load_profile(("--load-profile=rate=3",), {"FAULTKIT_LOAD_PROFILE": "rate=4"})[
        0].rate == 3.0
    assert gate_load_profile((), {"FAULTKIT_LOAD_PROFILE": "rate=4"})[0].rate == 4.0
    with pytest.raises(ValueError, match=r"^--load-profile 'rate=x': "):
        gate_load_profile(("--load-profile", "rate=x"), {})


def test_the_gate_load_profile_takes_the_nodes_background_rate() -> None:
    from tests.unit.faults_fake import node

    gateway = node("gw", background_rate=5)
    profile, source = gate_load_profile((), {}, node=gateway)
    assert profile.rate == 5.0 and profile.input_tokens == BACKGROUND_PROFILE.input_tokens
    assert "gw's background_rate" in source
    # an explicit profile still wins, as in the plugin
    assert gate_load_profile((), {"FAULTKIT_LOAD_PROFILE": "rate=4"}, node=gateway)[0].rate == 4
    assert gate_load_profile((), {}, node=node("plain"))[0] == BACKGROUND_PROFILE


# --------------------------------------------------------------------------- gate.md


def gate_data(steady: dict[str, Any]) -> dict[str, Any]:
    return {"node": "n", "candidate": "cand", "current": "good", "decision": "fail",
            "why": "regression vs current (good): TTFT p95 0.500 s vs 0.200 s",
            "scenarios": [], "steady_state": steady}


def test_gate_md_shows_the_steady_state_table_with_the_regression_in_bold(
    tmp_path: Path,
) -> None:
    p = phase()
    p.current = SteadyState("good", slis())
    p.candidate = SteadyState("cand", slis(ttft_p95_s=0.5, error_ratio=0.0033, failed=1,
                                           ok=299))
    md = render_gate(GateResult.from_json(gate_data(p.to_json())), tmp_path / "gate.md").read_text()
    lines = md.splitlines()
    assert lines[0] == "# Gate: cand on n"
    assert lines[2].startswith("**Decision: FAIL** — regression vs current")
    start = lines.index("## Steady state (no fault)")
    table = [line for line in lines[start:] if line.startswith("| ")][:6]
    assert table == [
        "| | Current: good | Candidate: cand | Change |",
        "| SLOs | PASS \\(2 checks\\) | PASS \\(2 checks\\) | |",
        "| TTFT p95 | 0.200 s | 0.500 s | **+0.300 s (+150 %) — regression** |",
        "| error ratio | 0 % | 0.33 % | +0.33 points |",
        "| E2E p95 | 0.800 s | 0.800 s | +0.000 s (+0 %) |",
        "| output tokens/s | 240.0 | 240.0 | +0.0 (+0 %) |",
    ]
    assert ("A regression fails the gate: TTFT or E2E p95 above both 1.5× and +0.1 s of the "
            "current's") in md
    assert "30 s of the scenarios' background load (open loop 10 req/s)" in md
    assert md.index("## Steady state") < md.index("## Config diff")


def test_gate_md_says_when_the_current_config_was_not_measured(tmp_path: Path) -> None:
    p = phase()
    p.current_why = "not measured: n was not ready before the rollout (refused)"
    p.candidate = SteadyState("cand", slis())
    md = render_gate(GateResult.from_json(gate_data(p.to_json())), tmp_path / "gate.md").read_text()
    assert ("| SLOs | not measured: n was not ready before the rollout \\(refused\\) | "
            "PASS \\(2 checks\\) | |") in md
    assert "| TTFT p95 | — | 0.200 s | not compared |" in md
    assert "regression**" not in md


def test_gate_md_says_steady_state_not_checked(tmp_path: Path) -> None:
    result = GateResult.from_json(gate_data(phase(seconds=0).to_json()))
    md = render_gate(result, tmp_path / "gate.md").read_text()
    assert "Steady state not checked (`--steady-s 0`)." in md
    assert "| SLOs |" not in md


def test_an_older_gate_json_has_no_steady_state_section(tmp_path: Path) -> None:
    data = gate_data({})
    del data["steady_state"]
    md = render_gate(GateResult.from_json(data), tmp_path / "gate.md").read_text()
    assert "Steady state" not in md


# --------------------------------------------------------------------------- the CLI




def _gate_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    """``faultkit gate`` on the one-node inventory, with ``FAULTKIT_HOME`` and the runs
    directory under ``tmp_path`` (so a test can check that nothing was created)."""
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path / "home"))
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    return CliRunner().invoke(cli, ["gate", "--inventory", str(inv), "--node", "n",
                                    "--config", "good", "--out", str(tmp_path / "runs"), *args])


@pytest.mark.parametrize("value", ["-1", "abc", "nan", "1e9"])
def test_a_bad_steady_s_is_one_line_and_exit_2(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _gate_cli(tmp_path, monkeypatch, "--steady-s", value)
    assert "--steady-s" in one_error_line(result)
    assert not (tmp_path / "home").exists()
    assert not (tmp_path / "runs").exists()


def test_a_bad_load_profile_for_the_gate_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _gate_cli(tmp_path, monkeypatch, "--", "--load-profile", "rate=-1")
    assert "the gate's load profile: --load-profile 'rate=-1'" in one_error_line(result)
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- the runner


@pytest.fixture
async def fake_server() -> AsyncIterator[str]:
    runner, port = await serve()
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def on(base_url: str, model: str, tmp_path: Path) -> tuple[Node, Inventory, Path]:
    """``node`` at the fake server, an inventory of it alone (its Prometheus answers
    nothing) and where its steady-state runs go."""
    n = node(base_url, model)
    return n, alone(n), tmp_path / "steady"


async def test_the_runner_measures_the_requests_that_arrived_in_the_window(
    fake_server: str, tmp_path: Path,
) -> None:
    profile = BACKGROUND_PROFILE.replace(rate=40.0, output_tokens=4)
    state = await run_steady_state(*on(fake_server, "ok", tmp_path), 1.0, profile,
                                   config="good")
    s = state.slis
    assert s.end - s.start == pytest.approx(1.0)
    assert s.requests >= MIN_STEADY_REQUESTS  # ~40 arrivals at 40 req/s (Poisson, seed 0)
    assert (s.ok, s.failed, s.error_ratio) == (s.requests, 0, 0.0)
    assert s.ttft_p95_s is not None
    assert s.output_tokens_per_s == pytest.approx(4 * s.requests / 1.0)
    assert state.gaps == ()
    assert judge_steady_state(s, SLO).passed


async def test_the_steady_state_is_a_run_kept_as_every_run_is(
    fake_server: str, tmp_path: Path,
) -> None:
    """The window's evidence is a run directory of the experiment runner: run.json says
    what ran (no fault), the ledger holds every request the figures were taken from (and
    no warm-up request), the timeline brackets the run."""
    profile = BACKGROUND_PROFILE.replace(rate=40.0, output_tokens=4)
    state = await run_steady_state(*on(fake_server, "ok", tmp_path), 1.0, profile,
                                   side="candidate", config="good")
    (run_dir,) = (tmp_path / "steady").iterdir()
    assert state.run_dir == run_dir and run_dir.name.endswith("-steady_state-candidate-n")
    info = json.loads((run_dir / "run.json").read_text())
    assert (info["scenario"], info["case"], info["fault"]["kind"]) == (
        "steady_state", "candidate", None)
    assert info["t_end"] > info["t_start"]
    ledger = [json.loads(line) for line in (run_dir / "ledger.jsonl").read_text().splitlines()]
    arrivals = [r["t_scheduled"] or r["t_invoke"] for r in ledger]  # the user's arrival
    in_window = [t for t in arrivals if state.slis.start <= t < state.slis.end]
    assert len(in_window) == state.slis.requests > 0
    assert not any("-w" in r["id"] for r in ledger)  # warm-up requests stay out
    kinds = [json.loads(line)["kind"] for line in
             (run_dir / "timeline.jsonl").read_text().splitlines()]
    assert kinds[0] == "scenario_start" and "scenario_end" in kinds
    assert state.to_json()["run_dir"] == str(run_dir)


async def test_a_steady_state_that_cannot_keep_its_evidence_is_inconclusive(
    fake_server: str, tmp_path: Path,
) -> None:
    """A runs directory that cannot be written: no load is sent, the window has no request
    and names why (the judge reads it INCONCLUSIVE, never PASS)."""
    n, inventory, _ = on(fake_server, "ok", tmp_path)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    state = await run_steady_state(n, inventory, blocked / "steady", 1.0, BACKGROUND_PROFILE)
    assert state.slis.requests == 0
    verdict = judge_steady_state(state.slis, SLO, state.gaps, state.intervals)
    assert verdict.outcome == "INCONCLUSIVE"


async def test_the_runner_counts_failed_answers(fake_server: str, tmp_path: Path) -> None:
    profile = BACKGROUND_PROFILE.replace(rate=40.0)
    state = await run_steady_state(*on(fake_server, "status,code=503", tmp_path), 0.5, profile)
    assert state.slis.requests > 0
    assert state.slis.error_ratio == 1.0
    assert not judge_steady_state(state.slis, SLO).passed


# --------------------------------------------------------------------------- uncertainty


def test_a_figure_whose_interval_holds_the_objective_is_borderline() -> None:
    """SLO TTFT p95 ≤ 2.5 s: a p95 of 2.4 s whose interval reaches 2.7 s passes and says it
    is borderline; one whose interval stays below does not."""
    near = judge_steady_state(slis(ttft_p95_s=2.4), SLO, (),
                              {"ttft_p95_s": (2.2, 2.7), "error_ratio": (0.0, 0.0126)})
    assert near.passed
    ttft = next(c for c in near.checks if c.name == "steady_ttft_p95")
    assert ttft.why.endswith("; borderline: its 95 % interval 2.200 s–2.700 s holds the "
                             "objective")
    error = next(c for c in near.checks if c.name == "steady_error_ratio")
    assert "borderline" in error.why  # 0 of 300 failed: up to 1.3 %, the objective is 1 %
    clear = judge_steady_state(slis(ttft_p95_s=0.2), SLO, (), {"ttft_p95_s": (0.18, 0.23)})
    assert not any("borderline" in c.why for c in clear.checks)


async def test_the_runner_dates_each_judged_figure_with_its_interval(
    fake_server: str, tmp_path: Path,
) -> None:
    profile = LoadProfile(rate=40.0, concurrency=64, output_tokens=4)
    state = await run_steady_state(*on(fake_server, "ok", tmp_path), 1.0, profile,
                                   config="good")
    low, high = state.intervals["ttft_p95_s"]
    assert state.slis.ttft_p95_s is not None and low <= state.slis.ttft_p95_s <= high
    low, high = state.intervals["error_ratio"]
    assert low <= 1e-12 and 0 < high < 0.2  # none failed, but a 1 s window proves little
    assert set(state.to_json()["intervals"]) == {"ttft_p95_s", "e2e_p95_s", "error_ratio"}


def test_gate_md_shows_the_intervals_beside_the_figures(tmp_path: Path) -> None:
    p = phase()
    p.current = SteadyState("good", slis(), intervals={"ttft_p95_s": (0.18, 0.23)})
    p.candidate = SteadyState("cand", slis(ttft_p95_s=0.21),
                              intervals={"ttft_p95_s": (0.19, 0.24), "error_ratio": (0.0, 0.0126)})
    md = render_gate(GateResult.from_json(gate_data(p.to_json())), tmp_path / "gate.md").read_text()
    assert ("| TTFT p95 | 0.200 s (0.180–0.230) | 0.210 s (0.190–0.240) | +0.010 s (+5 %) "
            "[-0.040 to +0.060 s] |") in md  # 0.19 − 0.23 to 0.24 − 0.18
    assert "| error ratio | 0 % | 0 % (0 %–1.26 %) |" in md
    assert "In brackets: the figure's 95 % interval" in md


def test_gate_md_links_each_steady_state_run_that_is_still_there(tmp_path: Path) -> None:
    gate_dir = tmp_path / "gate"
    kept = gate_dir / "steady" / "20261207T000000.000Z-steady_state-current-n"
    kept.mkdir(parents=True)
    p = phase()
    p.current = SteadyState("good", slis(), run_dir=kept)
    p.candidate = SteadyState("cand", slis(), run_dir=gate_dir / "steady" / "gone")
    md = render_gate(GateResult.from_json(gate_data(p.to_json())), gate_dir / "gate.md")
    assert ("| evidence | [run directory](steady/20261207T000000.000Z-steady_state-current-n)"
            " | — | |") in md.read_text()


def test_a_latency_rise_within_the_windows_noise_is_no_regression() -> None:
    """Beyond the tolerance, but the two windows' intervals overlap: said, not failed; apart,
    it is a regression as before."""
    cur, cand = slis(e2e_p95_s=0.28), slis(e2e_p95_s=0.55)
    (_, _, e2e, _) = compare_steady_states(cur, cand, {"e2e_p95_s": (0.25, 0.40)},
                                           {"e2e_p95_s": (0.35, 0.80)})
    assert not e2e.regression
    assert e2e.why.endswith("but within noise: the two windows' 95 % intervals overlap")
    (_, _, apart, _) = compare_steady_states(cur, cand, {"e2e_p95_s": (0.25, 0.30)},
                                             {"e2e_p95_s": (0.45, 0.80)})
    assert apart.regression
