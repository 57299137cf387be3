"""limits: the node's own context limit, probed while real traffic runs.

The limit is read from the engine — ``/v1/models`` ``max_model_len`` (vLLM, SGLang, the
simulator), llama.cpp's ``/props`` ``n_ctx`` of one slot — or the inventory's
``context_limit``. Prompts at about 50 %, 90 % and 100 % of it (minus the output) go out
at the node's concurrency (llama.cpp's slots, the inventory's ``max_concurrency``, else
2), then one prompt just over it (:mod:`faultkit.context_probe`). Every prompt inside the
limit must be answered in full and the one over it cleanly rejected (4xx), and the node
must not crash nor its users notice. The cliff sits exactly at the configured maximum, so
a config whose memory holds short prompts but not long ones fails here, whatever its
``max_model_len`` is.
"""

from __future__ import annotations

from typing import Any

import pytest

from faultkit.context_probe import ProbeNotPossible, ProbeResult, prepare_probe, run_probe
from faultkit.inventory import Node
from faultkit.plugin import Experiment
from scenarios._expect import node_not_crashed
from slo.checks import Checks, check, lost_at_most
from slo.types import CheckResult, Measurement


def steps_answered(probe: list[ProbeResult], within: bool) -> Checks:
    name, expected = (("prompts_within_limit_answered",
                       "every prompt at 50/90/100 % of the limit answered in full")
                      if within else
                      ("prompt_over_limit_rejected_cleanly",
                       "the prompt over the limit answered with a clean 4xx"))

    def fn(m: Measurement) -> CheckResult:
        if not probe:  # the action raised before it returned: nothing to judge
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="no probe result", why="the probe did not run",
                               inconclusive=True)
        steps = [s for s in probe[0].steps if s.step.within is within]
        problems = [p for s in steps for p in s.problems]
        observed = "; ".join(f"{s.step.name}: {s.outcomes or 'none'}" for s in steps)
        return CheckResult(name=name, passed=bool(steps) and not problems, expected=expected,
                           observed=observed or "no step ran",
                           why=problems[0] if problems else "as expected")

    return check(fn)


@pytest.mark.gate
@pytest.mark.fault("context_limits")
@pytest.mark.node_kind("engine")
async def test_limits(experiment: Experiment, node: Node) -> None:
    try:
        plan = await prepare_probe(node, concurrency=node.max_concurrency)
    except ProbeNotPossible as exc:
        raise experiment.not_judgeable(str(exc)) from None
    probe: list[ProbeResult] = []

    async def action(exp: Experiment) -> dict[str, Any]:
        probe.append(await run_probe(exp.node, plan))
        return probe[0].to_json()

    steps = ", ".join(f"{s.name} ~{s.planned_tokens} tokens x{s.requests}" for s in plan.steps)
    await experiment.run_action(
        "context_limits", action,
        describe=f"prompts sized to the context limit {plan.limit.tokens} "
                 f"({plan.limit.source}): {steps}",
        params={"context_limit": plan.limit.tokens, "concurrency": plan.concurrency},
    )
    verdict = experiment.check(
        steps_answered(probe, within=True) & steps_answered(probe, within=False)
        & node_not_crashed(experiment) & lost_at_most(0)
    )
    assert verdict.passed, verdict.summary()
