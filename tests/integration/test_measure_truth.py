"""Measurement against ground truth, on the testbed's simulated vLLM node.

Each trial runs the real scenario path (``Experiment``) and compares what faultkit measured
with evidence its measurement never reads: the simulator's truth file, Docker's container
and network events (queried here directly) and Prometheus' own ``ALERTS`` series — see
``testbed/truth.py``. Bounds (the promise in the README): |t_effect − truth| and
|t_recovered − truth| ≤ 0.5 s at a 1 s scrape, detection by alert equal to the first
``ALERTS`` firing sample within one evaluation interval (1 s), lost requests equal to truth.
``bench/measurement_truth.py`` runs the same trials and writes the README's table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from faultkit.inventory import Inventory
from testbed.truth import TRIALS, run_trial

pytestmark = pytest.mark.docker

RUNS = 5
BOUND_S = 0.5
EVALUATION_INTERVAL_S = 1.0


@pytest.mark.parametrize("run", range(RUNS), ids=lambda i: f"run{i + 1}")
@pytest.mark.parametrize("name", list(TRIALS))
async def test_measurement_matches_ground_truth(
    name: str, run: int, lab_inventory: Inventory, tmp_path: Path
) -> None:
    trial = await run_trial(name, lab_inventory, tmp_path / "runs")
    context = f"{name}: measured {trial.measured}, truth {trial.truth} ({trial.run_dir})"
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
