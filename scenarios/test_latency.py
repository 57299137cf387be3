"""latency: 200 ms of added network delay between clients and the node. Nothing should be
lost; TTFT should rise by about the delay and come back after the revert."""

import pytest

from faultkit.plugin import Experiment
from slo.checks import lost_at_most


@pytest.mark.fault("latency")
async def test_latency(experiment: Experiment) -> None:
    m = await experiment.run_fault("latency", hold_s=8, params={"delay_ms": 200, "jitter_ms": 20})
    verdict = experiment.check(lost_at_most(0))
    assert verdict.passed, verdict.summary()
    fault = m.slis.get("fault")
    baseline = m.slis.get("baseline")
    assert fault and baseline and fault.ttft_p50_s is not None and baseline.ttft_p50_s is not None
    assert fault.ttft_p50_s - baseline.ttft_p50_s >= 0.15, (
        f"TTFT p50 rose only {fault.ttft_p50_s - baseline.ttft_p50_s:.3f} s under 200 ms of delay"
    )
