"""rollout: roll each candidate serving config onto its node under load.

The rollout procedure is what is on trial: a candidate must either come up and serve, or
be detected as failed and rolled back to the previous config without a human — with
service restored within the node's recovery objective. A node left broken, or a failure
that needed a human, fails the scenario. Which of the two happened is in the report
(gates judge the config itself: ``faultkit gate``).

Engine nodes only: a gateway's candidates are ``test_gateway_rollout``, which also fails
an upstream under each one (a gateway config is judged by how its users fare then).
"""

import pytest

from faultkit import Experiment
from scenarios._expect import rolled_back as rolled_back_words
from slo.checks import Checks, check, recovered_within
from slo.types import CheckResult, Measurement


def rollout_safe(experiment: Experiment, config: str) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        result = experiment.fault_result
        rolled_back = result.get("rolled_back")
        if rolled_back is False:
            passed, observed = True, f"{config} became ready and served"
        elif rolled_back is True:
            passed, observed = rolled_back_words(config, result, m.t_effect)
        else:
            passed, observed = False, f"no rollout outcome recorded: {result}"
        return CheckResult(
            name="rollout_safe",
            passed=passed,
            expected="candidate serves, or is detected failed and rolled back automatically",
            observed=observed,
            why="the rollout left the node serving" if passed else observed,
        )

    return check(fn)


@pytest.mark.fault("rollout")
@pytest.mark.node_kind("engine")
async def test_rollout(experiment: Experiment, candidate_config: str) -> None:
    await experiment.run_fault("rollout", hold_s=5, params={"config": candidate_config})
    verdict = experiment.check(
        rollout_safe(experiment, candidate_config) & recovered_within(experiment.slo.recovery_s_max)
    )
    assert verdict.passed, verdict.summary()
