"""Users affected, server-side: requests lost during an incident, estimated from the
engine's own request counter when no client recorded them (a postmortem has no ledger).

Method (docs/postmortem.md, "Users affected"), over raw counter samples (Prometheus'
stamps, counter resets handled as :func:`slo.capture.counter_increase` does):

- **Rate before**: ``λ = N / L``, the requests the server counted over the ``L`` seconds
  of samples before the last good scrape ``a``: at most :data:`BASELINE_S`, never before the
  window asked about nor before an earlier incident's end (``not_before``), so an earlier
  outage never lowers the rate.
- **Span**: ``(a, b]``, from the last good scrape before the outage to the end of the good
  stretch that confirmed its recovery (``b``: the first good scrape plus the node's
  ``recovery_hold_s``; the window's end while still down). The hold is inside the span
  because a server answers its backlog after recovering (a frozen engine, when it resumes):
  those answers are counted by later scrapes than the first good one.
- **Lost** ``= λ·(b − a) − (served − errors)``: the arrivals expected at the rate before,
  less the requests the server answered without a server error in the span (the
  counter's increase from ``a`` to ``b``), at least 0.
- **Uncertainty**, stated as a range ``[low, high]``: two standard deviations of the
  arrivals (Poisson, ``λ·(b − a)``) and of the rate itself (``N`` counted:
  ``√N·(b − a)/L``), plus the counter's resolution ``λ·scrape interval`` — a process that
  dies takes with it the requests it answered since its last scrape, and the span's sides
  are scrape stamps.

What it cannot see, said with every estimate: requests a client abandoned but the server
answered later (a frozen engine serves its backlog when it resumes: counted as served),
traffic that changed during the outage (clients backing off or retrying), and requests
that never reached the server's counter at all are all only in the arrival estimate.
Pure; :func:`faultkit.postmortem.read.read_request_counters` reads the samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faultkit.postmortem.evidence import Samples
from faultkit.postmortem.model import Incident
from slo.capture import counter_increase

__all__ = ["BASELINE_S", "LossEstimate", "estimate_lost"]

#: how much of the node's traffic before the outage sets the expected rate (s)
BASELINE_S = 60.0
#: the fewest scrape intervals of counter samples before the outage a rate is taken from
MIN_BASELINE_INTERVALS = 3.0
#: standard deviations each side of the estimate (≈ 95 %)
SIGMAS = 2.0

CAVEATS = ("requests a client abandoned but the server answered later (a frozen engine "
           "serves its backlog when it resumes) count as served; a change of traffic during "
           "the outage (clients backing off or retrying) is not seen")


@dataclass(frozen=True, slots=True)
class LossEstimate:
    """Requests lost in one incident, estimated from the server's counters (module
    docstring), or why not (``lost`` is ``None`` and ``why`` says what was missing).
    Times are epoch seconds, counts requests."""

    lost: int | None
    why: str = ""
    low: int | None = None
    high: int | None = None
    counter: str | None = None
    rate_per_s: float | None = None
    baseline_s: float | None = None
    baseline_requests: float | None = None
    span: tuple[float, float] | None = None
    expected: float | None = None
    served: float | None = None
    errors: float | None = None

    @property
    def method(self) -> str:
        """The estimate with its inputs written out, for a report."""
        if self.lost is None or self.span is None or self.rate_per_s is None:
            return f"not estimated: {self.why}"
        a, b = self.span
        errors = "" if self.errors is None else f" − {self.errors:.0f} server errors"
        return (f"{self.rate_per_s:.2f} req/s before the outage ({self.baseline_requests:.0f} "
                f"counted over {self.baseline_s:.1f} s) × {b - a:.1f} s = {self.expected:.1f} "
                f"expected, less {self.served:.0f} the server counted in that span{errors}: "
                f"{self.lost} lost, between {self.low} and {self.high} (2σ Poisson on the "
                "arrivals and the rate, plus one scrape interval of the counter's resolution); "
                + CAVEATS)

    def to_json(self) -> dict[str, Any]:
        """``measurement.json`` ``server_cross_check`` of a postmortem (``estimate``:
        ``"server_counters"``; the reports read it, reports/server_estimate.py)."""
        return {"estimate": "server_counters", "lost": self.lost, "low": self.low,
                "high": self.high, "why": self.why or None, "counter": self.counter,
                "rate_per_s": self.rate_per_s, "baseline_s": self.baseline_s,
                "baseline_requests": self.baseline_requests,
                "start": None if self.span is None else self.span[0],
                "end": None if self.span is None else self.span[1],
                "expected": self.expected, "served": self.served, "errors": self.errors,
                "method": self.method}


def _increase(series: Sequence[Samples], t0: float, t1: float) -> float:
    return sum(counter_increase([s for s in samples if t0 <= s[0] <= t1]) for samples in series)


def estimate_lost(incident: Incident, requests: Sequence[Samples] | None,
                  errors: Sequence[Samples] | None, *, span_end: float, interval_s: float,
                  counter: str | None, why_none: str = "",
                  not_before: float | None = None) -> LossEstimate:
    """The requests lost in ``incident`` (module docstring). ``requests``/``errors``: the
    raw samples of the server's request and server-error counters, one per series, from
    :data:`BASELINE_S` before the outage to ``span_end``; ``None``: the engine has none
    (``why_none`` says so). ``span_end``: ``b`` of the module docstring (the incident run's
    ``t_end``, :func:`faultkit.postmortem.incident_run.incident_window`)."""
    if requests is None:
        return LossEstimate(None, why=why_none or "the engine exposes no request counter",
                            counter=counter)
    a = incident.start.after
    if a is None:
        return LossEstimate(None, why="the outage began before the window's first scrape: "
                            "no traffic before it to take a rate from", counter=counter)
    b = span_end
    floor = a - BASELINE_S if not_before is None else max(a - BASELINE_S, not_before)
    before = [s for samples in requests for s in samples if floor <= s[0] <= a]
    first = min((t for t, _ in before), default=a)
    length = a - first
    if length < MIN_BASELINE_INTERVALS * interval_s:
        return LossEstimate(None, why=f"only {length:.1f} s of request counter samples before "
                            f"the outage in the window (at least "
                            f"{MIN_BASELINE_INTERVALS * interval_s:g} s are needed for a rate: "
                            "give an earlier --from)", counter=counter)
    counted = _increase(requests, first, a)
    rate = counted / length
    served = _increase(requests, a, b)
    failed = None if errors is None else _increase(errors, a, b)
    expected = rate * (b - a)
    lost = max(0.0, expected - (served - (failed or 0.0)))
    sigma = math.sqrt(expected + counted * ((b - a) / length) ** 2)
    resolution = rate * interval_s
    return LossEstimate(
        lost=round(lost), low=max(0, math.floor(lost - SIGMAS * sigma - resolution)),
        high=math.ceil(lost + SIGMAS * sigma + resolution), counter=counter,
        rate_per_s=rate, baseline_s=length, baseline_requests=counted, span=(a, b),
        expected=expected, served=served, errors=failed)
