"""A gate across a pool (``faultkit gate --pool``): who may join, how the scenarios are
split, the merged JUnit file and exit code, and a node's share run alone."""

from __future__ import annotations

import asyncio
import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.gate.decision import merge_junit, read_junit
from faultkit.gate.order import ScenarioOrder
from faultkit.gate.pool import (
    SCENARIO_S,
    SOAK_OVERHEAD_S,
    combined_exit,
    expected_share_s,
    measured_seconds,
    pool_problems,
    scenario_key,
    scenario_weight,
    split_scenarios,
)
from faultkit.gate.scenarios import run_scenarios
from faultkit.inventory import load_inventory
from faultkit.model.gatefile import GateResult
from faultkit.runtime.progress import Progress
from reports.render import render_gate
from tests.paths import REPO
from tests.unit.faultkit.gate.test_gate_progress import _argv

LAB = REPO / "testbed" / "inventory.yaml"


def _ids(node: str) -> list[str]:
    return [
        f"scenarios/test_bad_input.py::test_bad_input[{node}]",
        f"scenarios/test_kill.py::test_kill[{node}]",
        f"scenarios/test_oom.py::test_oom[{node}-long-prefill]",
        f"scenarios/test_oom.py::test_oom[{node}-over-context]",
        f"scenarios/test_partition.py::test_partition[{node}-refuse]",
        f"scenarios/test_soak.py::test_soak[{node}]",
    ]


def test_scenario_key_is_the_same_on_every_node_even_when_one_name_contains_another() -> None:
    assert scenario_key("t.py::test_kill[sim-vllm]", "sim-vllm") == "t.py::test_kill[{node}]"
    assert (scenario_key("t.py::test_oom[sim-vllm-h2-long-prefill]", "sim-vllm-h2")
            == scenario_key("t.py::test_oom[sim-vllm-long-prefill]", "sim-vllm")
            == "t.py::test_oom[{node}-long-prefill]")


def test_split_runs_every_scenario_exactly_once_and_balances_by_length() -> None:
    split = split_scenarios({"a": _ids("a"), "b": _ids("b")}, soak_s=60)
    keys = [scenario_key(t, n) for n, ids in split.items() for t in ids]
    assert sorted(keys) == sorted(scenario_key(t, "a") for t in _ids("a"))  # once each
    # the soak (71 s) goes first, to the gate's own node; the five 16 s scenarios then go
    # to the other node, each to the node with less work so far: 64 s < 71 s at the fifth
    assert split["a"] == ["scenarios/test_soak.py::test_soak[a]"]
    assert split["b"] == [t for t in _ids("b") if "test_soak" not in t]
    load = {n: sum(scenario_weight(t, 60) for t in ids) for n, ids in split.items()}
    assert max(load.values()) - min(load.values()) <= 60 + SOAK_OVERHEAD_S


def test_the_long_scenarios_go_to_different_nodes_before_the_short_ones() -> None:
    """Four nodes, the gate's scenarios: the soak, then each partition, each onto a node
    of its own, and the short scenarios fill in around them — the longest share is the
    soak's, not a partition stacked on top of it."""
    ids = {n: [*_ids(n), f"scenarios/test_partition.py::test_partition[{n}-blackhole]",
               f"scenarios/test_kill.py::test_engine_death[{n}]"] for n in "abcd"}
    split = split_scenarios(ids, soak_s=30)
    assert split["a"] == ["scenarios/test_soak.py::test_soak[a]"]
    assert split["b"][-1].endswith("test_partition[b-refuse]")
    assert split["c"][-1].endswith("test_partition[c-blackhole]")
    load = {n: sum(scenario_weight(t, 30) for t in ids) for n, ids in split.items()}
    # nothing stacked on the soak: every share is shorter than the soak plus one scenario
    assert max(load.values()) < 30 + SOAK_OVERHEAD_S + min(SCENARIO_S.values()), load


