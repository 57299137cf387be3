"""oom: long prefills and oversized contexts under load.

Requests with very long prompts go to the node while background load runs: ``long-prefill``
prompts (3,000 tokens: legal on a 4k-context GPU config, over the context of small ones)
and ``over-context`` prompts (16,384 tokens: over every testbed context). A healthy serving
config answers each with a success or a clean 4xx and keeps serving. An OOM-prone one
crashes (CUDA OOM on prefill, or the kernel's OOM killer): the scenario fails and the
incident report carries the OOM diagnosis.
"""

import pytest

from faultkit import Experiment
from scenarios._expect import node_not_crashed
from slo.checks import Checks, check, lost_at_most
from slo.types import CheckResult, Measurement


def answered_cleanly(experiment: Experiment) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        outcomes: dict[str, int] = experiment.fault_result.get("by_outcome") or {}
        unclean = {k: v for k, v in outcomes.items() if k not in ("ok", "http_4xx")}
        issued = experiment.fault_result.get("issued", 0)
        return CheckResult(
            name="long_prompts_answered_cleanly",
            passed=issued > 0 and not unclean,
            expected="every long prompt answered 2xx or a clean 4xx",
            observed=f"{issued} sent: {outcomes or 'none'}",
            why="clean answers" if not unclean else f"unclean answers: {unclean}",
        )

    return check(fn)


@pytest.mark.gate
@pytest.mark.fault("oversized_context")
@pytest.mark.parametrize("prompt_tokens", [3000, 16384], ids=["long-prefill", "over-context"])
async def test_oom(experiment: Experiment, prompt_tokens: int) -> None:
    await experiment.run_fault(
        "oversized_context",
        hold_s=6,
        params={"input_tokens": prompt_tokens, "requests": 4, "concurrency": 2},
    )
    verdict = experiment.check(
        answered_cleanly(experiment) & node_not_crashed(experiment) & lost_at_most(0)
    )
    assert verdict.passed, verdict.summary()
