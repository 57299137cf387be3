"""kill: the engine process dies (SIGKILL from the host) under load; Docker's restart policy
brings it back. Measures detection, recovery and the requests in flight that were lost."""

import pytest

from faultkit.plugin import Experiment


@pytest.mark.gate
@pytest.mark.fault("kill")
async def test_kill(experiment: Experiment) -> None:
    await experiment.run_fault("kill", hold_s=0)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