def test_split_keeps_pytest_order_on_each_node_and_one_node_gets_everything() -> None:
    assert split_scenarios({"a": _ids("a")}, soak_s=30) == {"a": _ids("a")}
    split = split_scenarios({"a": _ids("a"), "b": _ids("b"), "c": _ids("c")}, soak_s=5)
    for node, ids in split.items():
        assert ids == [t for t in _ids(node) if t in ids]
    assert sum(len(ids) for ids in split.values()) == len(_ids("a"))


def test_a_scenario_only_one_node_has_goes_to_that_node() -> None:
    only_b = "scenarios/test_limits.py::test_limits[b]"
    split = split_scenarios({"a": ["x.py::t[a]"], "b": ["x.py::t[b]", only_b]}, soak_s=60)
    assert only_b in split["b"]
    assert len(split["a"]) + len(split["b"]) == 2


def _gate_dir(root: Path, stamp: str, cases: dict[str, tuple[float, str | None]]) -> None:
    """An earlier gate's directory with a junit.xml of ``{name: (seconds, failure tag)}``."""
    gate = root / f"gate-{stamp}-a-good"
    gate.mkdir(parents=True)
    suite = ET.Element("testsuite")
    for name, (seconds, outcome) in cases.items():
        case = ET.SubElement(suite, "testcase", name=name, time=str(seconds))
        if outcome:
            ET.SubElement(case, outcome)
    ET.ElementTree(suite).write(gate / "junit.xml")


def test_measured_seconds_take_each_nodes_newest_passed_run(tmp_path: Path) -> None:
    _gate_dir(tmp_path, "20261204T100000Z", {
        "test_partition[a-h2-refuse]": (30.0, None), "test_kill[a]": (99.0, None),
        "test_oom[a-long-prefill]": (14.0, None)})
    _gate_dir(tmp_path, "20261204T110000Z", {
        "test_kill[a]": (16.0, None), "test_partition[a-refuse]": (21.0, None),
        "test_oom[a-long-prefill]": (2.0, "failure"), "test_limits[a-h2]": (1.0, "skipped")})
    (tmp_path / "gate-20261204T120000Z-a-good").mkdir()  # interrupted: no junit.xml
    (tmp_path / "gate-20261204T120000Z-a-good" / "junit.xml").write_text("<not xml")
    found = measured_seconds(tmp_path, ["a", "a-h2"])
    assert found["a"] == {"test_kill[{node}]": 16.0, "test_partition[{node}-refuse]": 21.0,
                          "test_oom[{node}-long-prefill]": 14.0}  # the failed run ignored
    assert found["a-h2"] == {"test_partition[{node}-refuse]": 30.0}  # longest name wins
    assert measured_seconds(tmp_path / "nothing", ["a"]) == {"a": {}}


def test_a_node_measured_slow_at_a_scenario_is_spared_it() -> None:
    """A pool of 4 on the lab: every scenario took what it takes on a
    simulated node, but sim-vllm-h2's partition took 31 s (the second Docker host), 21 s
    here. The fixed weights gave that node a partition and the longest share (59 s); with
    the nodes' own durations from an earlier gate the partitions go elsewhere and the
    longest share is 48 s."""
    ids = {n: [*_ids(n), f"scenarios/test_partition.py::test_partition[{n}-blackhole]",
               f"scenarios/test_kill.py::test_engine_death[{n}]",
               f"scenarios/test_limits.py::test_limits[{n}]"] for n in "abcd"}
    lab = {"test_bad_input[{node}]": 14.0, "test_limits[{node}]": 13.0,
           "test_oom[{node}-long-prefill]": 14.0, "test_oom[{node}-over-context]": 14.0,
           "test_kill[{node}]": 16.0, "test_engine_death[{node}]": 17.0,
           "test_partition[{node}-refuse]": 21.0, "test_partition[{node}-blackhole]": 22.0}
    fixed = split_scenarios(ids, soak_s=30)
    slow_on = next(n for n in "bcd" if any("test_partition" in t for t in fixed[n]))
    measured = {n: dict(lab) for n in "abcd"}
    measured[slow_on].update({"test_partition[{node}-refuse]": 31.0,
                              "test_partition[{node}-blackhole]": 31.0})
    split = split_scenarios(ids, soak_s=30, measured=measured)
    assert not any("test_partition" in t for t in split[slow_on]), split[slow_on]
    before = max(expected_share_s(fixed[n], n, 30, measured) for n in "abcd")
    after = max(expected_share_s(split[n], n, 30, measured) for n in "abcd")
    assert (before, after) == (59.0, 48.0)
    keys = sorted(scenario_key(t, n) for n, share in split.items() for t in share)
    assert keys == sorted(scenario_key(t, "a") for t in ids["a"])  # still each once


