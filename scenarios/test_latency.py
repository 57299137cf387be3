"""latency: 200 ms of added network delay between clients and the node. Nothing should be
lost; TTFT should rise by about the delay and come back after the revert.

The rise is read on the *fastest* users (TTFT p10 of each window): their TTFT is the
node's compute floor plus the network, so 200 ms more of network shows in full. The
median also carries queueing, which the delay itself changes — the busy vLLM node of CI
run G1 queued less while its arrivals came 200 ms later, and its TTFT p50 rose 0.107 s.
"""

from collections.abc import Sequence

import pytest

from faultkit.load.stats import percentile, ttft_s
from faultkit.plugin import Experiment
from faultkit.records import RequestRecord
from slo.checks import lost_at_most
from slo.measure import arrival

#: the delay injected, and the rise of the fastest users' TTFT that shows it was
DELAY_MS, MIN_RISE_S = 200, 0.15


def ttft_floor(records: Sequence[RequestRecord], start: float, end: float) -> float | None:
    """TTFT p10 of the successful requests that arrived in [start, end)."""
    values = [t for r in records if r.status == "ok" and start <= arrival(r) < end
              and (t := ttft_s(r)) is not None]
    return percentile(values, 10)


@pytest.mark.fault("latency")
async def test_latency(experiment: Experiment) -> None:
    m = await experiment.run_fault("latency", hold_s=8,
                                   params={"delay_ms": DELAY_MS, "jitter_ms": 20})
    verdict = experiment.check(lost_at_most(0))
    assert verdict.passed, verdict.summary()
    fault, baseline = m.slis.get("fault"), m.slis.get("baseline")
    assert fault and baseline, m.slis
    records = experiment.load.records if experiment.load else []
    before = ttft_floor(records, baseline.start, baseline.end)
    during = ttft_floor(records, fault.start, fault.end)
    assert before is not None and during is not None, (before, during)
    assert during - before >= MIN_RISE_S, (
        f"the fastest users' TTFT (p10) rose only {during - before:.3f} s under {DELAY_MS} ms "
        f"of delay ({before:.3f} → {during:.3f} s; p50 {baseline.ttft_p50_s} → "
        f"{fault.ttft_p50_s})"
    )
