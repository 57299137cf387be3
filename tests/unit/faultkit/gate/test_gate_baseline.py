"""The gate's baseline: the current config's earlier runs of the same scenarios, and the
candidate's figure regressions against them (gate.json, gate.md, the decision). Run
directories are written on disk the way the plugin writes them; no Docker, no rollout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from faultkit.gate.baseline import (
    TOLERANCES,
    Baseline,
    compare_figures,
    find_baselines,
    judge_against_baseline,
)
from faultkit.model.runfiles import RunInfo
from faultkit.rundir import GateResult, RunDir
from reports import render_gate
from tests.unit.reports_helpers import table_problems

NOW = 1_800_000_000.0


def write_run(
    root: Path, scenario: str, *, case: str | None = "llama", node: str = "llama",
    config: str | None = "llama-good", t_start: float = NOW - 600, outcome: str = "PASS",
    detection_s: float | None = 1.3, recovery_s: float | None = 0.5, lost: int | None = 4,
) -> Path:
    """A run directory as the plugin leaves it: run.json, verdict.json, measurement.json
    (each in a folder of its own under ``root``: two runs may share a millisecond here)."""
    root.mkdir(parents=True, exist_ok=True)
    run = RunDir.create(root / str(len(list(root.iterdir()))), scenario, node)
    run.write_info(RunInfo().updated(scenario=scenario, case=case, node=node,
                                     serving_config=config, t_start=t_start))
    run.write_json(run.verdict_json, {"outcome": outcome, "passed": outcome == "PASS"})
    run.write_json(run.measurement_json, {"detection_s": detection_s, "recovery_s": recovery_s,
                                          "lost_total": lost})
    return run.path


def row(name: str, outcome: str = "PASS", detection_s: float | None = 1.2,
        recovery_s: float | None = 0.6, lost: int | None = 3) -> dict[str, Any]:
    return {"name": name, "outcome": outcome, "passed": outcome in ("PASS", "ACCEPTED"),
            "detection_s": detection_s, "recovery_s": recovery_s, "lost": lost}


def test_run_info_names_its_test() -> None:
    assert RunInfo(scenario="oom", case="llama-long-prefill").test_name == (
        "test_oom[llama-long-prefill]")
    assert RunInfo(scenario="smoke").test_name == "test_smoke"
    assert RunInfo().test_name is None


def test_the_newest_passing_earlier_run_of_the_same_test_node_and_config(tmp_path: Path) -> None:
    older = write_run(tmp_path / "a", "kill", t_start=NOW - 900, recovery_s=0.4)
    newest = write_run(tmp_path / "b" / "nested", "kill", t_start=NOW - 300, recovery_s=0.7)
    # none of these is a baseline of test_kill[llama] on llama-good before NOW:
    write_run(tmp_path, "kill", t_start=NOW - 100, outcome="FAIL")          # failed
    write_run(tmp_path, "kill", t_start=NOW - 100, outcome="INCONCLUSIVE")  # no evidence
    write_run(tmp_path, "kill", t_start=NOW - 100, config="llama-bad-cacheram")  # other config
    write_run(tmp_path, "kill", t_start=NOW - 100, node="sim-vllm", case="sim-vllm")
    write_run(tmp_path, "kill", t_start=NOW + 5)                             # the gate's own
    write_run(tmp_path, "kill", t_start=NOW - 100, case="llama-refuse")     # another case
    found = find_baselines(tmp_path, node="llama", config="llama-good",
                           tests=["test_kill[llama]", "test_limits[llama]"], before=NOW)
    assert set(found) == {"test_kill[llama]"}
    base = found["test_kill[llama]"]
    assert base.run_dir == str(newest) and base.run_dir != str(older)
    assert (base.detection_s, base.recovery_s, base.lost) == (1.3, 0.7, 4)


def test_accepted_runs_are_baselines_and_nothing_is_found_without_a_config(
    tmp_path: Path,
) -> None:
    write_run(tmp_path, "bad_input", outcome="ACCEPTED", detection_s=None, lost=0)
    tests = ["test_bad_input[llama]"]
    assert set(find_baselines(tmp_path, node="llama", config="llama-good", tests=tests,
                              before=NOW)) == set(tests)
    assert find_baselines(tmp_path, node="llama", config=None, tests=tests, before=NOW) == {}
    assert find_baselines(tmp_path / "missing", node="llama", config="llama-good",
                          tests=tests, before=NOW) == {}


def test_an_unreadable_run_directory_is_skipped(tmp_path: Path) -> None:
    good = write_run(tmp_path, "kill")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    found = find_baselines(tmp_path, node="llama", config="llama-good",
                           tests=["test_kill[llama]"], before=NOW)
    assert found["test_kill[llama]"].run_dir == str(good)


def base(test: str = "test_kill[llama]", detection_s: float | None = 1.0,
         recovery_s: float | None = 2.0, lost: int | None = 4) -> Baseline:
    return Baseline(test, "/runs/x", NOW - 60, detection_s, recovery_s, lost)


@pytest.mark.parametrize(
    ("candidate", "regressed"),
    [
        (row("test_kill[llama]", detection_s=1.4, recovery_s=2.9, lost=6), set()),  # noise
        # worse by the factor but not the margin
        (row("test_kill[llama]", detection_s=5.9, recovery_s=16.9, lost=13), set()),
        (row("test_kill[llama]", detection_s=6.1, recovery_s=17.1, lost=15),
         {"detection_s", "recovery_s", "lost"}),
        (row("test_kill[llama]", detection_s=None, recovery_s=None), {"detection_s",
                                                                      "recovery_s"}),
        (row("test_kill[llama]", lost=None), set()),  # not captured: not compared
        (row("test_kill[llama]", outcome="INCONCLUSIVE", recovery_s=None), set()),
        (row("test_kill[llama]", outcome="SKIPPED", recovery_s=None), set()),
        (row("test_partition[llama-refuse]", recovery_s=99.0), set()),  # no baseline
    ],
)
def test_a_regression_is_worse_by_both_the_factor_and_the_margin(
    candidate: dict[str, Any], regressed: set[str]
) -> None:
    assert TOLERANCES["detection_s"].describe() == "above both 2× and +5 s"
    found = compare_figures([candidate], {"test_kill[llama]": base()})
    assert {r.figure for r in found} == regressed


def test_vllms_restart_noise_is_no_regression_but_worse_by_the_factor_too_is() -> None:
    """The same config gated twice on the lab: test_kill[vllm] recovered in 25.9 s, then
    42.4 s, losing 253 then 414 requests. Noise, not a regression; twice as slow is."""
    current = base("test_kill[vllm]", detection_s=1.3, recovery_s=25.9, lost=253)
    noise = row("test_kill[vllm]", detection_s=0.6, recovery_s=42.4, lost=414)
    assert compare_figures([noise], {"test_kill[vllm]": current}) == []
    slower = row("test_kill[vllm]", detection_s=0.6, recovery_s=52.0, lost=520)
    assert {r.figure for r in compare_figures([slower], {"test_kill[vllm]": current})} == {
        "recovery_s", "lost"}


def test_worse_by_the_margin_but_not_the_factor_is_no_regression() -> None:
    current = base(detection_s=20.0, recovery_s=40.0, lost=100)
    assert compare_figures([row("test_kill[llama]", detection_s=39.0, recovery_s=79.0,
                                lost=199)], {"test_kill[llama]": current}) == []


def test_what_the_current_config_never_reached_is_not_compared() -> None:
    current = base(detection_s=None, recovery_s=None)
    assert compare_figures([row("test_kill[llama]", detection_s=None, recovery_s=None)],
                           {"test_kill[llama]": current}) == []
    assert compare_figures([row("test_kill[llama]", detection_s=30.0, recovery_s=80.0)],
                           {"test_kill[llama]": current}) == []


def test_a_regression_line_says_which_figure_and_both_values() -> None:
    (found,) = compare_figures([row("test_kill[llama]", recovery_s=40.2)],
                               {"test_kill[llama]": base(recovery_s=0.5)})
    assert found.line() == ("test_kill[llama]: recovery 0.5 s on the current config, 40.2 s "
                            "on the candidate (above both 2× and +15 s)")


def gate_result(scenarios: list[dict[str, Any]], decision: str = "pass") -> GateResult:
    return GateResult(node="llama", candidate="llama-cand", current="llama-good",
                      decision=decision, why="all 2 gate scenarios passed on llama-cand",
                      scenarios=scenarios, started_at=NOW)


def test_a_regression_fails_a_gate_that_passed_and_is_shown_in_gate_md(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    kill_run = write_run(runs, "kill", recovery_s=0.5)
    write_run(runs, "limits", detection_s=None, recovery_s=None, lost=0)
    result = gate_result([row("test_kill[llama]", recovery_s=40.2),
                          row("test_limits[llama]", detection_s=None, recovery_s=None, lost=0),
                          row("test_partition[llama-refuse]", lost=72)])
    judge_against_baseline(result, runs, say=print, detection_resolution_s=1.0)
    assert result.decision == "fail"
    assert result.why is not None and result.why.startswith(
        "1 figure regression(s) against llama-good: test_kill[llama]: recovery 0.5 s")
    assert result.not_passed == [
        "regression — test_kill[llama]: recovery 0.5 s on the current config, 40.2 s on the "
        "candidate (above both 2× and +15 s)"]
    assert result.baseline is not None
    assert set(result.baseline["runs"]) == {"test_kill[llama]", "test_limits[llama]"}
    assert result.baseline["runs"]["test_kill[llama]"]["run_dir"] == str(kill_run)

    gate_dir = tmp_path / "gate"
    gate_dir.mkdir()
    (gate_dir / "gate.json").write_text(json.dumps(result.to_json()))
    data = json.loads((gate_dir / "gate.json").read_text())
    md = render_gate(GateResult.from_json(data), gate_dir / "gate.md").read_text()
    assert "## Scenarios against the current config" in md
    assert "| test\\_kill\\[llama\\] | 1.3 s → 1.2 s | **0.5 s → 40.2 s — regression** | 4 → 3 |" \
        in md
    assert "| test\\_partition\\[llama-refuse\\] | — | — | — | none: not compared |" in md
    assert not table_problems(md)
    assert "scraped and evaluated every 1 s: it is known to within 1 s" in md


def test_no_baseline_compares_nothing_and_keeps_the_decision(tmp_path: Path) -> None:
    result = gate_result([row("test_kill[llama]", recovery_s=40.2)])
    judge_against_baseline(result, tmp_path / "empty", say=print)
    assert result.decision == "pass" and result.not_passed == []
    assert result.baseline is not None and result.baseline["runs"] == {}
    md = render_gate(result, tmp_path / "gate.md").read_text()
    assert "No passing earlier run of these scenarios on llama-good" in md


def test_a_failed_gate_stays_failed_with_its_own_why(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "kill", recovery_s=0.5)
    result = gate_result([row("test_kill[llama]", outcome="FAIL", recovery_s=40.2)],
                         decision="fail")
    result.why = "1 FAIL of 1 gate scenarios: test_kill[llama]: FAIL — lost"
    result.not_passed = ["test_kill[llama]: FAIL — lost"]
    judge_against_baseline(result, runs, say=print)
    assert result.why == "1 FAIL of 1 gate scenarios: test_kill[llama]: FAIL — lost"
    assert result.not_passed[1].startswith("regression — test_kill[llama]: recovery")


def write_overload(root: Path, served_rps: float) -> Path:
    """An overload run of the current config: its flood's saturation point on the timeline,
    as the scenario notes it."""
    path = write_run(root, "overload", detection_s=None, recovery_s=3.0, lost=0)
    (path / "timeline.jsonl").write_text(json.dumps(
        {"t": NOW - 590, "source": "harness", "kind": "saturation", "node": "llama",
         "data": {"offered_rps": 100.0, "served_rps": served_rps}}) + "\n")
    return path


@pytest.mark.parametrize(("candidate_rps", "regressed"), [
    (25.0, False),  # within the band: two floods of one config differ this much
    (19.0, True),   # below both 30/1.5 = 20 and 30 − 2
    (None, False),  # not captured on the candidate: not compared
])
def test_peak_throughput_below_two_thirds_of_the_current_is_a_capability_regression(
    tmp_path: Path, candidate_rps: float | None, regressed: bool,
) -> None:
    """The overload's served rate under its flood is the config's saturation point: a
    candidate that carries less traffic than the config it replaces fails, side by side
    in gate.md."""
    runs = tmp_path / "runs"
    write_overload(runs, 30.0)
    candidate = {**row("test_overload[llama]", detection_s=None, recovery_s=3.1, lost=0),
                 "peak_rps": candidate_rps}
    result = gate_result([candidate])
    judge_against_baseline(result, runs, say=print)
    assert result.baseline is not None
    assert result.baseline["runs"]["test_overload[llama]"]["peak_rps"] == 30.0
    assert (result.decision == "fail") is regressed
    if regressed:
        assert result.not_passed == [
            "regression — test_overload[llama]: peak throughput (served under the overload's "
            "flood) 30 req/s on the current config, 19 req/s on the candidate (below both "
            "1/1.5 and −2 req/s)"]
    md = render_gate(result, tmp_path / "gate.md").read_text()
    shown = f"{candidate_rps:g} req/s" if candidate_rps is not None else "not captured"
    line = ("Peak throughput, served under test\\_overload\\[llama\\]'s flood (its saturation "
            f"point): {'**' if regressed else ''}30 req/s → {shown}")
    assert line in md, md
    assert not table_problems(md)


def test_a_run_without_a_timeline_has_no_peak_and_still_its_figures(tmp_path: Path) -> None:
    from faultkit.gate.baseline import run_figures

    figures = run_figures(RunDir(write_run(tmp_path, "kill", recovery_s=0.5)))
    assert figures == {"detection_s": 1.3, "recovery_s": 0.5, "lost": 4, "peak_rps": None}


def test_a_run_whose_timeline_is_malformed_has_no_peak_and_still_its_figures(
        tmp_path: Path) -> None:
    """An overload run whose timeline.jsonl holds lines of another shape and one cut
    mid-line (a run killed while writing): its measurement's figures are still compared;
    its peak is the one whole saturation event's, or not captured."""
    from faultkit.gate.baseline import run_figures

    run = RunDir(write_run(tmp_path, "overload", recovery_s=0.5))
    broken = ['{"source": "harness"}', '[1, 2]', '{"kind": "saturation", "data": [1]}',
              '{"t": 1.0, "source": "harness", "kind": "saturation", "node": "n", "data": {"ser']
    run.timeline_jsonl.write_text("\n".join(broken))
    figures = {"detection_s": 1.3, "recovery_s": 0.5, "lost": 4}
    assert run_figures(run) == {**figures, "peak_rps": None}
    whole = '{"t": 2.0, "source": "harness", "kind": "saturation", "data": {"served_rps": 37.1}}'
    run.timeline_jsonl.write_text("\n".join([*broken[:3], whole]))
    assert run_figures(run) == {**figures, "peak_rps": 37.1}