def test_who_may_join_a_pool() -> None:
    inventory = load_inventory(LAB)
    node = inventory.node("sim-vllm")
    assert pool_problems(inventory, node, ["sim-vllm-h2"]) == []
    problems = pool_problems(inventory, node, ["sim-sglang", "llama", "sim-vllm", "nope"])
    assert any("sim-sglang" in p and "one engine" in p for p in problems)
    assert any(p.startswith("--pool llama:") and "one engine" in p for p in problems)
    assert any(p.startswith("--pool llama:") and "one config" in p for p in problems)
    assert any("sim-vllm: named twice" in p for p in problems)
    assert any(p.startswith("--pool nope:") and "no node named 'nope'" in p for p in problems)


def test_a_pool_node_that_forbids_the_rollout_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(LAB.read_text())
    for raw in data["nodes"]:
        if raw["name"] == "sim-vllm-h2":
            raw["faults"] = ["kill"]
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    inventory = load_inventory(path)
    problems = pool_problems(inventory, inventory.node("sim-vllm"), ["sim-vllm-h2"])
    assert problems == ["--pool sim-vllm-h2: the node does not allow the rollout fault "
                        "(protected, or 'rollout' missing from its faults allowlist)"]


@pytest.mark.parametrize("pool", [["sim-sglang"], ["sim-vllm"], ["nope"]])
def test_the_cli_refuses_a_bad_pool_with_exit_2_before_acting(
    pool: list[str], tmp_path: Path
) -> None:
    args = ["gate", "--inventory", str(LAB), "--node", "sim-vllm", "--config",
            "sim-vllm-good", "--out", str(tmp_path / "runs")]
    for name in pool:
        args += ["--pool", name]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert f"--pool {pool[0]}" in result.output
    assert not (tmp_path / "runs").exists()  # nothing written, nothing rolled out


def test_merged_junit_reads_as_every_part(tmp_path: Path) -> None:
    for name, cases in (("a", ["test_kill[a]"]), ("b", ["test_oom[b]", "test_soak[b]"])):
        suite = ET.Element("testsuite", name="pytest")
        for case in cases:
            ET.SubElement(suite, "testcase", name=case)
        root = ET.Element("testsuites")
        root.append(suite)
        ET.ElementTree(root).write(tmp_path / f"{name}.xml")
    merged = tmp_path / "junit.xml"
    merge_junit([tmp_path / "a.xml", tmp_path / "b.xml", tmp_path / "missing.xml"], merged)
    assert [o.name for o in read_junit(merged)] == ["test_kill[a]", "test_oom[b]",
                                                   "test_soak[b]"]


def test_combined_exit() -> None:
    assert combined_exit([0, 0]) == 0
    assert combined_exit([0, 1]) == 1
    assert combined_exit([1, 2, 0]) == 2  # interrupted somewhere: not a clean run
    assert combined_exit([0, 5]) == 5  # one node collected nothing
    assert combined_exit([]) == 5


def test_a_nodes_share_runs_only_its_scenarios_and_logs_to_a_file(tmp_path: Path) -> None:
    out = io.StringIO()
    progress = Progress(live=False, stream=out, tick_s=None)
    code = asyncio.run(run_scenarios(_argv(tmp_path), tmp_path, progress,
                                     only=["test_ok", "test_param[1]"]))
    assert code == 0
    assert out.getvalue().splitlines()[:3] == [
        "2 gate scenarios:", "  · test_ok", "  · test_param[1]"]
    assert "2 passed, 4 deselected" in (tmp_path / "pytest.log").read_text()


