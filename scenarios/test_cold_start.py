"""cold_start: stop the node and start it again — the deploy / reboot path. Records time to
readiness and to the first token, judged against the recovery objective."""

import pytest

from faultkit import Experiment
from scenarios._expect import fault_result


@pytest.mark.fault("stop")
async def test_cold_start(experiment: Experiment) -> None:
    await experiment.run_fault("stop", hold_s=3)
    limit = experiment.slo.recovery_s_max
    verdict = experiment.check(
        experiment.default_checks()
        & fault_result(
            experiment,
            "time_to_first_token",
            f"first token within {limit:g} s",
            lambda v: v is not None and v <= limit,
            "time_to_first_token_s",
        )
    )
    assert verdict.passed, verdict.summary()
