"""Text pieces shared by the summaries ``faultkit load`` and ``faultkit ledger summary`` print."""

from __future__ import annotations

from faultkit.load.stats import LoadSummary

__all__ = ["errors_and_goodput", "ms"]


def ms(value: float | None) -> str:
    """Seconds as milliseconds for a person: ``12 ms``, ``3.4 ms``; ``—`` when absent."""
    if value is None:
        return "—"
    millis = value * 1000
    return f"{millis:.0f} ms" if millis >= 10 else f"{millis:.1f} ms"


def errors_and_goodput(s: LoadSummary) -> list[str]:
    """The closing lines: errors by class (when any), goodput (when thresholds were set)."""
    lines = []
    if s.errors_by_class:
        by_class = ", ".join(f"{name} {n}" for name, n in s.errors_by_class.items())
        lines.append(f"Errors by class: {by_class}")
    if s.thresholds:
        lines.append(f"Goodput: {s.goodput_rps:.1f} req/s ({100 * s.goodput_ratio:.1f} %)")
    return lines
