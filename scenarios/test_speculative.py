"""speculative: roll a serving config that changes the node's speculative decoding onto it
under load, and judge speculation per workload class.

Each workload class — free text, extractive text (``faultkit.load.prompts``) — runs as a
closed loop of users on the candidate while it serves, and again on the node's own config
once the rollout has ended: same node, same background load — the node's declared
workload, since drafts are verified batch by batch and the rest of the traffic changes
every request's TPOT. Their per-request TPOTs are
compared class by class and for the mix (:mod:`slo.speculation`): speculation wins, loses,
or makes no difference within noise. The node's declared workload (inventory
``workload``) decides the verdict: the run FAILs when speculation serves that workload
slower. Acceptance (the engine's own counters, where it has them) explains a verdict and
never makes one. docs/slo.md, "Speculative decoding, per workload", states the rule.

The scenario pairs each node with its candidate configs whose ``speculative`` differs
from its current config's (``Inventory.speculation_change``). The rollout's own outage is
in the report, not in this verdict: whether a config rolls out safely is
``test_rollout``'s question. A candidate that never served, or a class with too few timed
requests on either side, leaves nothing to compare: INCONCLUSIVE.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from faultkit import EventKind, Experiment
from faultkit.experiment.candidate import runs_serving_config
from faultkit.experiment.speculation import SpeculationCheck
from slo.checks import Checks, check
from slo.types import CheckResult, Measurement

#: how long each class runs on each config, and each answer's length: 4 users in a closed
#: loop time some 30 requests a side on an idle simulator, and the 8 the rule needs while
#: the catalogue's other lanes share the machine
CLASS_SECONDS = 10.0
OUTPUT_TOKENS = 32


def speculation_suits_workload(spec: SpeculationCheck, served: list[bool]) -> Checks:
    """The node's declared workload is not served slower with the candidate's speculation."""
    workload = spec.node.workload
    name = "speculation_suits_the_declared_workload"
    expected = (f"the node's {workload} workload served no slower with speculative decoding "
                f"{spec.candidate_spec or 'off'} than with {spec.current_spec or 'none'}")

    def fn(m: Measurement) -> CheckResult:
        if not served or not served[0]:
            why = "the candidate did not serve (rolled back): there was nothing to compare"
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="not measured", why=why, inconclusive=True)
        verdict = spec.verdicts().get(workload)
        if verdict is None or verdict.ratio is None:
            why = (verdict.why if verdict is not None
                   else "the classes were not measured on both configs")
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="not compared", why=why, inconclusive=True)
        slower = verdict.outcome == "loses"
        return CheckResult(
            name=name, passed=not slower, expected=expected,
            observed=f"{workload}: {verdict.why}",
            why=(f"speculative decoding serves the node's {workload} workload slower: "
                 f"{verdict.why}") if slower else "as expected")

    return check(fn)


@pytest.mark.fault("rollout")
@pytest.mark.node_kind("engine")
async def test_speculative(experiment: Experiment, speculative_config: str) -> None:
    node, inventory = experiment.node, experiment.inventory
    change = inventory.speculation_change(node, speculative_config)
    assert change is not None, f"{speculative_config} does not change {node.name}'s speculation"

    def say(line: str) -> None:
        experiment.note(EventKind.SPECULATION_CLASS, line=line)

    spec = SpeculationCheck(node, CLASS_SECONDS, change.current, change.candidate, say,
                            output_tokens=OUTPUT_TOKENS)
    # the background load is the node's users as the inventory declares them: drafts are
    # verified batch by batch, so what the rest of the traffic is changes every request's TPOT
    experiment.load_profile = replace(experiment.load_profile, workload=node.workload)
    served: list[bool] = []

    async def with_candidate(exp: Experiment) -> dict[str, Any]:
        served.append(runs_serving_config(node, speculative_config))
        if served[0]:
            await spec.measure("candidate")
        return {}

    async def with_current(exp: Experiment) -> dict[str, Any]:
        if served and served[0]:
            await spec.measure("current")
        return {"speculation": spec.to_json()}  # the report's per-class table

    await experiment.run_fault("rollout", params={"config": speculative_config},
                               during=with_candidate, after_revert=with_current)
    verdict = experiment.check(speculation_suits_workload(spec, served))
    assert verdict.passed, verdict.summary()
