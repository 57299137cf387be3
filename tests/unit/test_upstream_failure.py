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

gateway_scenarios = importlib.import_module("scenarios._gateway")


def test_the_testbed_gateway_kills_sim_vllm() -> None:
    inventory = load_inventory(INVENTORY)
    upstream = gateway_scenarios.upstream_to_fail(inventory, inventory.node("gateway"), "kill")
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
    chosen = gateway_scenarios.upstream_to_fail(inv, inv.node("gw"), "kill")
    assert chosen is not None and chosen.name == "a"  # b is protected
    inv = parse_inventory(_inventory("[]"))
    assert gateway_scenarios.upstream_to_fail(inv, inv.node("gw"), "kill") is None


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


def test_the_upstream_is_back_at_its_ready_event_else_at_its_fault_revert() -> None:
    from faultkit.records import Event

    def ev(t: float, kind: str, node: str = "a", source: str = "fault") -> Event:
        return Event(t=t, source=source, kind=kind, node=node, data={})

    kill = [ev(1.0, "inject_start"), ev(2.0, "revert_end"), ev(4.0, "ready"),
            ev(9.0, "ready", node="gw")]
    assert gateway_scenarios.t_back_of(kill, "a") == 4.0  # ready, not the revert's end
    pause = [ev(1.0, "inject_start"), ev(8.5, "revert_end"), ev(9.0, "health_ok", source="obs")]
    assert gateway_scenarios.t_back_of(pause, "a") == 8.5
    assert gateway_scenarios.t_back_of([ev(1.0, "inject_start")], "a") is None


def test_retries_after_counts_what_the_gateways_answers_said_from_t_effect_on() -> None:
    from faultkit.records import RequestRecord

    def rec(i: int, t: float, retries: int | None, node: str = "gw") -> RequestRecord:
        return RequestRecord(id=f"r{i}", node=node, kind="chat", t_invoke=t, t_scheduled=t,
                             status="ok", t_end=t + 1, gateway_retries=retries)

    records = [rec(0, 1.0, 2), rec(1, 5.0, 0), rec(2, 6.0, 1), rec(3, 7.0, None),
               rec(4, 8.0, 2), rec(5, 9.0, 5, node="other")]
    assert gateway_scenarios.retries_after(records, "gw", 5.0) == {
        "retried_requests": 2, "retries": 3, "reported": 3,
    }
