"""A report's figure together with where it came from.

A :class:`Figure` is a labelled value and the :class:`Source` s it was read from: a file of
the run directory and some of its fields. When ``derived`` is true the value is an
arithmetic expression over such fields with its inputs written out (``"12 / 300 = 4 %"``),
so a reader can check it. A value the run directory does not hold is
:data:`NOT_CAPTURED`, never estimated or filled in.
"""

from __future__ import annotations

from dataclasses import dataclass

NOT_CAPTURED = "not captured"


@dataclass(frozen=True, slots=True)
class Source:
    """Where a figure came from: one file of the run directory and some of its fields."""

    file: str
    fields: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: str
    sources: tuple[Source, ...]
    derived: bool = False

    @property
    def source(self) -> str:
        """The sources as plain text: ``measurement.json lost_total, lost_by_class``."""
        return "; ".join(
            " ".join(part for part in (s.file, ", ".join(s.fields), s.note) if part)
            for s in self.sources
        )
