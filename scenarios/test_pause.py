"""pause: the engine hangs with its port open (docker pause) — requests hang, scrapes time
out — then resumes. Does monitoring see a hang that never closes a socket?

A node whose host's cgroup freezer cannot freeze its container (cgroup v1 and many
processes: "unable to freeze") is frozen the way its inventory chooses: ``pause_with:
sigstop`` stops every process of the container with SIGSTOP instead (the ``stall`` fault,
``whole=true``), and the report says which it was. faultkit never switches by itself."""

import pytest

from faultkit import Experiment


@pytest.mark.fault("pause")
async def test_pause(experiment: Experiment) -> None:
    if experiment.node.pause_with == "sigstop":
        await experiment.run_fault("stall", hold_s=8, params={"whole": True})
    else:
        await experiment.run_fault("pause", hold_s=8)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
