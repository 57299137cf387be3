"""A JSON value as written, read as the type a run file's model expects: the one set of
tolerant readers behind ``faultkit.model.runfiles`` and ``faultkit.model.gatefile``. A value of the
wrong type (or not finite) reads as ``None`` (``{}`` or ``[]`` for containers), never as an
exception: old formats and torn runs stay readable."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["as_written", "flag", "lines", "number", "object_of", "objects_of", "stamp", "text",
           "whole"]


def whole(value: Any) -> int | None:
    """An integer field: an int (not a bool), or a float with no fractional part."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def stamp(value: Any) -> float | str | None:
    """A time: epoch seconds, or an RFC 3339 string as older run directories hold."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def as_written(value: Any) -> float | None:
    """A finite number, its JSON type kept (an int stays an int: reports show it as such)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return None


def object_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def objects_of(value: Any) -> list[dict[str, Any]]:
    """The JSON objects of a list (other items dropped); empty for anything but a list."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def lines(value: Any) -> list[str]:
    """A list of text lines: a JSON list (each item as text), or one string split in lines."""
    if isinstance(value, list):
        return [str(item) for item in value]
    if isinstance(value, str):
        return value.splitlines()
    return []
