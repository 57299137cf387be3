"""Measurement against ground truth, on the testbed's simulated nodes.

Each trial runs the real scenario path (``Experiment``) and compares what faultkit measured
with evidence its measurement never reads: the simulator's truth file, Docker's container
and network events (queried here directly) and Prometheus' own ``ALERTS`` series — see
``testbed/truth.py``. Bounds (the promise in the README): |t_effect − truth| and
|t_recovered − truth| ≤ 0.5 s at a 1 s scrape, detection by alert equal to the first
``ALERTS`` firing sample within one evaluation interval (1 s), lost requests equal to truth
(give or take requests the server finished within 0.1 s before its process was killed:
whether their bytes left the machine is undecidable from the server's record).

The 30 trials run in two lanes side by side, one per simulated node (sim-vllm and
sim-sglang; the never-ready rollout only on sim-vllm, whose candidate it rolls out): the
module's fixture runs them all, each test judges one. ``bench/measurement_truth.py`` runs
the same trials and writes the README's table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultkit.inventory import Inventory
from testbed.truth import TRIALS, Trial, TrialKey, plan_trials, run_lanes

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

RUNS = 5
BOUND_S = 0.5
EVALUATION_INTERVAL_S = 1.0
#: every trial is appended here (CI keeps it beside junit.xml); ``bench/measurement_truth.py
#: --from FILE`` turns it into the README's table
RESULTS = Path(__file__).resolve().parents[2] / "test-results" / "measurement-truth.jsonl"


def _record(_key: TrialKey, trial: Trial | Exception) -> None:
    if isinstance(trial, Trial):
        RESULTS.parent.mkdir(exist_ok=True)
        with RESULTS.open("a", encoding="utf-8") as out:
            out.write(json.dumps(trial.to_json()) + "\n")


@pytest.fixture(scope="module")
def trials(
    lab_inventory: Inventory, tmp_path_factory: pytest.TempPathFactory
) -> dict[TrialKey, Trial | Exception]:
    plan = plan_trials(list(TRIALS), RUNS)
    return run_lanes(plan, lab_inventory, tmp_path_factory.mktemp("truth"), on_trial=_record)


@pytest.mark.parametrize("run", range(RUNS), ids=lambda i: f"run{i + 1}")
@pytest.mark.parametrize("name", list(TRIALS))
def test_measurement_matches_ground_truth(
    name: str, run: int, trials: dict[TrialKey, Trial | Exception]
) -> None:
    trial = trials[(name, run)]
    if isinstance(trial, Exception):
        raise trial
    context = (f"{name} on {trial.node}: measured {trial.measured}, truth {trial.truth} "
               f"({trial.run_dir})")
    assert not trial.problems, f"{trial.problems}; {context}"
    assert trial.measured["inconclusive"] == [], context
    assert trial.measured["harness_intervened"] == [], context
    err = trial.errors
    assert err["t_effect"] is not None and abs(err["t_effect"]) <= BOUND_S, context
    assert err["t_recovered"] is not None and abs(err["t_recovered"]) <= BOUND_S, context
    assert trial.measured["detect_signal"] in ("alert", "up"), context
    assert trial.measured["detection_s"] >= 0 and trial.measured["recovery_s"] >= 0, context
    if trial.measured["detect_signal"] == "alert":
        assert err["t_detect_vs_alerts"] is not None, context
        assert abs(err["t_detect_vs_alerts"]) <= EVALUATION_INTERVAL_S, context
    assert err["lost"] == 0, context


def test_the_trials_run_on_both_simulated_nodes() -> None:
    """The plan the fixture runs: every trial and run once, the rollout on sim-vllm, every
    other kind on both nodes, 15 trials a lane."""
    plan = plan_trials(list(TRIALS), RUNS)
    keys = [key for lane in plan.values() for key in lane]
    assert sorted(keys) == sorted((n, r) for n in TRIALS for r in range(RUNS))
    assert all(name != "rollout-never-ready" for name, _ in plan["sim-sglang"])
    for name in TRIALS:
        if name != "rollout-never-ready":
            assert all(any(n == name for n, _ in lane) for lane in plan.values()), name
    assert [len(lane) for lane in plan.values()] == [15, 15]
