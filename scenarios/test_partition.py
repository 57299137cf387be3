"""partition: the node is cut off from the network. ``refuse`` disconnects its container
(clients are refused at once); ``blackhole`` drops every packet (clients time out)."""

import pytest

from faultkit import Experiment


@pytest.mark.gate
@pytest.mark.fault("partition")
@pytest.mark.parametrize("mode", ["refuse", "blackhole"])
async def test_partition(experiment: Experiment, mode: str) -> None:
    await experiment.run_fault("partition", hold_s=8, params={"mode": mode})
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
