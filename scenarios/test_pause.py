"""pause: the engine hangs with its port open (docker pause) — requests hang, scrapes time
out — then resumes. Does monitoring see a hang that never closes a socket?"""

import pytest

from faultkit.plugin import Experiment


@pytest.mark.fault("pause")
async def test_pause(experiment: Experiment) -> None:
    await experiment.run_fault("pause", hold_s=8)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
