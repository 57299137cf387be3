"""The key figure of an incident's cost: the share of the SLO error budget it spent.

:func:`budget_figure` divides the requests lost by the budget of the node's SLO window and
says what that is in full outage at the node's mean traffic. Where the window's request
count is missing it shows the share of the scenario's own requests lost instead, and why;
where a run's loss was not estimated it says the budget is not computable.
"""

from __future__ import annotations

from faultkit.model.durations import rough_duration
from faultkit.rundir import MEASUREMENT_JSON, RUN_JSON
from reports.load import RunData
from reports.numbers import is_number, num, pct
from reports.provenance import NOT_CAPTURED, Figure, Source
from reports.server_estimate import server_estimate


def budget_figure(data: RunData) -> Figure:
    """SLO error budget spent = lost / ((1 − availability) × requests in the window), and
    what that is in full outage at the node's mean traffic.

    The requests in the SLO window are the ones the node's server counted over its rolling
    window up to the run's end (run.json ``slo_window_requests``, :mod:`slo.traffic`), so
    the figure is the cost ``faultkit budget`` lists for the run. Without them the budget
    cannot be computed honestly: the figure shows the share of this scenario's own requests
    that were lost instead, and says why (``slo_window.missing``) and what to configure.
    """
    m = data.measurement
    label = "SLO budget spent"
    if m is None:
        return Figure(label, NOT_CAPTURED, (Source(MEASUREMENT_JSON, (), "missing"),))
    estimate = server_estimate(m)
    if estimate is not None and not isinstance(estimate.get("lost"), int):
        return Figure(label, "not computable: users affected were not estimated",
                      (Source(MEASUREMENT_JSON, ("server_cross_check.why",)),))
    availability = data.run.slo.get("availability")
    expected = data.run.slo_window_requests
    window = data.run.slo_window
    if (
        is_number(availability)
        and 0 < availability < 1
        and is_number(expected)
        and expected > 0
    ):
        budget = (1 - availability) * expected
        return Figure(
            label,
            f"{m.lost_total} / ((1 − {availability}) × {num(expected)}) = "
            f"{pct(m.lost_total / budget)}{_as_outage(m.lost_total, expected, data)}",
            (
                Source(MEASUREMENT_JSON, ("lost_total",)),
                Source(RUN_JSON, ("slo.availability", "slo_window_requests", "slo_window")),
            ),
            derived=True,
        )
    missing = window.get("missing")
    why = missing if isinstance(missing, str) and missing else "run.json has no slo_window_requests"
    if m.requests_total > 0:
        return Figure(
            "Share of this scenario's requests lost",
            f"{m.lost_total} / {m.requests_total} = {pct(m.lost_total / m.requests_total)}",
            (
                Source(
                    MEASUREMENT_JSON,
                    ("lost_total", "requests_total"),
                    f"(SLO budget not computable: {why})",
                ),
            ),
            derived=True,
        )
    return Figure(
        label, "not computable (no requests recorded)", (Source(MEASUREMENT_JSON, ()),)
    )


def _as_outage(lost: int, expected: float, data: RunData) -> str:
    """`` — N min of full outage at the node's mean traffic (M requests over its window
    or the part of it Prometheus holds)``; empty when the window's span is unknown."""
    window = data.run.slo_window
    days = data.run.slo.get("window_days")
    if not is_number(days) or days <= 0:
        return ""
    window_s = float(days) * 86_400
    held = window.get("history_s")
    span_s = min(float(held), window_s) if is_number(held) and held > 0 else window_s
    outage_s = lost / (expected / span_s)
    span = (f"its {num(int(days), 0)}-day window" if span_s >= window_s * 0.99
            else f"the {rough_duration(span_s)} of its {num(int(days), 0)}-day window "
                 "Prometheus holds")
    return (f", the equivalent of {_outage_text(outage_s)} of full outage at the node's "
            f"mean traffic ({num(expected)} requests over {span})")


def _outage_text(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else rough_duration(seconds)
