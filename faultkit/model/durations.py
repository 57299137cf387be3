"""Durations as people write them: ``500ms``, ``30s``, ``2m``, ``1h``, ``1d``, ``2w``, ``45``.

The one grammar for every duration the command line and the SLO review accept. A bare
number is seconds. :func:`parse_duration` also takes fractions (``1.5h``) and spaces
(``30 s``); :func:`parse_prometheus_duration` only the form PromQL accepts in a range
selector (a whole number and a unit: ``30d``), because the SLO review puts it there.
"""

from __future__ import annotations

import re

#: unit → seconds
UNIT_SECONDS: dict[str, float] = {
    "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")


def parse_duration(text: str) -> float:
    """``text`` in seconds; :class:`ValueError` if it is not a duration."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 30s, 2m, 500ms or 1h")
    return float(match.group(1)) * UNIT_SECONDS[match.group(2) or "s"]


def parse_prometheus_duration(text: str) -> float:
    """A Prometheus range (``30d``, ``12h``, ``2w``: a whole number and a unit) in seconds;
    :class:`ValueError` otherwise. Surrounding spaces are ignored."""
    match = _DURATION.match(text)
    if match is None or "." in match.group(1) or match.group(2) is None or " " in text.strip():
        raise ValueError(f"{text!r} is not a Prometheus duration such as 30d, 12h or 2w")
    return float(match.group(1)) * UNIT_SECONDS[match.group(2)]


#: Prometheus' own duration grammar (``0s``, ``30s``, ``1m30s``, ``1h30m``): units largest
#: first, each at most once — what a rule's ``for:`` and Alertmanager's timings accept
_MODEL_DURATION = re.compile(
    r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_MODEL_UNITS = (365 * 86400.0, 604800.0, 86400.0, 3600.0, 60.0, 1.0, 0.001)


def parse_model_duration(text: str) -> float:
    """A duration in Prometheus' own grammar — a rule's ``for:``, Alertmanager's
    ``group_wait`` (``0s``, ``30s``, ``1m30s``, ``4h``) — in seconds; :class:`ValueError`
    for anything else (``1.5m``, ``30 s``, a bare number)."""
    stripped = text.strip()
    match = _MODEL_DURATION.fullmatch(stripped)
    if not stripped or match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a Prometheus duration such as 0s, 30s, 2m or 1h30m")
    return sum(int(n) * unit for n, unit in zip(match.groups(), _MODEL_UNITS, strict=True)
               if n is not None)


def human_duration(seconds: float) -> str:
    """``7d``, ``1h``, ``90s``: the largest unit (up to days) that divides ``seconds`` exactly."""
    for unit in ("d", "h", "m"):
        scale = UNIT_SECONDS[unit]
        if seconds >= scale and seconds % scale == 0:
            return f"{seconds / scale:g}{unit}"
    return f"{seconds:g}s"


def rough_duration(seconds: float) -> str:
    """An age for messages: ``3 h 12 min``, ``45 min``, ``20 s``; ``an unknown time`` for inf."""
    if seconds == float("inf"):
        return "an unknown time"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{secs} s"
