"""Whether a run had an outage a report can time, read from its ``measurement.json``.

A request-level fault that caused no outage (:func:`no_outage`) has nothing to detect or
recover from: reports show its detection and recovery as :data:`NOT_APPLICABLE` instead of
a time. :func:`probe_s` is when the harness's own readiness probe first failed, which is
evidence of an outage but not its detection.
"""

from __future__ import annotations

from faultkit.model.kinds import spec_of
from reports.numbers import is_number
from slo.types import Measurement

NOT_APPLICABLE = "not applicable — request-level fault"


def probe_s(m: Measurement) -> float | None:
    """The harness's first failed readiness probe after ``t_effect`` (older files kept it in
    ``detection_by_signal_s["probe"]``)."""
    if m.probe_detection_s is not None:
        return m.probe_detection_s
    value = m.detection_by_signal_s.get("probe")
    return float(value) if is_number(value) else None


def no_outage(kind: str | None, m: Measurement) -> bool:
    """A request-level kind (:attr:`faultkit.model.kinds.FaultSpec.request_level`) that, as
    expected, caused no outage: no signal (monitoring or the harness's probe) showed it,
    no request was lost, and the node was in steady state at the end. Detection and
    recovery do not apply to such a run.
    """
    signals = [v for v in m.detection_by_signal_s.values() if is_number(v)]
    return (
        (spec := spec_of(kind)) is not None
        and spec.request_level
        and m.t_detect is None
        and probe_s(m) is None
        and not signals
        and m.lost_total == 0
        and m.t_recovered is not None
    )
