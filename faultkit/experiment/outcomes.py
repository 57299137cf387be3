"""How a run ends early: as a plan only (a dry run), or INCONCLUSIVE before injecting.

Both are exceptions the runner raises and an adapter turns into what its users read: the
pytest plugin skips a test on :class:`DryRunPlan` and reports :class:`NotJudgeable` as
the INCONCLUSIVE failure it is. Light (no imports): the plugin's entry module imports it.
"""

from __future__ import annotations

__all__ = ["DryRunPlan", "NotJudgeable"]


class DryRunPlan(Exception):
    """Raised inside a dry run once the plan is on the timeline; nothing acted.

    The message is the plan (the fault's ``describe()``); the plugin turns it into a skip.
    """


class NotJudgeable(Exception):
    """The run ended before injecting because evidence was missing; the verdict is
    INCONCLUSIVE (``Experiment.verdict``, ``verdict.json``) and :attr:`reason` says what
    was missing."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"INCONCLUSIVE: {reason}")
        self.reason = reason
