"""overload: an open-loop flood well above capacity. The node must not crash and must not
lose requests without bound; the latency verdict and the saturation point are reported."""

import pytest

from faultkit.plugin import Experiment
from scenarios._expect import node_not_crashed
from slo.checks import recovered_within


@pytest.mark.fault("flood")
async def test_overload(experiment: Experiment) -> None:
    await experiment.run_fault("flood", hold_s=10, params={"rate": 100})
    verdict = experiment.check(
        node_not_crashed(experiment) & recovered_within(experiment.slo.recovery_s_max)
        & experiment.latency_checks()
    )
    experiment.note("saturation", **{k: v for k, v in experiment.fault_result.items()
                                     if k.startswith("saturation")})
    assert verdict.passed, verdict.summary()
