"""slo: observe and judge — Prometheus access, engine profiles, SLO specs, measurement.

Light on purpose: ``import slo`` pulls only the pure parts (types, measurement, checks).
Prometheus access (``slo.prom``), the observer, rules and the budget review are imported
from their modules.
"""

from slo.checks import (
    Checks,
    alert_fired_within,
    check,
    checks_from_slo,
    detected_within,
    error_ratio_at_most,
    judge,
    lost_at_most,
    recovered_within,
    ttft_p95_below,
    window_checks,
    window_objectives,
)
from slo.measure import measure, window_slis
from slo.types import CheckResult, Measurement, Verdict, WindowSLIs

__all__ = [
    "CheckResult",
    "Checks",
    "Measurement",
    "Verdict",
    "WindowSLIs",
    "alert_fired_within",
    "check",
    "checks_from_slo",
    "detected_within",
    "error_ratio_at_most",
    "judge",
    "lost_at_most",
    "measure",
    "recovered_within",
    "ttft_p95_below",
    "window_checks",
    "window_objectives",
    "window_slis",
]
