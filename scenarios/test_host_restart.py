"""host_restart ("GPU node restart"): a whole Docker host goes away and comes back, with
every engine on it. Runs once per Docker host that is not this machine (the testbed's
second host); detection, recovery and loss are the node's objectives, and the run reports
how long the host's engine and each of its nodes took to come back.

How the host restarts is the operator's: ``FAULTKIT_HOST_RESTART_COMMAND`` (e.g. ``ssh
gpu-2 sudo systemctl reboot``); for the testbed's second host the default restarts its
container (testbed/host2.py)."""

from __future__ import annotations

import os

import pytest

from faultkit import Experiment

#: the testbed's second host and how it restarts (a power cut: no grace period)
TESTBED_HOST2 = "tcp://127.0.0.1:18100"
TESTBED_RESTART = "docker restart -t 0 faultkit-h2-docker"


def restart_command(docker_host: str) -> str | None:
    """How to restart the Docker host ``docker_host``: None for this machine's own engine,
    or when nothing says how."""
    if docker_host.startswith("unix://"):
        return None
    return os.environ.get("FAULTKIT_HOST_RESTART_COMMAND") or (
        TESTBED_RESTART if docker_host == TESTBED_HOST2 else None)


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.host_wide
@pytest.mark.per_docker_host
@pytest.mark.fault("host_restart")
async def test_host_restart(experiment: Experiment) -> None:
    docker = experiment.node.docker
    command = restart_command(docker.host) if docker is not None else None
    if command is None:
        pytest.skip("host_restart needs a Docker host that is not this machine, and "
                    "FAULTKIT_HOST_RESTART_COMMAND to restart it (the testbed's is known)")
    assert docker is not None  # a command was found for its host
    m = await experiment.run_fault("host_restart", hold_s=0, params={"command": command})
    result = experiment.fault_result
    print(f"host_restart {docker.host}: detection {m.detection_s} s, recovery {m.recovery_s} s, "
          f"lost {m.lost_total}; host down {result.get('host_down_s')} s, engine back "
          f"{result.get('engine_back_s')} s, nodes ready {result.get('nodes_ready_s')}")
    verdict = experiment.check(experiment.default_checks())
    assert verdict.passed, verdict.summary()
