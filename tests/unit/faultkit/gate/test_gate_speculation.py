"""The gate's speculative-decoding check (faultkit.experiment.speculation): when it runs, the
judgement on the node's declared workload, gate.md's table, and the whole check against two
real simulator nodes on loopback — one without speculation, one with it."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from faultkit.experiment.speculation import SpeculationCheck, speculation_check
from faultkit.gate.steady import SteadyPhase
from faultkit.inventory import Inventory, Node, parse_inventory
from faultkit.load.profile import BACKGROUND_PROFILE
from faultkit.rundir import GateResult
from reports import render_gate
from slo.speculation import ClassFigures
from tests.unit.simnode_helpers import Running, running_node

INVENTORY = """\
nodes:
  - name: n
    engine: sim
    personality: vllm
    base_url: http://127.0.0.1:9
    model: m
    serving_config: plain
    workload: {workload}
serving_configs:
  plain: {{image: img}}
  spec: {{image: img, speculative: "ngram, 4 draft tokens"}}
  spec5: {{image: img, speculative: "ngram, 5 draft tokens"}}
  plain2: {{image: img2}}
"""


def inventory(workload: str = "free") -> Inventory:
    return parse_inventory(INVENTORY.format(workload=workload), source="<test>")


def figures(workload: str, centre: float, seed: int) -> ClassFigures:
    rng = random.Random(seed)
    tpots = tuple(centre * rng.uniform(0.9, 1.1) for _ in range(40))
    return ClassFigures(workload, 40, 40, tpots, None)


def check_of(workload: str, current: dict[str, float], candidate: dict[str, float]
             ) -> SpeculationCheck:
    node = inventory(workload).node("n")
    check = SpeculationCheck(node, 5.0, None, "ngram, 4 draft tokens", say=lambda _: None)
    check.current = {w: figures(w, t, 1) for w, t in current.items()}
    check.candidate = {w: figures(w, t, 2) for w, t in candidate.items()}
    return check


def test_the_check_runs_only_when_the_candidate_changes_speculation() -> None:
    inv, say = inventory(), (lambda _: None)
    node = inv.node("n")
    assert speculation_check(inv, node, "plain2", 30.0, say) is None  # neither speculates
    on = speculation_check(inv, node, "spec", 30.0, say)
    assert on is not None
    assert (on.current_spec, on.candidate_spec) == (None, "ngram, 4 draft tokens")
    assert on.seconds == 15.0  # half the steady state per class and config
    assert speculation_check(inv, node, "spec", 0.0, say) is None  # --steady-s 0: off too
    speculating = node.model_copy(update={"serving_config": "spec"})
    assert speculation_check(inv, speculating, "spec5", 30.0, say) is not None  # changed
    assert speculation_check(inv, speculating, "spec", 30.0, say) is None
    off = speculation_check(inv, speculating, "plain", 30.0, say)
    assert off is not None and off.candidate_spec is None


SLOWER_ON_FREE = ({"free": 0.020, "extractive": 0.020}, {"free": 0.030, "extractive": 0.008})


def test_a_free_workload_served_slower_fails_the_gate() -> None:
    check = check_of("free", *SLOWER_ON_FREE)
    verdicts = check.verdicts()
    assert (verdicts["free"].outcome, verdicts["extractive"].outcome) == ("loses", "wins")
    why = check.failure()
    assert why is not None
    assert why.startswith("speculative decoding changes from 'off' to 'ngram, 4 draft tokens': "
                          "the node's free workload is served slower")


def test_an_extractive_workload_served_faster_passes() -> None:
    assert check_of("extractive", *SLOWER_ON_FREE).failure() is None


def test_a_mixed_workload_is_judged_on_both_classes_together() -> None:
    check = check_of("mixed", *SLOWER_ON_FREE)
    # slower on one class, much faster on the other: the union's median moves little
    assert check.verdicts()["mixed"].outcome != "loses" and check.failure() is None
    assert check_of("mixed", {"free": 0.02, "extractive": 0.02},
                    {"free": 0.04, "extractive": 0.03}).failure() is not None


def test_without_both_sides_nothing_is_judged() -> None:
    check = check_of("free", {}, {"free": 0.03, "extractive": 0.01})
    assert check.verdicts() == {} and check.failure() is None
    assert check.to_json()["classes"][0]["current"] is None


def test_gate_md_shows_the_classes_with_the_declared_one_marked(tmp_path: Path) -> None:
    check = check_of("free", *SLOWER_ON_FREE)
    phase = SteadyPhase(check.node, inventory("free"), 30.0, BACKGROUND_PROFILE,
                        say=lambda _: None, runs_dir=tmp_path / "steady", speculation=check)
    data: dict[str, Any] = {
        "node": "n", "candidate": "spec", "current": "plain", "decision": "fail",
        "why": check.failure(), "scenarios": [], "steady_state": phase.to_json()}
    md = render_gate(GateResult.from_json(data), tmp_path / "gate.md").read_text()
    assert "### Speculative decoding: off → ngram, 4 draft tokens" in md
    rows = [line for line in md.splitlines() if line.startswith("| free") or
            line.startswith("| extractive") or line.startswith("| mixed")]
    assert rows[0].startswith("| free (declared) | 19.") and "| **slower**: TPOT ×1.5" in rows[0]
    assert "| faster: TPOT ×0.4" in rows[1]
    assert rows[2].startswith("| mixed | — | — |")


@dataclass
class Pair:
    without: Running
    with_spec: Running


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[Pair]:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    async with running_node(tmp_path / "a", speed=2.0) as a, \
            running_node(tmp_path / "b", speed=2.0, num_speculative_tokens=4) as b:
        yield Pair(a, b)


def _at(node: Node, url: str) -> Node:
    return node.model_copy(update={"base_url": url, "model": "sim-model"})


async def test_the_check_against_real_simulators(nodes: Pair) -> None:
    """The current config without speculation, the candidate with it: the extractive class
    served faster and the free one not (how much slower free text is, is a timing claim:
    bench/speculative.py), each measured over loopback, and the acceptance read from the
    candidate's own counters. The declared free workload is then judged on its own class."""
    node = inventory("free").node("n")
    lines: list[str] = []
    check = SpeculationCheck(_at(node, nodes.without.url), 3.0, None, "ngram, 4 draft tokens",
                             say=lines.append)
    await check.measure("current")
    check.node = _at(node, nodes.with_spec.url)  # the rollout
    await check.measure("candidate")
    verdicts = check.verdicts()
    assert verdicts["extractive"].outcome == "wins", verdicts["extractive"].why
    assert verdicts["free"].outcome != "wins", verdicts["free"].why
    free, extractive_ratio = verdicts["free"].ratio, verdicts["extractive"].ratio
    assert free is not None and extractive_ratio is not None and free > 2 * extractive_ratio
    assert check.current["free"].acceptance_rate is None  # no counters without speculation
    extractive = check.candidate["extractive"].acceptance_rate
    assert extractive is not None and extractive > 0.5
    assert (check.failure() is not None) == (verdicts["free"].outcome == "loses")
    assert len(lines) == 4 and lines[0].startswith("speculation check, current, free: ")
