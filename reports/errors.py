"""Exceptions the ``reports`` package raises (all are :class:`faultkit.errors.FaultkitError`).

Tree::

    FaultkitError
    └── ReportError               a report (incident, gate, budget) could not be rendered
        └── NotARunDirectory      the path holds none of a run directory's files
"""

from __future__ import annotations

from faultkit.errors import FaultkitError


class ReportError(FaultkitError):
    """A report (incident, gate, budget) could not be rendered."""


class NotARunDirectory(ReportError):
    """``path`` is not a run directory (it holds none of the files a run leaves)."""

    def __init__(self, path: str, expected: tuple[str, ...]) -> None:
        self.path = path
        self.expected = expected
        super().__init__(
            f"{path}: not a run directory (expected at least one of {', '.join(expected)}); "
            "pass a directory under runs/ written by a scenario run"
        )
