"""The experiment notes a wall-clock step as an evidence gap when it measures a run (the
wiring of faultkit.model.timestamps.clock_step_gap into faultkit.experiment.lifecycle.finish)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faultkit.experiment import Experiment
from faultkit.experiment.lifecycle import finish
from faultkit.inventory import parse_inventory
from faultkit.load import LoadProfile
from faultkit.model.events import EventKind
from faultkit.model.timestamps import wall_minus_monotonic
from faultkit.rundir import RunDir
from slo.effect import MeasurementInputError
from slo.prom import Prometheus

_INVENTORY = """
prometheus: {url: "http://127.0.0.1:1"}
nodes:
  - {name: a, engine: vllm, base_url: "http://127.0.0.1:1", model: m, faults: ["*"]}
"""


def _gaps(exp: Experiment) -> list[str]:
    return [str(e.data.get("reason")) for e in exp.events if e.kind == EventKind.EVIDENCE_GAP]


@pytest.mark.parametrize(("step_s", "noted"), [(28.3, True), (0.1, False)])
def test_measuring_a_run_notes_a_clock_step(tmp_path: Path, step_s: float, noted: bool) -> None:
    inv = parse_inventory(_INVENTORY)
    exp = Experiment(scenario="kill", node=inv.node("a"), inventory=inv, run=RunDir(tmp_path),
                     load_profile=LoadProfile())
    exp.clock_offset = wall_minus_monotonic() - step_s  # as if the clock stepped since start
    with pytest.raises(MeasurementInputError):  # no fault was run: nothing else to measure
        finish(exp, Prometheus("http://127.0.0.1:1"))
    stepped = [g for g in _gaps(exp) if "wall clock stepped" in g]
    assert bool(stepped) is noted, _gaps(exp)
    if noted:
        assert "+28.3 s" in stepped[0]
