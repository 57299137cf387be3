"""gateway_termination: the gateway itself is SIGKILLed under load (Docker's restart
policy brings it back). Unlike an upstream's failure, nothing routes around this one:
every user of the gateway is in the outage. Measures what they all see — detection by
monitoring, recovery (the proxy's start-up, then serving through it again), and the users
lost — against the gateway node's objectives (its ``slo``: no ``lost_max`` on the lab,
where every request in flight or arriving while the proxy is down is lost).

Only gateways (``node_kind("gateway")``); ``test_kill`` is the same fault on engine
nodes, so CI runs the experiment once per node.
"""

import pytest

from faultkit import Experiment


@pytest.mark.fault("kill")
@pytest.mark.node_kind("gateway")
async def test_gateway_termination(experiment: Experiment) -> None:
    await experiment.run_fault("kill", hold_s=0)
    verdict = experiment.check()
    assert verdict.passed, verdict.summary()
