"""faultkit.lanes: which nodes may be tested side by side, and how the lanes are balanced."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.inventory import Inventory, load_inventory, parse_inventory
from faultkit.lanes import node_groups, plan_lanes, plan_passes

TESTBED = Path(__file__).parents[2] / "testbed" / "inventory.yaml"


def _inventory(nodes: str) -> Inventory:
    return parse_inventory(
        "prometheus: {url: http://127.0.0.1:19090}\nnodes:\n" + nodes, source="test"
    )


def _engine(name: str, engine: str = "sim", port: int = 1) -> str:
    personality = "\n    personality: vllm" if engine == "sim" else ""
    return (f"  - name: {name}\n    engine: {engine}{personality}\n"
            f"    base_url: http://127.0.0.1:{port}\n    model: m\n")


def _gateway(name: str, upstreams: list[str]) -> str:
    return (f"  - name: {name}\n    kind: gateway\n    engine: litellm\n"
            f"    base_url: http://127.0.0.1:9\n    model: m\n"
            f"    upstreams: [{', '.join(upstreams)}]\n")


def test_a_gateway_joins_its_upstreams_and_other_nodes_stand_alone() -> None:
    inv = _inventory(_engine("a", port=1) + _engine("b", port=2) + _engine("c", port=3)
                     + _gateway("gw", ["a", "c"]))
    assert sorted(sorted(g) for g in node_groups(inv)) == [["a", "c", "gw"], ["b"]]


def test_two_gateways_sharing_an_upstream_are_one_group() -> None:
    inv = _inventory(_engine("a", port=1) + _engine("b", port=2) + _engine("c", port=3)
                     + _gateway("g1", ["a"]) + _gateway("g2", ["a", "b"]))
    assert [sorted(g) for g in node_groups(inv)] == [["a", "b", "g1", "g2"], ["c"]]


def test_the_testbed_splits_vllm_from_the_gateway_and_its_upstreams() -> None:
    # the second host's sim node evens out the lanes: it rides with vllm
    lanes = plan_lanes(load_inventory(TESTBED), 2)
    assert sorted(lane.nodes for lane in lanes) == [
        ("llama", "sim-vllm", "sim-sglang", "gateway"), ("sim-vllm-h2", "vllm")
    ]


def test_every_node_is_in_exactly_one_lane_and_no_lane_is_empty() -> None:
    inv = _inventory("".join(_engine(f"n{i}", port=i + 1) for i in range(5)))
    for count in (1, 2, 3, 5, 8):
        lanes = plan_lanes(inv, count)
        assert len(lanes) == min(count, 5)
        names = [n for lane in lanes for n in lane.nodes]
        assert sorted(names) == [f"n{i}" for i in range(5)]
        assert all(lane.nodes for lane in lanes)


def test_the_heaviest_node_gets_a_lane_of_its_own() -> None:
    inv = _inventory(_engine("big", "vllm", 1) + _engine("s1", port=2) + _engine("s2", port=3))
    lanes = plan_lanes(inv, 2)
    assert sorted(lane.nodes for lane in lanes) == [("big",), ("s1", "s2")]


def test_names_limit_the_plan_and_zero_lanes_is_refused() -> None:
    inv = _inventory(_engine("a", port=1) + _engine("b", port=2))
    assert [lane.nodes for lane in plan_lanes(inv, 2, ["b"])] == [("b",)]
    with pytest.raises(ValueError, match="lanes must be 1 or more"):
        plan_lanes(inv, 0)


def test_the_lanes_command_prints_one_command_per_lane_then_the_exclusive_pass() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 3
    assert any("--node sim-vllm-h2,vllm -m 'not exclusive'" in line for line in lines[:2])
    assert any("--node llama,sim-vllm,sim-sglang,gateway -m 'not exclusive'" in line
               for line in lines[:2])
    assert lines[2].endswith("-m exclusive    # alone, last")


def test_the_lanes_command_refuses_zero_lanes_with_exit_2() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED), "--lanes", "0"])
    assert result.exit_code == 2


def test_ci_keeps_the_cpu_bound_engines_out_of_the_lanes() -> None:
    """What the e2e suite runs (README, "CI"): vLLM beside the simulated nodes, llama.cpp and
    the gateway after them. With the gateway kept apart its upstreams need not share a lane."""
    plan = plan_passes(load_inventory(TESTBED), 2, ("llamacpp", "litellm"))
    assert sorted(lane.nodes for lane in plan.lanes) == [
        ("sim-vllm", "sim-sglang", "sim-vllm-h2"), ("vllm",)]
    assert plan.alone == ("llama", "gateway")
    everything = plan_passes(load_inventory(TESTBED), 2, ("llamacpp", "litellm", "vllm", "sim"))
    assert everything.lanes == () and len(everything.alone) == 6


def test_the_lanes_command_keeps_engines_alone_and_refuses_an_unknown_one() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED),
                                      "--alone", "llamacpp", "--alone", "litellm"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 4
    assert "--node llama,gateway -m 'not exclusive'    # alone, after the lanes" in lines[2]
    assert lines[3].endswith("-m exclusive    # alone, last")
    bad = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED), "--alone", "tgi"])
    assert bad.exit_code == 2 and "no node of" in bad.output
