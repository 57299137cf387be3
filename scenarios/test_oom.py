"""oom: oversized context and long prefill under load.

Two waves of requests go to the node while background load runs: prompts that fit the
context but need a long prefill, then prompts over the context. A healthy serving config
answers every one with a success or a clean 4xx and keeps serving; an OOM-prone one
crashes (CUDA OOM on prefill, or the kernel's OOM killer) — the scenario fails and the
incident report carries the OOM diagnosis.
"""

import pytest

from faultkit.plugin import Experiment
from scenarios._expect import fault_result, node_not_crashed
from slo.checks import lost_at_most


@pytest.mark.gate
@pytest.mark.fault("oversized_context")
async def test_oom(experiment: Experiment) -> None:
    await experiment.run_fault(
        "oversized_context",
        params={"prompt_tokens": [3000, 9000], "requests": 4, "concurrency": 2},
        hold_s=0,
    )
    verdict = experiment.check(
        node_not_crashed(experiment)
        & lost_at_most(0)
        & fault_result(experiment, "clean_answers", "every oversized request answered 2xx or clean 4xx",
                       lambda v: v == 0, "unclean")
    )
    assert verdict.passed, verdict.summary()
