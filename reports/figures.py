"""Key figures of an incident, each carrying the file and fields it came from.

Every figure is either a value read from the run directory (``sources`` name the file and
fields) or, when ``derived`` is true, an arithmetic expression over such values whose
inputs are written out in ``value`` (``"12 / 300 = 4 %"``), so a reader can check it.
Nothing here estimates or fills in: a missing input gives "not captured".

No figure is negative or meaningless. A node back before its fault was reverted reads
"recovered N s before the revert ended", and a request-level fault that caused no outage
(:func:`no_outage`) shows detection and recovery as :data:`NOT_APPLICABLE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from faultkit.model.durations import rough_duration
from faultkit.model.kinds import spec_of
from faultkit.rundir import MEASUREMENT_JSON, RUN_JSON
from reports.load import RunData
from slo.types import Measurement

NOT_CAPTURED = "not captured"
NOT_APPLICABLE = "not applicable — request-level fault"



@dataclass(frozen=True, slots=True)
class Source:
    """Where a figure came from: one file of the run directory and some of its fields."""

    file: str
    fields: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: str
    sources: tuple[Source, ...]
    derived: bool = False

    @property
    def source(self) -> str:
        """The sources as plain text: ``measurement.json lost_total, lost_by_class``."""
        return "; ".join(
            " ".join(part for part in (s.file, ", ".join(s.fields), s.note) if part)
            for s in self.sources
        )


def num(value: float | int, digits: int = 1) -> str:
    """Format a number the way reports show it: ints as is, floats to ``digits`` decimals."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pct(fraction: float) -> str:
    """A fraction as a percentage with three significant figures (``0.0123`` → ``1.23 %``)."""
    return f"{fraction * 100:.3g} %"


def _is_num(value: object) -> TypeGuard[float | int]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def probe_s(m: Measurement) -> float | None:
    """The harness's first failed readiness probe after ``t_effect`` (older files kept it in
    ``detection_by_signal_s["probe"]``)."""
    if m.probe_detection_s is not None:
        return m.probe_detection_s
    value = m.detection_by_signal_s.get("probe")
    return float(value) if _is_num(value) else None


def no_outage(kind: str | None, m: Measurement) -> bool:
    """A request-level kind (:attr:`faultkit.model.kinds.FaultSpec.request_level`) that, as
    expected, caused no outage: no signal (monitoring or the harness's probe) showed it,
    no request was lost, and the node was in steady state at the end. Detection and
    recovery do not apply to such a run.
    """
    signals = [v for v in m.detection_by_signal_s.values() if _is_num(v)]
    return (
        (spec := spec_of(kind)) is not None
        and spec.request_level
        and m.t_detect is None
        and probe_s(m) is None
        and not signals
        and m.lost_total == 0
        and m.t_recovered is not None
    )


#: ``server_cross_check["estimate"]`` of a run with no ledger whose lost requests were
#: estimated from the server's counters (``faultkit postmortem``)
SERVER_ESTIMATE = "server_counters"


def server_estimate(m: Measurement | None) -> dict[str, object] | None:
    """The server-side estimate of lost requests of a run no client recorded (a postmortem:
    ``measurement.json`` ``server_cross_check`` with ``estimate: server_counters``), else
    ``None``. Its ``lost`` is ``None`` when it could not be estimated (``why`` says why)."""
    check = m.server_cross_check if m is not None else None
    if not isinstance(check, dict) or check.get("estimate") != SERVER_ESTIMATE:
        return None
    return check


def estimate_words(estimate: dict[str, object]) -> str:
    """``an estimated 12 requests (8–17) were lost`` or why they were not estimated."""
    lost, low, high = estimate.get("lost"), estimate.get("low"), estimate.get("high")
    if not isinstance(lost, int):
        return f"users affected were not estimated ({estimate.get('why') or 'no counters'})"
    verb = "was" if lost == 1 else "were"
    return (f"an estimated {lost} request{'' if lost == 1 else 's'} ({low}–{high}) {verb} "
            "lost, by the server's own counters (no client recorded them)")


