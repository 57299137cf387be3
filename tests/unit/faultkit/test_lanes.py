"""faultkit.lanes: which nodes may be tested side by side, and how the lanes are balanced."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.inventory import Inventory, load_inventory, parse_inventory
from faultkit.lanes import (
    FollowPass,
    Lane,
    LanePlan,
    node_groups,
    plan_lanes,
    plan_passes,
    run_side_by_side,
)
from tests.paths import REPO

TESTBED = REPO / "testbed" / "inventory.yaml"


def _inventory(nodes: str) -> Inventory:
    return parse_inventory(
        "prometheus: {url: http://127.0.0.1:19090}\nnodes:\n" + nodes, source="test"
    )


def _engine(name: str, engine: str = "sim", port: int = 1, host: str | None = None) -> str:
    personality = "\n    personality: vllm" if engine == "sim" else ""
    docker = f"    docker: {{host: '{host}', container: c-{name}}}\n" if host else ""
    return (f"  - name: {name}\n    engine: {engine}{personality}\n"
            f"    base_url: http://127.0.0.1:{port}\n    model: m\n{docker}")


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


def test_the_lanes_command_prints_the_lanes_then_the_gateway_after_its_upstreams() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == 4
    # sim-vllm-h2's host is shared with nothing, but vllm's is: no host-wide scenario here
    assert "--node sim-vllm-h2,vllm -m 'not exclusive'    # lane 1, weight 2.45" in lines[0]
    assert "--node llama,sim-vllm,sim-sglang -m 'not exclusive'    # lane 2" in lines[1]
    assert lines[2].endswith("--node gateway -m 'not exclusive'    # after lane 2 (its upstreams)")
    assert lines[3].endswith("-m exclusive    # alone, last")


def test_the_lanes_command_refuses_zero_lanes_with_exit_2() -> None:
    result = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED), "--lanes", "0"])
    assert result.exit_code == 2


def test_logs_without_run_is_refused_with_exit_2_and_nothing_written(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    result = CliRunner().invoke(cli, ["lanes", "--inventory", str(TESTBED), "--logs", str(logs)])
    assert result.exit_code == 2 and "--logs only says where --run writes" in result.output
    assert not logs.exists()


def test_a_gateway_follows_the_lanes_of_its_upstreams_only() -> None:
    inv = _inventory(_engine("a", port=1) + _engine("b", port=2) + _engine("c", port=3)
                     + _gateway("gw", ["a", "c"]))
    plan = plan_passes(inv, 3)
    assert sorted(lane.nodes for lane in plan.lanes) == [("a",), ("b",), ("c",)]
    lane_of = {lane.nodes[0]: i for i, lane in enumerate(plan.lanes)}
    assert plan.followers == (FollowPass(("gw",), tuple(sorted((lane_of["a"], lane_of["c"])))),)
    assert plan.alone == ()


def test_gateways_sharing_an_upstream_follow_as_one_pass_and_others_apart() -> None:
    inv = _inventory(_engine("a", port=1) + _engine("b", port=2) + _engine("c", port=3)
                     + _gateway("g1", ["a"]) + _gateway("g2", ["a", "b"])
                     + _gateway("g3", ["c"]))
    plan = plan_passes(inv, 3)
    assert sorted(f.nodes for f in plan.followers) == [("g1", "g2"), ("g3",)]
    lane_of = {lane.nodes[0]: i for i, lane in enumerate(plan.lanes)}
    by_nodes = {f.nodes: f.after for f in plan.followers}
    assert by_nodes[("g1", "g2")] == tuple(sorted((lane_of["a"], lane_of["b"])))
    assert by_nodes[("g3",)] == (lane_of["c"],)


def test_a_gateway_whose_upstreams_run_alone_waits_for_no_lane() -> None:
    inv = _inventory(_engine("a", "vllm", 1) + _engine("b", port=2) + _gateway("gw", ["a"]))
    plan = plan_passes(inv, 2, ("vllm",))
    assert plan.lanes[0].nodes == ("b",) and plan.alone == ("a",)
    assert plan.followers == (FollowPass(("gw",), ()),)


def test_five_lanes_run_every_engine_in_a_lane_and_the_gateway_after_its_upstreams() -> None:
    """`faultkit lanes --lanes 5`, measured on the lab (docs/ci.md)."""
    plan = plan_passes(load_inventory(TESTBED), 5)
    assert sorted(lane.nodes for lane in plan.lanes) == [
        ("llama",), ("sim-sglang",), ("sim-vllm",), ("sim-vllm-h2",), ("vllm",)]
    assert plan.alone == ()
    [gateway] = plan.followers
    assert gateway.nodes == ("gateway",)
    assert sorted(plan.lanes[i].nodes[0] for i in gateway.after) == [
        "llama", "sim-sglang", "sim-vllm"]


def test_ci_runs_every_engine_node_in_a_lane_and_the_gateway_after_its_upstreams() -> None:
    """What the e2e suite runs (docs/ci.md): five lanes, vLLM's first, and the gateway as
    soon as the lanes of its three upstreams have ended — beside vLLM's, which is why the
    lab's gateway configs carry a CPU weight above an engine's (docs/ci.md)."""
    from tests.e2e.scenario_suite import ALONE_ENGINES, SCENARIO_LANES

    inventory = load_inventory(TESTBED)
    plan = plan_passes(inventory, SCENARIO_LANES, ALONE_ENGINES)
    assert sorted(lane.nodes for lane in plan.lanes) == [
        ("llama",), ("sim-sglang",), ("sim-vllm",), ("sim-vllm-h2",), ("vllm",)]
    assert plan.lanes[0].nodes == ("vllm",)  # the heaviest starts first
    [gateway] = plan.followers
    assert plan.alone == () and gateway.nodes == ("gateway",)
    assert sorted(plan.lanes[i].nodes[0] for i in gateway.after) == [
        "llama", "sim-sglang", "sim-vllm"]
    weights = {inventory.serving_config(name).cpu_shares
               for name in inventory.node("gateway").candidate_configs}
    assert weights == {8192}, weights  # every config a rollout may bring in keeps it


def test_engines_kept_alone_leave_the_lanes_and_take_their_gateway_out_of_following() -> None:
    plan = plan_passes(load_inventory(TESTBED), 2, ("llamacpp", "litellm"))
    assert sorted(lane.nodes for lane in plan.lanes) == [
        ("sim-vllm", "sim-sglang"), ("sim-vllm-h2", "vllm")]
    assert plan.alone == ("llama", "gateway") and plan.followers == ()
    everything = plan_passes(load_inventory(TESTBED), 2, ("llamacpp", "litellm", "vllm", "sim"))
    assert everything.lanes == () and len(everything.alone) == 6


def test_a_lane_holding_every_node_of_its_hosts_runs_their_host_wide_scenarios() -> None:
    one, two, three = "tcp://10.0.0.1:2375", "tcp://10.0.0.2:2375", "tcp://10.0.0.3:2375"
    inv = _inventory(_engine("a1", port=1, host=one) + _engine("a2", port=2, host=one)
                     + _engine("b", port=3, host=two) + _engine("c", port=4, host=three))
    by_nodes = {lane.nodes: lane for lane in plan_passes(inv, 4).lanes}
    # a1 and a2 share a host but not a lane: a restart of it would show in both
    assert by_nodes[("a1",)].host_wide == () and by_nodes[("a2",)].host_wide == ()
    assert by_nodes[("a1",)].mark_expression() == "not exclusive"
    assert by_nodes[("b",)].host_wide == ("b",)
    assert by_nodes[("b",)].mark_expression() == "not exclusive or host_wide"
    plan = plan_passes(inv, 4)
    assert plan.exclusive_keywords() == "not (host_wide and ([b] or [c]))"
    # one lane for everything: it holds each host whole, and names each host's first node
    [whole] = plan_passes(inv, 1).lanes
    assert whole.host_wide == ("a1", "b", "c")


def test_a_host_with_a_node_kept_alone_is_never_whole_in_a_lane() -> None:
    one = "tcp://10.0.0.1:2375"
    inv = _inventory(_engine("a", "vllm", 1, host=one) + _engine("b", port=2, host=one))
    plan = plan_passes(inv, 2, ("vllm",))
    assert plan.lanes[0].nodes == ("b",) and plan.lanes[0].host_wide == ()
    assert plan.exclusive_keywords() is None


def test_ci_runs_the_second_hosts_restarts_in_its_lane_and_the_rest_last() -> None:
    from tests.e2e.scenario_suite import ALONE_ENGINES, SCENARIO_LANES

    plan = plan_passes(load_inventory(TESTBED), SCENARIO_LANES, ALONE_ENGINES)
    assert [lane.host_wide for lane in plan.lanes if lane.host_wide] == [("sim-vllm-h2",)]
    assert plan.exclusive_keywords() == "not (host_wide and ([sim-vllm-h2]))"


def _lanes(*nodes: str) -> tuple[Lane, ...]:
    return tuple(Lane((n,), 1.0) for n in nodes)


def test_a_follower_starts_when_its_lanes_end_while_another_lane_still_runs() -> None:
    """Lane ``slow`` shares nothing with the gateway: it only ends once the follower has
    started — a runner that waited for every lane would never get there (and time out)."""
    plan = LanePlan(lanes=_lanes("up", "slow"), alone=(), followers=(FollowPass(("gw",), (0,)),))
    follower_started = threading.Event()
    ended: dict[str, float] = {}
    started: dict[str, float] = {}

    def run(label: str, nodes: str, marks: str) -> str:
        assert marks == "not exclusive"
        started[nodes] = time.monotonic()
        if nodes == "gw":
            follower_started.set()
        elif nodes == "slow":
            assert follower_started.wait(10), "the follower waited for an unrelated lane"
        else:
            time.sleep(0.05)
        ended[nodes] = time.monotonic()
        return f"{label}:{nodes}"

    results = run_side_by_side(plan, run, stagger_s=0)
    assert results == [("lane-1", "lane-1:up"), ("lane-2", "lane-2:slow"),
                       ("after-1", "after-1:gw")]
    assert started["gw"] >= ended["up"]
    assert ended["slow"] >= started["gw"]


def test_a_follower_still_runs_when_its_lane_failed() -> None:
    plan = LanePlan(lanes=_lanes("up"), alone=(), followers=(FollowPass(("gw",), (0,)),))
    ran: list[str] = []

    def run(label: str, nodes: str, marks: str) -> str:
        ran.append(nodes)
        if nodes == "up":
            raise RuntimeError("lane crashed")
        return nodes

    with pytest.raises(RuntimeError, match="lane crashed"):
        run_side_by_side(plan, run, stagger_s=0)
    assert ran == ["up", "gw"]


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


def test_lanes_start_staggered_heaviest_first() -> None:
    plan = LanePlan(lanes=_lanes("a", "b", "c"), alone=())
    started: dict[str, float] = {}

    def run(label: str, nodes: str, marks: str) -> None:
        started[nodes] = time.monotonic()

    run_side_by_side(plan, run, stagger_s=0.2)
    assert started["a"] < started["b"] < started["c"]
    assert started["c"] - started["a"] >= 0.4
