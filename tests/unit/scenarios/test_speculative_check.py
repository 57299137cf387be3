"""test_speculative's check: the node's declared workload decides — FAIL when speculation
serves it slower, PASS otherwise — and a run with nothing to compare is INCONCLUSIVE."""

from __future__ import annotations

import random

from faultkit.experiment.speculation import SpeculationCheck
from faultkit.inventory import parse_inventory
from scenarios.test_speculative import speculation_suits_workload
from slo.checks import judge
from slo.speculation import ClassFigures
from slo.types import Measurement

M = Measurement(node="n", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
INVENTORY = """\
nodes:
  - {{name: n, engine: sim, personality: vllm, base_url: "http://127.0.0.1:9", model: m,
     serving_config: plain, workload: {workload}}}
serving_configs:
  plain: {{image: img}}
  spec: {{image: img, speculative: "ngram, 4 draft tokens"}}
"""
#: TPOT p50 (s) on the current config and the candidate: free text slower, extractive faster
CURRENT = {"free": 0.020, "extractive": 0.020}
CANDIDATE = {"free": 0.030, "extractive": 0.008}


def _spec(workload: str, requests: int = 30) -> SpeculationCheck:
    node = parse_inventory(INVENTORY.format(workload=workload), source="<t>").node("n")
    spec = SpeculationCheck(node, 6.0, None, "ngram, 4 draft tokens", say=lambda _: None)

    def figures(w: str, centre: float, seed: int) -> ClassFigures:
        rng = random.Random(seed)
        tpots = tuple(centre * rng.uniform(0.9, 1.1) for _ in range(requests))
        return ClassFigures(w, requests, requests, tpots, None)

    spec.current = {w: figures(w, t, 1) for w, t in CURRENT.items()}
    spec.candidate = {w: figures(w, t, 2) for w, t in CANDIDATE.items()}
    return spec


def _outcome(spec: SpeculationCheck, served: list[bool]) -> str:
    return judge(M, speculation_suits_workload(spec, served)).outcome


def test_the_declared_workload_decides() -> None:
    assert _outcome(_spec("extractive"), [True]) == "PASS"
    failed = judge(M, speculation_suits_workload(_spec("free"), [True]))
    assert failed.outcome == "FAIL"
    (result,) = failed.failures
    assert "serves the node's free workload slower" in result.why and "×1.5" in result.why


def test_nothing_to_compare_is_inconclusive_never_a_pass() -> None:
    assert _outcome(_spec("free"), [False]) == "INCONCLUSIVE"  # the candidate never served
    assert _outcome(_spec("free"), []) == "INCONCLUSIVE"  # the rollout step never ran
    assert _outcome(_spec("extractive", requests=5), [True]) == "INCONCLUSIVE"  # too few
    unmeasured = _spec("extractive")
    unmeasured.current = {}
    assert _outcome(unmeasured, [True]) == "INCONCLUSIVE"
