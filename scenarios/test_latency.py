"""latency: 200 ± 20 ms of added network delay between clients and the node. Nothing should
be lost, and the delay must reach the users: while it is in place no answer can come sooner
than its floor (``delay − jitter``: the delay proxy holds every byte of the node's answers at
least that long, as ``tc netem`` does on the container's egress).

The check reads the *fastest* users (TTFT p10) on both sides of that floor: under it in
the baseline (else the node is too slow for the delay to show), at or over it while the
delay was in place (an undelayed stretch of requests — a revert that began early,
connections that bypassed the delay — puts them under it). It is not read as a rise over
the baseline's p10: that compares two windows, and CPU contention in either moves it.
A five-lane catalogue has had vLLM's baseline p10 at 0.070 s and its fault window's at
0.216 s: its fastest users past the floor (0.180 s), yet a rise of only 0.146 s.
The median carries queueing, which the delay itself changes — a busy vLLM node queued less
while its arrivals came 200 ms later, and its TTFT p50 rose only 0.107 s.

"While the delay was in place" is the requests that arrived after ``t_effect`` and had
their first token before the revert *began*. The measurement's fault window runs on to the
revert's end, and a request sent once the redirect is gone goes straight to the node: a
lab run with the gateway's lane beside vLLM's had eleven such requests
(scheduled ≤ 0.04 s before the revert began, sent as it began), TTFT 0.06–0.16 s, and a
p10 of 0.162 s over that window. A request judged here cannot have been sent after the
redirect was removed (its answer came before), so an undelayed answer among them is one
the delay failed to hold; requests delayed across the revert's start are left out, which
can only make the fastest users faster, never slower.
"""

from collections.abc import Sequence

import pytest

from faultkit import EventKind, Experiment, RequestRecord
from faultkit.load.stats import percentile, ttft_s
from slo.checks import lost_at_most
from slo.effect import fault_time
from slo.samples import arrival

#: the delay injected and its jitter (uniform, ± the jitter)
DELAY_MS, JITTER_MS = 200, 20
#: no answer through the delay comes sooner than this after its request
TTFT_FLOOR_S = (DELAY_MS - JITTER_MS) / 1000


def ttft_floor(
    records: Sequence[RequestRecord], start: float, end: float, *, answered_by: float | None = None
) -> float | None:
    """TTFT p10 of the successful requests that arrived in [start, end) (and, with
    ``answered_by``, had their first token before it)."""
    values = [t for r in records if r.status == "ok" and start <= arrival(r) < end
              and (t := ttft_s(r)) is not None
              and (answered_by is None or r.t_invoke + t < answered_by)]
    return percentile(values, 10)


@pytest.mark.fault("latency")
async def test_latency(experiment: Experiment) -> None:
    m = await experiment.run_fault("latency", hold_s=8,
                                   params={"delay_ms": DELAY_MS, "jitter_ms": JITTER_MS})
    verdict = experiment.check(lost_at_most(0))
    assert verdict.passed, verdict.summary()
    fault, baseline = m.slis.get("fault"), m.slis.get("baseline")
    assert fault and baseline, m.slis
    records = experiment.load.records if experiment.load else []
    revert_began = fault_time(experiment.events, experiment.node.name, EventKind.REVERT_START)
    assert revert_began is not None, "no revert_start on the timeline"
    before = ttft_floor(records, baseline.start, baseline.end)
    during = ttft_floor(records, fault.start, revert_began, answered_by=revert_began)
    assert before is not None and during is not None, (before, during)
    assert before < TTFT_FLOOR_S, (
        f"the fastest users' TTFT (p10) was already {before:.3f} s before the delay, not under "
        f"its floor {TTFT_FLOOR_S:.3f} s: a {DELAY_MS} ms delay cannot be told apart on this node"
    )
    assert during >= TTFT_FLOOR_S, (
        f"the fastest users' TTFT (p10) was {during:.3f} s under {DELAY_MS} ± {JITTER_MS} ms "
        f"of delay, below its floor {TTFT_FLOOR_S:.3f} s: some answers were not delayed "
        f"(baseline p10 {before:.3f} s; p50 {baseline.ttft_p50_s} → {fault.ttft_p50_s})"
    )
