"""kill: the engine process dies (SIGKILL from the host) under load; Docker's restart policy
brings it back. Measures detection, recovery and the requests in flight that were lost.

Engine nodes only: a gateway's own death is ``test_gateway_termination`` (the same
experiment, named for what it is and judged with what a gateway's users see)."""

import pytest

from faultkit import Experiment


@pytest.mark.gate
@pytest.mark.fault("kill")
@pytest.mark.node_kind("engine")
async def test_kill(experiment: Experiment) -> None:
    await experiment.run_fault("kill", hold_s=0)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
