"""Time stamps as the systems faultkit reads write them.

:func:`parse_rfc3339` reads the RFC 3339 stamps of Docker (``State.StartedAt``, events)
and Prometheus (``activeAt``, ``lastScrape``): Go prints up to nine fractional digits and
either ``Z`` or an offset; Go's zero time (``0001-01-01T00:00:00Z``, "never") reads as
``None``. One parser for both, in the core, so ``slo`` and the Docker layer agree.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["CLOCK_STEP_TOLERANCE_S", "clock_step_gap", "parse_rfc3339", "utc_clock",
           "wall_minus_monotonic"]


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


#: a wall-clock step larger than this during a run makes its times incomparable
CLOCK_STEP_TOLERANCE_S = 0.5


def utc_clock(t: float) -> str:
    """``HH:MM:SS.s UTC`` of epoch ``t``: how a moment is named in a reason or a gap."""
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-5] + " UTC"


def wall_minus_monotonic() -> float:
    """``time.time() − time.monotonic()``: constant while nobody steps the wall clock."""
    return time.time() - time.monotonic()


def clock_step_gap(offset_at_start: float, *, tolerance_s: float = CLOCK_STEP_TOLERANCE_S,
                   offset_now: float | None = None) -> str | None:
    """Why a run's times cannot be compared, if the wall clock stepped since the start.

    The harness dates its own events by the wall clock, the load client by the monotonic
    clock anchored once, Docker and Prometheus by their own wall clocks: a step of the wall
    clock (NTP, a frozen and resumed machine) mid-run shifts some of them and not others,
    so detection, recovery and the SLI windows would be computed from mismatched times.
    """
    now = wall_minus_monotonic() if offset_now is None else offset_now
    step = now - offset_at_start
    if abs(step) <= tolerance_s:
        return None
    return (f"the wall clock stepped by {step:+.1f} s relative to the monotonic clock during "
            "the run (NTP, or the machine was frozen and resumed): times from Docker, "
            "Prometheus and the load client no longer line up, so nothing can be judged")
