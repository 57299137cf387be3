"""memory_squeeze: the container's memory limit drops below its usage; the kernel OOM-kills
it and the restart policy brings it back (the revert restores the old limit)."""

import pytest

from faultkit import Experiment


@pytest.mark.fault("memory_squeeze")
async def test_memory_squeeze(experiment: Experiment) -> None:
    await experiment.run_fault("memory_squeeze", hold_s=6)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
