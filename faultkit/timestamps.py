"""Time stamps as the systems faultkit reads write them.

:func:`parse_rfc3339` reads the RFC 3339 stamps of Docker (``State.StartedAt``, events)
and Prometheus (``activeAt``, ``lastScrape``): Go prints up to nine fractional digits and
either ``Z`` or an offset; Go's zero time (``0001-01-01T00:00:00Z``, "never") reads as
``None``. One parser for both, in the core, so ``slo`` and the Docker layer agree.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_rfc3339"]


def parse_rfc3339(text: str | None) -> float | None:
    """RFC 3339 (nanosecond precision allowed) → epoch seconds; empty or Go's zero time →
    ``None``. A stamp without an offset is read as UTC (Docker and Prometheus write UTC)."""
    if not text or text.startswith("0001-01-01"):
        return None
    stamp = text.replace("Z", "+00:00")
    # Python's fromisoformat takes at most 6 fractional digits; Go prints up to 9.
    if "." in stamp:
        head, rest = stamp.split(".", 1)
        tz_at = next((i for i, ch in enumerate(rest) if not ch.isdigit()), len(rest))
        digits, tz = rest[:tz_at], rest[tz_at:]
        stamp = f"{head}.{digits[:6].ljust(6, '0')}{tz}"
    parsed = datetime.fromisoformat(stamp)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
