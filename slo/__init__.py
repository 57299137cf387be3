"""slo: observe and judge — Prometheus access, engine profiles, SLO specs, measurement."""

from slo.types import CheckResult, Measurement, Verdict, WindowSLIs

__all__ = ["CheckResult", "Measurement", "Verdict", "WindowSLIs"]
