"""Bad input on the command line: one clear line on stderr and exit status 2.

Exit status 1 means FAIL in faultkit (a gate that failed, a sweep that could not revert);
bad input must never look like that. :class:`BadInput` is the one exception for it: click
prints ``Error: <message>`` (one line, no usage block) and exits 2. ``faultkit.cli`` turns
click's own usage errors and faultkit's input errors (an unknown node or fault, a fault
parameter out of range, a malformed inventory, a refused fault) into it.

Click parameter types here refuse what ``float()`` accepts but no option can mean:
``nan``, ``inf`` and ``1e400``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import click


class BadInput(click.ClickException):
    """Bad input: ``Error: <message>`` on stderr, exit status 2, nothing was done."""

    exit_code = 2


class FiniteFloat(click.FloatRange):
    """A finite number within bounds; the error names the option and the allowed range.

    ``gt``/``ge`` bound it from below (exclusive/inclusive), ``le`` from above; ``unit``
    is shown after the range (``--rate 1e9: must be > 0 and ≤ 2000 req/s``).
    """

    name = "number"  # shown in --help instead of FloatRange's "float range"

    def _describe_range(self) -> str:
        return self.allowed()

    def __init__(self, *, gt: float | None = None, ge: float | None = None,
                 le: float | None = None, unit: str = "") -> None:
        super().__init__()
        self.gt, self.ge, self.le, self.unit = gt, ge, le, unit

    def allowed(self) -> str:
        """The range as words: ``> 0 and ≤ 2000 req/s``."""
        parts = [f"{sign} {limit:g}" for sign, limit in
                 ((">", self.gt), ("≥", self.ge), ("≤", self.le)) if limit is not None]
        text = " and ".join(parts) or "any value"
        return f"{text} {self.unit}".rstrip()

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        ok = math.isfinite(number) and not (
            (self.gt is not None and number <= self.gt)
            or (self.ge is not None and number < self.ge)
            or (self.le is not None and number > self.le)
        )
        if not ok:
            finite = "" if math.isfinite(number) else "a finite number, "
            self.fail(f"{value}: must be {finite}{self.allowed()}", param, ctx)
        return number


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str, *, option: str = "--duration", max_s: float = 7 * 86400) -> float:
    """``30s`` / ``2m`` / ``500ms`` / ``1h`` / ``1d`` / ``45`` (seconds) → seconds.

    Raises :class:`click.BadParameter` naming ``option`` unless the duration is above 0 and
    at most ``max_s`` seconds.
    """
    match = _DURATION.match(text)
    seconds = float(match.group(1)) * _SCALE[match.group(2)] if match else math.nan
    if not 0 < seconds <= max_s:
        raise click.BadParameter(
            f"{text!r}: must be a duration > 0 and ≤ {human_duration(max_s)}, "
            "such as 30s, 2m, 500ms or 1h",
            param_hint=f"'{option}'",
        )
    return seconds


def human_duration(seconds: float) -> str:
    """``7d``, ``1h``, ``90s``: the largest unit that divides ``seconds`` exactly."""
    for unit in ("d", "h", "m"):
        scale = _SCALE[unit]
        if seconds >= scale and seconds % scale == 0:
            return f"{seconds / scale:g}{unit}"
    return f"{seconds:g}s"
