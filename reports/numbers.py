"""How reports write numbers, and which values count as one.

:func:`num` and :func:`pct` are the only number formats of the reports' figures: ints as
they are, floats to a fixed count of decimals, fractions as percentages with three
significant figures. :func:`is_number` is the test every figure applies to a value read
from a file before doing arithmetic on it: an int or float, never a bool.
"""

from __future__ import annotations

from typing import TypeGuard


def num(value: float | int, digits: int = 1) -> str:
    """Format a number the way reports show it: ints as is, floats to ``digits`` decimals."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pct(fraction: float) -> str:
    """A fraction as a percentage with three significant figures (``0.0123`` → ``1.23 %``)."""
    return f"{fraction * 100:.3g} %"


def is_number(value: object) -> TypeGuard[float | int]:
    """An int or a float (NaN and infinities included), not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)
