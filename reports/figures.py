"""Key figures of an incident, each carrying the file and fields it came from.

:func:`key_figures` gives the report header's figures in display order: detection (with
the monitoring signals and the page), the harness's probe, recovery, impact and the SLO
budget spent. Each is a :class:`reports.provenance.Figure` read from the run directory, or
derived from such values with its inputs written out; a missing input gives "not
captured". A run no client recorded (a postmortem) shows the server-side estimate of its
loss (:mod:`reports.server_estimate`); the budget figure is :mod:`reports.budget_figure`.

No figure is negative or meaningless. A node back before its fault was reverted reads
"recovered N s before the revert ended", and a request-level fault that caused no outage
(:func:`reports.outage.no_outage`) shows detection and recovery as
:data:`reports.outage.NOT_APPLICABLE`.
"""

from __future__ import annotations

from faultkit.rundir import MEASUREMENT_JSON, RUN_JSON
from reports.budget_figure import budget_figure
from reports.load import RunData
from reports.numbers import is_number, num
from reports.outage import NOT_APPLICABLE, no_outage, probe_s
from reports.provenance import NOT_CAPTURED, Figure, Source
from reports.server_estimate import estimated_impact, server_estimate, unwatched
from slo.types import Measurement


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
        k: v for k, v in m.detection_by_signal_s.items() if is_number(v) and k != "probe"
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



def _impact(data: RunData, m: Measurement) -> list[Figure]:
    if (estimate := server_estimate(m)) is not None:
        return estimated_impact(estimate)
    by_class = ", ".join(f"{k} {v}" for k, v in sorted(m.lost_by_class.items())) or "none"
    ttft = data.run.slo.get("ttft_s")
    objective = f"first token more than {num(ttft)} s after arrival" if is_number(ttft) else (
        "first token slower than the TTFT objective"
    )
    objective_source = (Source(RUN_JSON, ("slo.ttft_s",)),) if is_number(ttft) else ()
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
    if unwatched(m):  # a postmortem: no probe ran, nothing was reverted
        no_probe = Figure("Harness readiness probe (not detection)",
                           "none ran: no harness watched the node (no ledger, no probe)",
                           (Source(MEASUREMENT_JSON, ("server_cross_check",)),))
        return [detection, no_probe, _recovery(m), *_impact(data, m), budget_figure(data)]
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
