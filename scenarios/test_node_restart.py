"""node_restart: the inference containers on the node's Docker host (every inventory node
there) restart at once, as after a reboot of a GPU box; other containers on the host
(Prometheus) keep running. Runs once per Docker host."""

import pytest

from faultkit import Experiment


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.host_wide
@pytest.mark.per_docker_host
@pytest.mark.fault("node_restart")
async def test_node_restart(experiment: Experiment) -> None:
    await experiment.run_fault("node_restart", hold_s=0)
    verdict = experiment.check(experiment.default_checks())
    assert verdict.passed, verdict.summary()
