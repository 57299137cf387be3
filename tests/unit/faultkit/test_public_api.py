"""The public API, pinned: what a user writing their own scenario imports from ``faultkit``
(and from ``slo`` for checks), and the runner's own names (``faultkit.experiment``).

A name added to or dropped from an ``__all__`` is a decision: change the list here with it.
Each listed name resolves (``faultkit``'s and ``faultkit.experiment``'s on first use), and
each package ships ``py.typed``, so a user's type checker reads faultkit's annotations.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PUBLIC: dict[str, list[str]] = {
    "faultkit": [
        "FAULT_KINDS",
        "Event",
        "EventKind",
        "Experiment",
        "FaultkitError",
        "Inventory",
        "InventoryError",
        "LoadProfile",
        "Node",
        "NotJudgeable",
        "RequestRecord",
        "RunDir",
        "SLOSettings",
        "ServingConfig",
        "load_inventory",
    ],
    "faultkit.experiment": [
        "CandidateSession",
        "DryRunPlan",
        "During",
        "Experiment",
        "ExperimentState",
        "LiveStatus",
        "NotJudgeable",
        "RunPlan",
        "SteadyWindow",
        "run_steady",
        "run_steps",
    ],
    "slo": [
        "CheckResult",
        "Checks",
        "Measurement",
        "Verdict",
        "WindowSLIs",
        "alert_fired_within",
        "check",
        "checks_from_slo",
        "detected_within",
        "error_ratio_at_most",
        "judge",
        "lost_at_most",
        "measure",
        "recovered_within",
        "ttft_p95_below",
        "window_checks",
        "window_objectives",
        "window_slis",
    ],
}


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_the_public_names_are_pinned_and_resolve(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package])
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    assert set(module.__all__) <= set(dir(module))


def test_a_scenario_and_the_lab_get_the_same_runner() -> None:
    import faultkit
    from faultkit.experiment import Experiment
    from faultkit.plugin import Experiment as FixtureType

    assert faultkit.Experiment is Experiment is FixtureType


@pytest.mark.parametrize("package", ["faultkit", "slo", "reports"])
def test_each_package_ships_py_typed(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert (Path(module.__file__).parent / "py.typed").is_file()


def test_importing_faultkit_and_its_runner_package_stays_light() -> None:
    """``import faultkit`` (which every ``faultkit.*`` import runs, the pytest plugin's
    included) and the runner's light modules, which the plugin imports, pull in none of the
    harness: the names above load on first use."""
    code = ("import sys, faultkit, faultkit.experiment.live, faultkit.experiment.outcomes\n"
            "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    heavy = sorted(m for m in out if m.split(".")[0] in ("docker", "aiohttp", "pydantic",
                                                        "slo", "reports", "yaml"))
    assert heavy == []
    assert "faultkit.experiment.experiment" not in out
