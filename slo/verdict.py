"""What judgement produces: :class:`CheckResult` and :class:`Verdict`, with four outcomes.

- **PASS** — every check was judged and passed, and the run's evidence is complete.
- **FAIL** — at least one check was judged and failed (the evidence shows a breach).
- **INCONCLUSIVE** — evidence needed to judge is missing: the run says so
  (``Verdict.inconclusive``, e.g. "Prometheus not ready …", "no evidence that the fault took
  effect …"), nothing was judged, or a check could not be judged (``CheckResult.inconclusive``).
- **ACCEPTED** — a FAIL whose failed checks are *all* covered by unexpired accepted findings
  of the node (``Verdict.accepted``, set by :func:`slo.accepted.apply_accepted`), every
  other check judged and passed. It counts as a pass (``passed`` is true); anything new — a
  failed check no finding covers, an unjudged check, missing evidence — keeps FAIL or
  INCONCLUSIVE.

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

Outcome = Literal["PASS", "FAIL", "INCONCLUSIVE", "ACCEPTED"]

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
class Acceptance:
    """An accepted finding as applied to (or, expired, found for) one failed check:
    ``scenario`` is the finding's scenario pattern, ``expires`` an ISO date or ``None``."""

    check: str
    reason: str
    scenario: str
    expires: str | None = None

    def until(self) -> str:
        """``"until <date>"``, or ``"no expiry"``."""
        return f"until {self.expires}" if self.expires else "no expiry"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Acceptance:
        if not isinstance(data, Mapping):
            raise TypeError(f"an accepted finding must be an object, not {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a scenario: its checks plus the run-level reasons it cannot be judged.

    ``outcome`` is INCONCLUSIVE if ``inconclusive`` is non-empty or there are no checks;
    else, if any check failed, ACCEPTED when every failed check is covered by ``accepted``
    and no check is unjudged, FAIL otherwise; else INCONCLUSIVE if any check is
    inconclusive; else PASS. ``passed`` is true for PASS and ACCEPTED (both count as a pass).
    """

    checks: tuple[CheckResult, ...] = ()
    #: run-level evidence gaps (e.g. "Prometheus not ready at …"); non-empty ⇒ INCONCLUSIVE
    inconclusive: tuple[str, ...] = ()
    #: accepted findings applied, one per failed check (:func:`slo.accepted.apply_accepted`)
    accepted: tuple[Acceptance, ...] = ()
    #: accepted findings that would have covered a failed check but have expired
    expired: tuple[Acceptance, ...] = ()

    @property
    def outcome(self) -> Outcome:
        if self.inconclusive or not self.checks:
            return "INCONCLUSIVE"
        if self.failures:
            return "ACCEPTED" if self._all_failures_accepted() else "FAIL"
        if self.unjudged:
            return "INCONCLUSIVE"
        return "PASS"

    def _all_failures_accepted(self) -> bool:
        covered = {a.check for a in self.accepted}
        return (
            bool(covered)
            and not self.unjudged
            and all(c.name in covered for c in self.failures)
        )

    @property
    def passed(self) -> bool:
        """PASS or ACCEPTED: the verdict counts as a pass."""
        return self.outcome in ("PASS", "ACCEPTED")

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

        ``PASS (n checks)``; ``ACCEPTED (known finding: <reason>, until <date>)``;
        ``FAIL: <check>: <why>; …``; ``INCONCLUSIVE: missing evidence: <gap>; …`` (followed
        by the failed checks, if any, and for FAIL by the unjudged ones and any accepted
        finding that expired).
        """
        failed = "; ".join(f"{c.name}: {c.why}" for c in self.failures)
        outcome = self.outcome
        if outcome == "PASS":
            return f"PASS ({len(self.checks)} checks)"
        if outcome == "ACCEPTED":
            known = "; ".join(
                dict.fromkeys(f"known finding: {a.reason}, {a.until()}" for a in self.accepted)
            )
            return f"ACCEPTED ({known})"
        if outcome == "FAIL":
            unjudged = "; ".join(f"{c.name}: {c.why}" for c in self.unjudged)
            return (
                f"FAIL: {failed}"
                + (f" (not judged: {unjudged})" if unjudged else "")
                + "".join(f" ({line})" for line in self.expired_lines())
            )
        line = "INCONCLUSIVE: missing evidence: " + "; ".join(self.missing_evidence)
        return line + (f" (also failed: {failed})" if failed else "")

    def accepted_lines(self) -> tuple[str, ...]:
        """``"<check>: <why> (accepted: <reason>, until <date>)"`` per accepted failure."""
        by_check = {a.check: a for a in self.accepted}
        return tuple(
            f"{c.name}: {c.why} (accepted: {a.reason}, {a.until()})"
            for c in self.failures
            if (a := by_check.get(c.name)) is not None
        )

    def expired_lines(self) -> tuple[str, ...]:
        """``"accepted finding for <check> expired on <date>: <reason>"`` per expired one."""
        return tuple(
            f"accepted finding for {a.check} expired on {a.expires}: {a.reason}"
            for a in self.expired
        )

    def to_json(self) -> dict[str, Any]:
        """``outcome``, ``passed``, ``inconclusive``, ``checks`` (each with its own
        ``inconclusive`` flag), ``accepted_findings`` (applied) and ``expired_findings``;
        ``outcome`` and ``passed`` are derived, for readers."""
        return {
            "outcome": self.outcome,
            "passed": self.passed,
            "inconclusive": list(self.inconclusive),
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "accepted_findings": [dataclasses.asdict(a) for a in self.accepted],
            "expired_findings": [dataclasses.asdict(a) for a in self.expired],
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
        findings = {}
        for key in ("accepted_findings", "expired_findings"):
            found = data.get(key) or ()
            if not isinstance(found, Sequence) or isinstance(found, str):
                raise TypeError(f"verdict {key} must be a list")
            findings[key] = tuple(Acceptance.from_json(a) for a in found)
        return cls(
            checks=tuple(CheckResult.from_json(c) for c in checks),
            inconclusive=tuple(reasons),
            accepted=findings["accepted_findings"],
            expired=findings["expired_findings"],
        )