def _na(label: str, m: Measurement) -> Figure:
    return Figure(
        label,
        NOT_APPLICABLE,
        (
            Source(
                MEASUREMENT_JSON,
                ("t_detect", "lost_total"),
                f"(no outage expected, none seen: nothing detected, {m.lost_total} lost)",
            ),
        ),
    )


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
        isinstance(availability, int | float)
        and 0 < availability < 1
        and isinstance(expected, int | float)
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
    if not _is_num(days) or days <= 0:
        return ""
    window_s = float(days) * 86_400
    held = window.get("history_s")
    span_s = min(float(held), window_s) if _is_num(held) and held > 0 else window_s
    outage_s = lost / (expected / span_s)
    span = (f"its {num(int(days), 0)}-day window" if span_s >= window_s * 0.99
            else f"the {rough_duration(span_s)} of its {num(int(days), 0)}-day window "
                 "Prometheus holds")
    return (f", the equivalent of {_outage_text(outage_s)} of full outage at the node's "
            f"mean traffic ({num(expected)} requests over {span})")


def _outage_text(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else rough_duration(seconds)


def _detection(m: Measurement) -> Figure:
    label = "Detection time"
    if m.detection_s is not None:
        detail = f" ({m.detect_detail})" if m.detect_detail else ""
        return Figure(
            label,
            f"{num(m.detection_s, 2)} s via {m.detect_signal}{detail}",
            (Source(MEASUREMENT_JSON, ("detection_s", "detect_signal", "detect_detail")),),
        )
    return Figure(
        label,
        "not detected within the observation window",
        (Source(MEASUREMENT_JSON, ("t_detect",), "= null"),),
    )


#: the monitoring signals, as a report names one that never showed the fault
MONITORING_WORDS = {"alert": "an alert firing", "up": "a failed scrape (up 0)"}


def _signals(m: Measurement) -> Figure:
    """When each monitoring signal first showed the fault, and which never did (a stalled
    engine answers its scrapes: ``up`` stays 1)."""
    by_signal = {
        k: v for k, v in m.detection_by_signal_s.items() if _is_num(v) and k != "probe"
    }
    never = [words for k, words in MONITORING_WORDS.items() if k not in by_signal]
    parts = []
    if by_signal:
        parts.append("first seen: " + ", ".join(f"{k} {num(v, 2)} s"
                                                for k, v in sorted(by_signal.items())))
    if never:
        parts.append("never: " + ", ".join(never))
    return Figure("Monitoring signals", "; ".join(parts),
                  (Source(MEASUREMENT_JSON, ("detection_by_signal_s",)),))


def _paging(m: Measurement) -> Figure | None:
    """The stages after firing, to the page (``None``: no Alertmanager watched the run)."""
    paging = m.paging
    if paging is None:
        return None
    sources = (Source(MEASUREMENT_JSON, ("paging",)),)
    wait = paging.group_wait_s
    route = f"group_wait {wait:g} s" if wait is not None else "route timing not read"
    received = (f"Alertmanager held it at {num(paging.received_s, 2)} s"
                if paging.received_s is not None else "")
    if paging.page_s is not None:
        after = (f", {num(paging.after_firing_s, 2)} s after firing"
                 if paging.after_firing_s is not None else "")
        stages = "; ".join(x for x in (received, route) if x)
        return Figure("Paged", f"paged at {num(paging.page_s, 2)} s{after} ({stages}; "
                      f"receiver {paging.receiver})", sources)
    if paging.finding:
        return Figure("Paged", paging.finding, sources)
    return Figure("Paged", "; ".join(x for x in (received, route) if x) or "no page", sources)


def _probe(m: Measurement) -> Figure:
    label = "Harness readiness probe (not detection)"
    field = "probe_detection_s" if m.probe_detection_s is not None else "detection_by_signal_s"
    value = probe_s(m)
    if value is None:
        return Figure(
            label, "no probe failed", (Source(MEASUREMENT_JSON, ("probe_detection_s",)),)
        )
    return Figure(
        label,
        f"first failed probe {num(value, 2)} s after the fault took effect",
        (Source(MEASUREMENT_JSON, (field,)),),
    )


def _recovery(m: Measurement) -> Figure:
    label = "Recovery time"
    if m.recovery_s is not None:
        return Figure(
            label,
            f"{num(m.recovery_s, 2)} s after the fault took effect",
            (Source(MEASUREMENT_JSON, ("recovery_s",)),),
        )
    return Figure(
        label,
        "not recovered by the end of the observation window",
        (Source(MEASUREMENT_JSON, ("t_recovered",), "= null"),),
    )


def _recovery_after_revert(m: Measurement) -> Figure:
    label = "Recovery relative to the revert"
    after = m.recovery_after_revert_s
    sources = (Source(MEASUREMENT_JSON, ("recovery_after_revert_s",)),)
    if after is not None:
        if after < 0:
            return Figure(label, f"recovered {num(-after, 2)} s before the revert ended", sources)
        return Figure(label, f"{num(after, 2)} s after the revert ended", sources)
    if m.t_revert is None:
        return Figure(
            label, "fault not reverted", (Source(MEASUREMENT_JSON, ("t_revert",), "= null"),)
        )
    return Figure(label, "not recovered", sources)


def _estimated_impact(estimate: dict[str, object]) -> list[Figure]:
    """A run no client recorded: the server-side estimate, its method and range."""
    source = (Source(MEASUREMENT_JSON, ("server_cross_check",)),)
    return [Figure("Lost requests (server-side estimate)",
                   f"{estimate_words(estimate)}. Method: {estimate.get('method')}", source),
            Figure("Affected users (lost + slow)",
                   "not measured: no ledger (no client recorded the users' requests, so "
                   "slow answers are not seen); lost is the server-side estimate above",
                   source)]


def _impact(data: RunData, m: Measurement) -> list[Figure]:
    if (estimate := server_estimate(m)) is not None:
        return _estimated_impact(estimate)
    by_class = ", ".join(f"{k} {v}" for k, v in sorted(m.lost_by_class.items())) or "none"
    ttft = data.run.slo.get("ttft_s")
    objective = f"first token more than {num(ttft)} s after arrival" if _is_num(ttft) else (
        "first token slower than the TTFT objective"
    )
    objective_source = (Source(RUN_JSON, ("slo.ttft_s",)),) if _is_num(ttft) else ()
    consistent = m.affected_total >= m.lost_total + m.slow_total
    return [
        Figure(
            "Lost requests",
            f"{m.lost_total} of {m.requests_total} requests ({by_class}); {m.clean_rejections}"
            f" of them clean rejections; {m.in_flight_at_effect} in flight when the fault took"
            " effect",
            (
                Source(
                    MEASUREMENT_JSON,
                    ("lost_total", "requests_total", "lost_by_class", "clean_rejections",
                     "in_flight_at_effect"),
                ),
            ),
        ),
        Figure(
            "Affected users (lost + slow)",
            f"{m.affected_total}: {m.lost_total} lost + {m.slow_total} slow ({objective})"
            if consistent
            else f"{m.slow_total} slow ({objective}); affected not recorded (this"
            " measurement.json predates affected_total)",
            (Source(MEASUREMENT_JSON, ("affected_total", "lost_total", "slow_total")),
             *objective_source),
        ),
    ]


def key_figures(data: RunData, kind: str | None = None) -> list[Figure]:
    """The header's key figures, in display order. ``kind`` is the fault's kind (it decides
    whether detection and recovery apply, see :func:`no_outage`)."""
    m = data.measurement
    if m is None:
        missing = Source(MEASUREMENT_JSON, (), "missing or unreadable")
        return [Figure("Measurement", NOT_CAPTURED, (missing,))]
    quiet = no_outage(kind, m)
    if quiet:
        return [
            _na("Detection time", m), _probe(m), _na("Recovery time", m), *_impact(data, m),
            budget_figure(data),
        ]
    detection = _detection(m)
    for more in (_signals(m), _paging(m)):
        if more is not None:
            detection = _joined(detection, more)
    if server_estimate(m) is not None:
        # no harness watched the node (a postmortem): no probe ran, nothing was reverted
        unwatched = Figure("Harness readiness probe (not detection)",
                           "none ran: no harness watched the node (no ledger, no probe)",
                           (Source(MEASUREMENT_JSON, ("server_cross_check",)),))
        return [detection, unwatched, _recovery(m), *_impact(data, m), budget_figure(data)]
    return [
        detection, _probe(m), _joined(_recovery(m), _recovery_after_revert(m)),
        *_impact(data, m), budget_figure(data),
    ]


def _joined(first: Figure, then: Figure) -> Figure:
    """Two figures about one thing as one row: ``first``'s label, both values and sources."""
    return Figure(
        first.label, f"{first.value}; {then.value}", first.sources + then.sources,
        first.derived or then.derived,
    )
