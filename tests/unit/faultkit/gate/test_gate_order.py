"""The gate's risk-first scenario order and its stop at the first scenario that does not
pass: which changes move which scenarios ahead (faultkit.gate.order), the scenario run's
reordering (the feed plugin's hook), the scenarios left unrun and how gate.json, the
decision and gate.md say so."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from faultkit.gate import feed
from faultkit.gate import run as gate
from faultkit.gate.decision import ScenarioOutcome, decide, not_run, read_junit
from faultkit.gate.order import (
    ScenarioOrder,
    config_changes,
    gate_order,
    ordered,
    scenario_order,
)
from faultkit.gate.scenarios import run_scenarios, scenario_args
from faultkit.gate.steady import SteadyPhase
from faultkit.inventory import load_inventory
from faultkit.inventory.settings import ServingConfig
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.model.gatefile import GateResult
from faultkit.rundir import GateDir
from faultkit.runtime.progress import Progress
from reports.render import render_gate
from tests.paths import REPO
from tests.unit.faultkit.gate.test_gate_steady_wiring import World

LAB = REPO / "testbed" / "inventory.yaml"
CATALOGUE = ["test_bad_input[n]", "test_engine_death[n]", "test_engine_stall[n]",
             "test_kill[n]", "test_limits[n]", "test_oom[n]", "test_partition[n-refuse]",
             "test_soak[n]"]


def config(*command: str, **fields: Any) -> ServingConfig:
    return ServingConfig(image=fields.pop("image", "img"), command=list(command), **fields)


# --------------------------------------------------------------------------- what a diff touches


def test_context_and_memory_flags_put_limits_oom_and_soak_first() -> None:
    """The testbed's OOM-prone config differs from the good one in its memory utilization
    and chunked prefill (the inventory's own YAML): limits, oom and soak run first."""
    inventory = load_inventory(LAB)
    order = gate_order(inventory, inventory.node("sim-vllm"), "sim-vllm-bad-oom")
    assert order.first == ("test_limits", "test_oom", "test_soak", "test_overload")
    assert set(order.touched["context, KV cache, batching or memory"]) == {
        "--gpu-memory-utilization", "--enable-chunked-prefill", "--no-enable-chunked-prefill"}
    assert not order.unknown
    assert "--gpu-memory-utilization" in order.why() and order.why().startswith(
        "test_limits, test_oom, test_soak, test_overload first")


def test_a_model_change_puts_the_kill_and_the_engine_death_after_the_memory_scenarios() -> None:
    """llama-bad-model points -m elsewhere and drops --cache-ram 0: both areas, in the
    table's order; single-dash flags keep their spelling."""
    inventory = load_inventory(LAB)
    order = gate_order(inventory, inventory.node("llama"), "llama-bad-model")
    assert order.first == ("test_limits", "test_oom", "test_soak", "test_overload",
                           "test_kill", "test_engine_death")
    assert order.touched["what starts and how it restarts"] == ("-m",)


def test_an_unknown_change_keeps_the_catalogues_order_and_says_why() -> None:
    before = config("python3", "-m", "engine", "--port", "8000")
    after = config("python3", "-m", "engine", "--port", "8000", "--leak-bytes", "262144",
                   env={"EXTRA": "1"})
    order = scenario_order(config_changes(before, after))
    assert order.first == () and order.unknown == ("--leak-bytes", "env EXTRA")
    assert order.why() == ("the catalogue's order: no change of the diff has a known risk "
                           "(--leak-bytes, env EXTRA)")
    assert ordered(CATALOGUE, order.first) == CATALOGUE


def test_configs_that_serve_alike_change_nothing() -> None:
    """The description and the harness's own fields are not how the node serves."""
    before = config("srv", "--port", "1", description="a", ready_timeout_s=30)
    after = config("srv", "--port", "1", description="b", ready_timeout_s=60)
    assert config_changes(before, after) == []
    assert scenario_order([]).why() == (
        "the catalogue's order: the configs do not differ in how they serve")


def test_flags_are_compared_by_value_whatever_their_spelling() -> None:
    """``--flag=value`` and ``--flag value`` are one flag; a negative number is a value, not
    a flag; ``python -m module`` is the entrypoint, not a ``-m`` flag."""
    before = config("python3", "-m", "engine", "--port=8000", "--offset", "-1", "--fast")
    after = config("python3", "-m", "engine", "--port", "8001", "--offset", "-1", "--fast")
    assert config_changes(before, after) == ["--port"]
    assert scenario_order(["--port"]).first == ("test_partition",)
    moved = config("python3", "-m", "other", "--port=8000", "--offset", "-1", "--fast")
    assert config_changes(before, moved) == ["entrypoint"]


def test_container_fields_fall_in_their_areas() -> None:
    before = config("srv", memory="256m", restart="on-failure")
    after = config("srv", memory="128m", restart="no", image="img2")
    order = scenario_order(config_changes(before, after))
    assert order.touched == {"context, KV cache, batching or memory": ("memory",),
                             "what starts and how it restarts": ("image", "restart")}
    assert order.first == ("test_limits", "test_oom", "test_soak", "test_overload",
                           "test_kill", "test_engine_death")


def test_an_unknown_current_config_counts_every_flag_as_changed() -> None:
    changes = config_changes(None, config("srv", "-c", "512", "--metrics"))
    assert changes == ["entrypoint", "-c", "--metrics"]


def test_ordered_moves_the_first_ahead_and_keeps_the_rest_in_order() -> None:
    first = ("test_limits", "test_oom", "test_soak")
    assert ordered(CATALOGUE, first) == [
        "test_limits[n]", "test_oom[n]", "test_soak[n]", "test_bad_input[n]",
        "test_engine_death[n]", "test_engine_stall[n]", "test_kill[n]",
        "test_partition[n-refuse]"]


# --------------------------------------------------------------------------- the scenario run


def _items(names: list[str]) -> list[Any]:
    return [SimpleNamespace(name=name) for name in names]


def test_the_feed_plugin_runs_the_first_scenarios_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(feed.ONLY_ENV, raising=False)
    monkeypatch.setenv(feed.ORDER_ENV, json.dumps(["test_soak", "test_kill"]))
    items = _items(CATALOGUE)
    feed.pytest_collection_modifyitems(SimpleNamespace(), items)  # type: ignore[arg-type]
    assert [i.name for i in items][:3] == ["test_soak[n]", "test_kill[n]", "test_bad_input[n]"]
    assert sorted(i.name for i in items) == sorted(CATALOGUE)


def test_a_pool_share_is_kept_and_ordered(monkeypatch: pytest.MonkeyPatch) -> None:
    deselected: list[Any] = []
    config_ = SimpleNamespace(hook=SimpleNamespace(
        pytest_deselected=lambda items: deselected.extend(items)))
    monkeypatch.setenv(feed.ONLY_ENV, json.dumps(["test_kill[n]", "test_oom[n]"]))
    monkeypatch.setenv(feed.ORDER_ENV, json.dumps(["test_oom"]))
    items = _items(CATALOGUE)
    feed.pytest_collection_modifyitems(config_, items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["test_oom[n]", "test_kill[n]"]
    assert len(deselected) == len(CATALOGUE) - 2


def test_the_feed_file_gives_the_collected_list(tmp_path: Path) -> None:
    path = tmp_path / "feed.jsonl"
    assert feed.collected_names(path) is None
    path.write_text('not json\n{"event": "collected", "names": ["a", "b"]}\n'
                    '{"event": "result", "name": "a"}\n{"event": "coll')
    assert feed.collected_names(path) == ["a", "b"]


def test_the_scenario_run_stops_at_its_first_failure_unless_full() -> None:
    args, stops = scenario_args(("-k", "kill"), soak_s=30.0, full=False)
    assert args == ("-x", "--soak-s", "30", "-k", "kill") and stops
    args, stops = scenario_args((), soak_s=60.0, full=True)
    assert args == ("--soak-s", "60") and not stops
    assert scenario_args(("-x",), soak_s=60.0, full=True)[1], "the user's own -x stops it"


# --------------------------------------------------------------------------- what was not run


def outcome(name: str, result: str = "PASS") -> ScenarioOutcome:
    return ScenarioOutcome(name=name, outcome=result, why="why",  # type: ignore[arg-type]
                           run_dir=None)


def test_the_scenarios_after_the_first_failure_are_listed_with_why() -> None:
    ran = [outcome("test_limits[n]", "FAIL")]
    left = not_run(["test_limits[n]", "test_oom[n]", "test_soak[n]"], ran, 1,
                   stopped_at="test_limits[n]")
    assert [n.name for n in left] == ["test_oom[n]", "test_soak[n]"]
    assert left[0].line() == ("test_oom[n]: not run — the decision was FAIL at test_limits[n]; "
                              "the gate stops at its first scenario that does not pass "
                              "(--full runs them all)")
    decision = decide(ran, 1, "cand", left)
    assert decision.decision == "fail"
    assert decision.why.startswith("1 FAIL of 1 gate scenarios, 2 not run: test_limits[n]")


def test_a_run_that_ended_early_fails_even_when_what_ran_passed() -> None:
    """Nothing failed, so no stop explains the scenarios left: a pass on part of the
    catalogue is no pass."""
    ran = [outcome("test_kill[n]")]
    left = not_run(["test_kill[n]", "test_oom[n]"], ran, 2, stopped_at=None)
    assert left[0].why == "the scenario run ended before it (pytest exit 2)"
    decision = decide(ran, 0, "cand", left)
    assert decision.decision == "fail" and "1 did not run" in decision.why
    assert decision.not_passed == (left[0].line(),)


async def test_gate_json_and_gate_md_carry_the_order_and_what_did_not_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Through ``_run_gate``: the order reaches the scenario run; the run's own list (its
    feed) against its JUnit file gives the scenarios not run; gate.json and gate.md say so."""
    world = World(monkeypatch, tmp_path)
    seen: dict[str, Any] = {}

    async def run_scenarios(argv: list[str], out: Path, _progress: object = None, *,
                            only: object = None, first: tuple[str, ...] = (),
                            stop_file: object = None) -> int:
        seen["first"], seen["argv"] = first, argv
        GateDir(out).feed_jsonl.write_text(json.dumps(
            {"event": "collected", "names": ["test_oom[n]", "test_kill[n]", "test_soak[n]"]})
            + "\n")
        GateDir(out).junit_xml.write_text(
            '<testsuite><testcase name="test_oom[n]"><failure message="engine died"/>'
            "</testcase></testsuite>")
        return 1

    monkeypatch.setattr(gate, "run_scenarios", run_scenarios)
    order = scenario_order(["--max-model-len"])
    node = world.inventory.node("n")
    steady = SteadyPhase(node, world.inventory, 0.0, BACKGROUND_PROFILE,
                         say=lambda _line: None, runs_dir=world.out / "steady")
    result = await gate.run_gate(world.inventory, [(node, steady)], "cand", world.out,
                                  False, (), world.out / "none", order, True)
    assert seen["first"] == ("test_limits", "test_oom", "test_soak", "test_overload")
    assert "--current-context-limit" not in seen["argv"], "the engine did not say"
    assert [n["name"] for n in result.not_run] == ["test_kill[n]", "test_soak[n]"]
    assert result.decision == "fail" and "2 not run" in str(result.why)
    assert result.order is not None and result.order["stop_at_first"] is True
    md = render_gate(GateResult.from_json(result.to_json()), world.out / "gate.md").read_text()
    md = md.replace("\\", "")  # the Markdown escapes of _ [ ] ( )
    assert "Order: test_limits, test_oom, test_soak, test_overload first: the diff touches" in md
    assert "Not run (2):" in md and "test_soak[n]: not run — the decision was FAIL" in md


def test_an_order_with_nothing_moved_is_the_catalogues() -> None:
    assert ScenarioOrder().to_json()["first"] == []


async def test_the_limits_probe_gets_the_current_configs_context_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Read before the rollout (the steady state off), given to the scenario run."""
    world = World(monkeypatch, tmp_path)
    world.context = 4096
    argvs: list[list[str]] = []

    async def run_scenarios(argv: list[str], out: Path, _progress: object = None, *,
                            only: object = None, first: tuple[str, ...] = (),
                            stop_file: object = None) -> int:
        argvs.append(argv)
        GateDir(out).junit_xml.write_text('<testsuite><testcase name="test_limits[n]"/>'
                                          "</testsuite>")
        return 0

    monkeypatch.setattr(gate, "run_scenarios", run_scenarios)
    node = world.inventory.node("n")
    steady = SteadyPhase(node, world.inventory, 0.0, BACKGROUND_PROFILE,
                         say=lambda _line: None, runs_dir=world.out / "steady")
    result = await gate.run_gate(world.inventory, [(node, steady)], "cand", world.out,
                                  False, ("-k", "limits"), world.out / "none", ScenarioOrder(),
                                  True)
    assert result.decision == "pass", result.why
    (argv,) = argvs
    at = argv.index("--current-context-limit")
    assert argv[at + 1] == "4096" and argv.index("-k") > at, argv


# --------------------------------------------------------------------------- real runs

_LANE_A = "def test_a_fails():\n    assert False\n"
_LANE_B = ("def test_b1():\n    pass\n\ndef test_b2():\n    pass\n\n"
           "def test_b3():\n    pass\n")


def _lane(tmp_path: Path, name: str, tests: str) -> tuple[list[str], Path]:
    """A pytest run of ``tests`` with the feed plugin, its output directory."""
    lane = tmp_path / name
    lane.mkdir()
    (lane / f"test_{name}.py").write_text(tests)
    argv = [sys.executable, "-m", "pytest", str(lane / f"test_{name}.py"), "-q",
            "-p", "no:cacheprovider", "-p", "faultkit.gate.feed", "-x",
            f"--junitxml={GateDir(lane).junit_xml}"]
    return argv, lane


def _quiet() -> Progress:
    return Progress(live=False, stream=io.StringIO(), tick_s=None)


def test_a_real_run_takes_the_order_it_is_given(tmp_path: Path) -> None:
    argv, lane = _lane(tmp_path, "b", _LANE_B)
    code = asyncio.run(run_scenarios(argv, lane, _quiet(), first=("test_b3", "test_b2")))
    assert code == 0
    assert feed.collected_names(GateDir(lane).feed_jsonl) == ["test_b3", "test_b2", "test_b1"]
    cases = [c.get("name") for c in ET.parse(GateDir(lane).junit_xml).getroot().iter("testcase")]
    assert cases == ["test_b3", "test_b2", "test_b1"]


def test_a_pool_node_stops_after_its_scenario_in_hand_once_another_failed(
    tmp_path: Path
) -> None:
    """Node A's first scenario fails and writes the shared file; node B, run after it,
    ends after its own first scenario (exit 1, as -x would), not cut short and not
    counted as failed; the scenarios it left are listed as not run because of A's FAIL."""
    stop = tmp_path / "pool-stop"
    argv_a, lane_a = _lane(tmp_path, "a", _LANE_A)
    argv_b, lane_b = _lane(tmp_path, "b", _LANE_B)
    assert asyncio.run(run_scenarios(argv_a, lane_a, _quiet(), stop_file=stop)) == 1
    assert stop.read_text() == "test_a_fails"
    assert asyncio.run(run_scenarios(argv_b, lane_b, _quiet(), stop_file=stop)) == 1
    ran = read_junit(GateDir(lane_b).junit_xml)
    assert [(o.name, o.outcome) for o in ran] == [("test_b1", "PASS")]
    left = not_run(feed.collected_names(GateDir(lane_b).feed_jsonl) or [], ran, 1,
                   stopped_at="test_a_fails")
    assert [n.name for n in left] == ["test_b2", "test_b3"]
    assert left[0].why.startswith("the decision was FAIL at test_a_fails")


_STALLS_ONCE = '''
import json
import os
import pathlib


def test_stalls(record_property):
    marker = pathlib.Path(os.environ["FIRST_DONE"])
    first = not marker.exists()
    marker.touch()
    run_dir = pathlib.Path(os.environ["RUNS"]) / ("first" if first else "second")
    run_dir.mkdir(parents=True)
    (run_dir / "measurement.json").write_text(json.dumps({"sent_late": 2 if first else 0}))
    record_property("faultkit_run_dir", str(run_dir))
    if first:
        record_property("faultkit_verdict", "INCONCLUSIVE")
        raise AssertionError("INCONCLUSIVE: the load client's event loop stalled")


def test_after():
    pass
'''


async def test_a_scenario_the_load_client_stalled_runs_again_with_what_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real pytest run stopped (-x) at a scenario INCONCLUSIVE for the client's stall
    (its measurement.json: requests sent late): the lane runs it again, once, with the
    scenario it left; the second outcomes stand in its JUnit file and the first is kept."""
    lane = tmp_path / "lane"
    lane.mkdir()
    (lane / "test_lane.py").write_text(_STALLS_ONCE)
    monkeypatch.setenv("FIRST_DONE", str(tmp_path / "first-done"))
    monkeypatch.setenv("RUNS", str(tmp_path / "runs"))

    def argv(junit: Path) -> list[str]:
        return [sys.executable, "-m", "pytest", str(lane / "test_lane.py"), "-q",
                "-p", "no:cacheprovider", "-p", "faultkit.gate.feed", "-x",
                f"--junitxml={junit}"]

    run = await gate._run_lane(argv, GateDir(lane).junit_xml, lane, _quiet(),
                               only=None, first=(), stop_file=None)
    code, reruns = run.code, run.reruns
    assert code == 0
    merged = read_junit(GateDir(lane).junit_xml)
    assert sorted((o.name, o.outcome) for o in merged) == [("test_after", "PASS"),
                                                           ("test_stalls", "PASS")]
    assert sorted((o.name, o.outcome) for o in run.outcomes) == sorted(
        (o.name, o.outcome) for o in merged), "the lane's outcomes are its JUnit file's"
    (rerun,) = reruns
    assert rerun["name"] == "test_stalls" and rerun["first"]["outcome"] == "INCONCLUSIVE"
    assert rerun["first"]["run_dir"].endswith("first")


def test_a_stalled_scenario_does_not_stop_the_pool(tmp_path: Path) -> None:
    """Its verdict is not in yet (it runs again): the pool's stop file stays unwritten."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "measurement.json").write_text(json.dumps(
        {"lost_by_class": {"client_stalled": 1}}))
    stop = tmp_path / "pool-stop"
    plugin = SimpleNamespace(stop_file=stop, session=None)
    report = SimpleNamespace(user_properties=[("faultkit_run_dir", str(run_dir))])
    feed._Feed._stop_with_the_pool(plugin, "test_x[n]", False, [report])  # type: ignore[arg-type, list-item]
    assert not stop.exists()
    (run_dir / "measurement.json").write_text(json.dumps({"lost_by_class": {}}))
    feed._Feed._stop_with_the_pool(plugin, "test_x[n]", False, [report])  # type: ignore[arg-type, list-item]
    assert stop.read_text() == "test_x[n]"


def test_gate_md_lists_the_scenarios_run_again(tmp_path: Path) -> None:
    first = outcome("test_kill[n]", "INCONCLUSIVE").to_json()
    data = {"node": "n", "candidate": "cand", "decision": "pass", "why": "all passed",
            "scenarios": [outcome("test_kill[n]").to_json()],
            "reruns": [{"name": "test_kill[n]", "why": "stalled", "first": first}]}
    md = render_gate(GateResult.from_json(data), tmp_path / "gate.md").read_text()
    md = md.replace("\\", "")
    assert "Run again, once (1): INCONCLUSIVE because the load client stalled" in md
    assert "- test_kill[n]: first run test_kill[n]: INCONCLUSIVE — missing evidence: why" in md