def test_gate_md_names_the_pool_and_each_nodes_share(tmp_path: Path) -> None:
    result = GateResult(node="a", candidate="cand", current="good", decision="pass",
                        why="all passed", pool=[
                            {"node": "a", "steady_state": {"checked": False},
                             "scenarios": ["x[a]", "y[a]"]},
                            {"node": "b", "steady_state": {"checked": False},
                             "scenarios": ["z[b]"], "expected_s": 41.2}])
    md = render_gate(GateResult.from_json(result.to_json()), tmp_path / "gate.md").read_text()
    assert md.splitlines()[0] == "# Gate: cand on a, b"
    assert ("| Node | a and its pool: b — each scenario ran once, on one of them: a 2, "
            "b 1 (~41 s expected) |") in md
    assert "## Steady state on a (no fault)" in md and "## Steady state on b (no fault)" in md


def test_a_single_node_gate_has_no_pool() -> None:
    assert GateResult.from_json({"node": "a"}).pool == []
    assert GateResult.from_json({"pool": "junk"}).pool == []


class _PoolWorld:
    """Fakes around a pool gate's run (rollouts, collection, scenario runs, the sweep, the
    load); the split, the merge and the decision are real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, collected: dict[str, list[str]]
                 ) -> None:
        from faultkit.gate import run as gate
        from faultkit.gate import steady as gate_steady
        from faultkit.gate.steady import SteadyState
        from faultkit.probes.health import ProbeResult
        from tests.unit.faultkit.gate.test_gate_steady_wiring import FakeRollout, slis

        self.log: list[str] = []
        self.collected = collected
        self.shares: dict[str, list[str]] = {}
        monkeypatch.setattr(gate, "make_fault", lambda _k, node, **kw: FakeRollout(self.log))
        monkeypatch.setattr(gate, "sweep", lambda **kw: [])
        monkeypatch.setattr(gate, "collect_gate_scenarios", self.collect)
        monkeypatch.setattr(gate, "run_scenarios", self.run_scenarios)

        async def probe(*_a: object, **_kw: object) -> ProbeResult:
            return ProbeResult(0.0, True, 200, "ok", 0.001)

        async def steady(*_args: object, side: str, config: str | None = None) -> SteadyState:
            return SteadyState(config, slis())

        monkeypatch.setattr(gate_steady, "probe", probe)
        monkeypatch.setattr(gate_steady, "run_steady_state", steady)

        async def context_limit_now(_node: object) -> tuple[int | None, str]:
            return None, "not read: a fake engine"

        monkeypatch.setattr(gate_steady, "context_limit_now", context_limit_now)

    async def collect(self, argv: list[str]) -> list[str]:
        return self.collected[argv[argv.index("--node") + 1]]

    async def run_scenarios(self, argv: list[str], out: Path, _progress: object = None, *,
                            only: list[str] | None = None, first: object = (),
                            stop_file: object = None) -> int:
        node = argv[argv.index("--node") + 1]
        self.shares[node] = list(only or [])
        cases = "".join(f'<testcase name="{name}"/>' for name in only or [])
        (out / "junit.xml").write_text(f"<testsuite>{cases}</testsuite>")
        return 0


async def test_a_pool_node_with_no_share_runs_nothing_and_the_gate_still_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """More nodes than scenarios: the node left without a share starts no scenario run
    (pytest would exit 5, "no tests collected", and fail the gate); both nodes are still
    rolled out, judged and restored."""
    from faultkit.gate import run as gate
    from faultkit.gate.steady import SteadyPhase
    from faultkit.load.profile import BACKGROUND_PROFILE

    inventory = load_inventory(LAB)
    world = _PoolWorld(monkeypatch, {
        "sim-vllm": ["scenarios/test_kill.py::test_kill[sim-vllm]"],
        "sim-vllm-h2": ["scenarios/test_kill.py::test_kill[sim-vllm-h2]"]})
    nodes = [inventory.node("sim-vllm"), inventory.node("sim-vllm-h2")]
    out = tmp_path / "gate"
    phases = [(n, SteadyPhase(n, inventory, 1.0, BACKGROUND_PROFILE, say=lambda _line: None,
                              runs_dir=out / "steady")) for n in nodes]
    out.mkdir()
    result = await gate.run_gate(inventory, phases, "sim-vllm-good", out, False, (),
                                  tmp_path / "no-earlier-runs", ScenarioOrder(), True)
    assert world.shares == {"sim-vllm": ["test_kill[sim-vllm]"]}
    assert result.decision == "pass", result.why
    assert [s["name"] for s in result.scenarios] == ["test_kill[sim-vllm]"]
    assert world.log.count("rollout") == 2 and world.log.count("rollback") == 2
    assert [p["scenarios"] for p in result.pool] == [
        ["scenarios/test_kill.py::test_kill[sim-vllm]"], []]


def test_dry_run_prints_the_split_with_earlier_gates_durations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gate --dry-run --pool``: each node's share as a gate would split it now, from the
    real catalogue's collection, with an earlier gate's durations: the second host's
    partitions measured at 31 s (the fixed weight is 25 s) go to the other node first,
    and the one left on the second host counts 31 s in its share."""
    from faultkit.gate.plan import print_split

    inventory = load_inventory(LAB)
    _gate_dir(tmp_path, "20261204T100000Z", {
        "test_partition[sim-vllm-h2-refuse]": (31.0, None),
        "test_partition[sim-vllm-h2-blackhole]": (31.0, None),
        "test_partition[sim-vllm-refuse]": (21.0, None),
        "test_partition[sim-vllm-blackhole]": (21.0, None)})
    pool = [inventory.node("sim-vllm"), inventory.node("sim-vllm-h2")]
    assert print_split(inventory, pool, "sim-vllm-good", ("--soak-s", "30"), 30.0,
                       tmp_path) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("the split across the pool (4 durations from earlier gates")
    shares = {line.split()[0]: line for line in lines[1:]}
    assert set(shares) == {"sim-vllm", "sim-vllm-h2"}
    # sim-vllm: engine_death 17, engine_stall 60, kill 16, an oom 14, a partition 21 = 128 s;
    # sim-vllm-h2: bad_input 13, limits 14, an oom 14, the overload 27, a partition 31, the
    # soak 30 + 11 = 140 s
    assert shares["sim-vllm"].count("test_partition[") == 1 and "(~128 s)" in shares["sim-vllm"]
    h2 = shares["sim-vllm-h2"]
    assert h2.count("test_partition[") == 1 and "(~140 s)" in h2, h2
    tests = [t for line in shares.values() for t in line.split(": ", 1)[1].split(", ")]
    assert len(tests) == 11  # the gate's eleven scenarios, each once


def test_a_collection_that_failed_after_the_gate_stopped_is_not_logged_at_exit() -> None:
    """The split's collection runs beside the steady state; when the gate stops there (a
    FAIL), nobody awaits it. Its error must not reach asyncio's 'exception was never
    retrieved' log — without ``_drop`` it does (the control)."""
    import gc

    from faultkit.gate import run as gate

    async def collect() -> None:
        raise RuntimeError("collection failed")

    def logged(drop: bool) -> list[str]:
        seen: list[str] = []

        async def main() -> None:
            asyncio.get_running_loop().set_exception_handler(
                lambda _loop, context: seen.append(str(context.get("message"))))
            task = asyncio.ensure_future(collect())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert task.done()
            if drop:
                gate._drop(task)
            del task
            gc.collect()

        asyncio.run(main())
        return seen

    assert logged(drop=False), "the control: an unretrieved error is logged"
    assert logged(drop=True) == []
