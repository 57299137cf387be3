"""test_upstream_failure's pieces without a lab: the upstream it kills, and run_fault(on=…)
making the fault for that upstream (its allowlist, its name) while the experiment stays
the gateway's."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from faultkit.errors import FaultRefused
from faultkit.inventory import load_inventory, parse_inventory
from faultkit.load import LoadProfile
from faultkit.plugin.experiment import Experiment
from faultkit.plugin.status import DryRunPlan
from faultkit.rundir import RunDir
from testbed.paths import INVENTORY

scenario = importlib.import_module("scenarios.test_upstream_failure")


def test_the_testbed_gateway_kills_sim_vllm() -> None:
    inventory = load_inventory(INVENTORY)
    upstream = scenario.upstream_to_kill(inventory, inventory.node("gateway"))
    assert upstream is not None and upstream.name == "sim-vllm"


def _inventory(up_faults: str) -> str:
    return f"""
nodes:
  - {{name: a, engine: vllm, base_url: "http://127.0.0.1:1", model: m, faults: {up_faults},
     docker: {{container: fk-a}}}}
  - {{name: b, engine: vllm, base_url: "http://127.0.0.1:2", model: m, faults: ["*"],
     docker: {{container: fk-b}}, protected: true}}
  - {{name: gw, kind: gateway, engine: litellm, base_url: "http://127.0.0.1:3", model: chat,
     upstreams: [a, b], faults: [kill], docker: {{container: fk-gw}}}}
"""


def test_only_killable_upstreams_are_chosen_and_a_lone_upstream_is_not() -> None:
    inv = parse_inventory(_inventory('["*"]'))
    chosen = scenario.upstream_to_kill(inv, inv.node("gw"))
    assert chosen is not None and chosen.name == "a"  # b is protected
    inv = parse_inventory(_inventory("[]"))
    assert scenario.upstream_to_kill(inv, inv.node("gw")) is None


async def test_run_fault_on_an_upstream_makes_the_fault_for_it(tmp_path: Path) -> None:
    inv = parse_inventory(_inventory('["*"]'))
    exp = Experiment(scenario="upstream_failure", node=inv.node("gw"), inventory=inv,
                     run=RunDir(tmp_path), load_profile=LoadProfile(), dry_run=True)
    with pytest.raises(DryRunPlan, match="kill on a"):
        await exp.run_fault("kill", hold_s=0, on=inv.node("a"))
    assert exp.fault_node is not None and exp.fault_node.name == "a"
    assert exp.run.info().node == "gw"
    with pytest.raises(FaultRefused):  # the upstream's own allowlist applies
        await exp.run_fault("kill", hold_s=0, on=inv.node("b"))
