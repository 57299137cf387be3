"""engine death: the engine's worker process dies *inside* its container under load (vLLM's
engine core, llama-server under docker-init, the simulator), and only the node's own
supervision may bring it back: its restart policy, its entrypoint. A node whose engine dies
and stays down — exit 0 under ``on-failure``, a policy ``no`` — fails with that finding
(``never_restarted``); the harness starting it afterwards is not a recovery."""

import pytest

from faultkit import Experiment, Node
from scenarios._expect import engine_pattern, fault_result


@pytest.mark.gate
@pytest.mark.fault("kill_process")
@pytest.mark.node_kind("engine")
async def test_engine_death(experiment: Experiment, node: Node) -> None:
    await experiment.run_fault("kill_process", hold_s=0, params={"match": engine_pattern(node)})
    came_back = fault_result(
        experiment, "restarted_by_itself", "the node's own supervision brought the engine back",
        lambda finding: finding is None, "never_restarted")
    verdict = experiment.check(experiment.default_checks() & came_back)
    assert verdict.passed, verdict.summary()
