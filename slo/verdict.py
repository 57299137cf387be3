"""What judgement produces: :class:`CheckResult` and :class:`Verdict`, with three outcomes.

- **PASS** — every check was judged and passed, and the run's evidence is complete.
- **FAIL** — at least one check was judged and failed (the evidence shows a breach).
- **INCONCLUSIVE** — evidence needed to judge is missing: the run says so
  (``Verdict.inconclusive``, e.g. "Prometheus not ready …", "no evidence that the fault took
  effect …"), nothing was judged, or a check could not be judged (``CheckResult.inconclusive``).

INCONCLUSIVE is never a pass: pytest's exit code, CI and the gate count it as a failure;
reports show it apart from FAIL, with what evidence was missing. The order of precedence is
run-level reasons / no checks > a failed check > an unjudged check > PASS: a breach seen in
a run whose evidence is incomplete cannot be trusted either, so that run is INCONCLUSIVE
(and its summary still names the failed checks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Outcome = Literal["PASS", "FAIL", "INCONCLUSIVE"]

#: the run-level reason a verdict without checks carries
NO_CHECKS = "no checks were judged"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One judged objective: what was expected, what was observed, and why it passed/failed.

    ``inconclusive`` means the check could not be judged for lack of evidence (``why`` says
    what was missing); such a check has ``passed = False`` and is neither a pass nor a
    failure. ``passed`` and ``inconclusive`` together are a contradiction (``ValueError``).
    """

    name: str
    passed: bool
    expected: str
    observed: str
    why: str
    inconclusive: bool = False

    def __post_init__(self) -> None:
        if self.passed and self.inconclusive:
            raise ValueError(f"check {self.name!r} cannot be both passed and inconclusive")

    @property
    def failed(self) -> bool:
        """Judged and not met (an unjudged check is not a failure)."""
        return not self.passed and not self.inconclusive

    @property
    def outcome(self) -> Outcome:
        if self.inconclusive:
            return "INCONCLUSIVE"
        return "PASS" if self.passed else "FAIL"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckResult:
        """Read one check; unknown keys are ignored, missing required ones raise ``TypeError``."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a check must be an object, not {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a scenario: its checks plus the run-level reasons it cannot be judged.

    ``outcome`` is INCONCLUSIVE if ``inconclusive`` is non-empty or there are no checks;
    else FAIL if any check failed; else INCONCLUSIVE if any check is inconclusive; else PASS.
    ``passed`` is true only for PASS.
    """

    checks: tuple[CheckResult, ...] = ()
    #: run-level evidence gaps (e.g. "Prometheus not ready at …"); non-empty ⇒ INCONCLUSIVE
    inconclusive: tuple[str, ...] = ()

    @property
    def outcome(self) -> Outcome:
        if self.inconclusive or not self.checks:
            return "INCONCLUSIVE"
        if self.failures:
            return "FAIL"
        if self.unjudged:
            return "INCONCLUSIVE"
        return "PASS"

    @property
    def passed(self) -> bool:
        return self.outcome == "PASS"

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """Checks judged and not met (unjudged checks are in :attr:`unjudged`)."""
        return tuple(c for c in self.checks if c.failed)

    @property
    def unjudged(self) -> tuple[CheckResult, ...]:
        """Checks that could not be judged for lack of evidence."""
        return tuple(c for c in self.checks if c.inconclusive)

    @property
    def missing_evidence(self) -> tuple[str, ...]:
        """Every evidence gap, one line each: run-level reasons (just :data:`NO_CHECKS` when
        there are neither reasons nor checks), then ``"<check>: <why>"`` per unjudged check."""
        reasons = list(self.inconclusive)
        if not self.checks and not reasons:
            reasons.append(NO_CHECKS)
        reasons.extend(f"{c.name}: {c.why}" for c in self.unjudged)
        return tuple(reasons)

    def summary(self) -> str:
        """One line starting with the outcome word.

        ``PASS (n checks)``; ``FAIL: <check>: <why>; …``; ``INCONCLUSIVE: missing evidence:
        <gap>; …`` (followed by the failed checks, if any, and for FAIL by the unjudged ones).
        """
        failed = "; ".join(f"{c.name}: {c.why}" for c in self.failures)
        outcome = self.outcome
        if outcome == "PASS":
            return f"PASS ({len(self.checks)} checks)"
        if outcome == "FAIL":
            unjudged = "; ".join(f"{c.name}: {c.why}" for c in self.unjudged)
            return f"FAIL: {failed}" + (f" (not judged: {unjudged})" if unjudged else "")
        line = "INCONCLUSIVE: missing evidence: " + "; ".join(self.missing_evidence)
        return line + (f" (also failed: {failed})" if failed else "")

    def to_json(self) -> dict[str, Any]:
        """``outcome``, ``passed``, ``inconclusive`` and ``checks`` (each with its own
        ``inconclusive`` flag); ``outcome`` and ``passed`` are derived, for readers."""
        return {
            "outcome": self.outcome,
            "passed": self.passed,
            "inconclusive": list(self.inconclusive),
            "checks": [dataclasses.asdict(c) for c in self.checks],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """Read :meth:`to_json`'s output, or an older file with only ``passed``/``checks``.

        ``outcome`` and ``passed`` are recomputed from the checks and reasons, never trusted.
        Raises ``TypeError``/``ValueError`` for a file that does not match.
        """
        checks = data.get("checks") or ()
        reasons = data.get("inconclusive") or ()
        if not isinstance(checks, Sequence) or isinstance(checks, str):
            raise TypeError("verdict checks must be a list")
        if not isinstance(reasons, Sequence) or isinstance(reasons, str):
            raise TypeError("verdict inconclusive must be a list of reasons")
        if not all(isinstance(r, str) for r in reasons):
            raise TypeError("verdict inconclusive reasons must be strings")
        return cls(
            checks=tuple(CheckResult.from_json(c) for c in checks),
            inconclusive=tuple(reasons),
        )
