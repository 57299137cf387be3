"""Verdicts: small composable checks over a :class:`Measurement`.

Compose them the way tenacity composes stop conditions::

    verdict = (ttft_p95_below(2.0) & lost_at_most(0) & recovered_within(60))(measurement)

Each check returns a :class:`CheckResult` (name, passed, expected, observed, one-line
why); a combination returns a :class:`Verdict` holding every result (no short-circuit, so
a report shows all of them). Any plain callable ``(Measurement) -> CheckResult`` may be
combined with ``&`` once wrapped in :func:`check` or passed to :func:`judge`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from faultkit.inventory import SLOSettings
from slo.types import CheckResult, Measurement, Verdict

CheckFn = Callable[[Measurement], CheckResult]


@dataclass(frozen=True)
class Checks:
    """A conjunction of checks; calling it judges a measurement into a :class:`Verdict`."""

    fns: tuple[CheckFn, ...]

    def __and__(self, other: Checks | CheckFn) -> Checks:
        return Checks(self.fns + (other.fns if isinstance(other, Checks) else (other,)))

    def __rand__(self, other: CheckFn) -> Checks:
        return Checks((other, *self.fns))

    def __call__(self, measurement: Measurement) -> Verdict:
        return Verdict(tuple(fn(measurement) for fn in self.fns))


def check(fn: CheckFn) -> Checks:
    """Make a plain callable composable with ``&``."""
    return Checks((fn,))


def judge(measurement: Measurement, checks: Iterable[CheckFn] | Checks) -> Verdict:
    """Apply checks (a :class:`Checks` or any iterable of callables) to a measurement."""
    fns = checks.fns if isinstance(checks, Checks) else tuple(checks)
    return Verdict(tuple(fn(measurement) for fn in fns))


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} s"


# --------------------------------------------------------------------------- the checks


def detected_within(seconds: float) -> Checks:
    """The fault was detected (any signal) within ``seconds`` of injection."""

    def fn(m: Measurement) -> CheckResult:
        name, expected = "detection", f"detected within {seconds:g} s"
        if m.detection_s is None:
            return CheckResult(name, False, expected, "not detected",
                               "no alert, up == 0 or failed probe in the window")
        ok = m.detection_s <= seconds
        observed = f"{_s(m.detection_s)} via {m.detect_signal}"
        why = (f"detected by {m.detect_signal} after {m.detection_s:.3f} s"
               if ok else f"{m.detection_s:.3f} s > {seconds:g} s")
        return CheckResult(name, ok, expected, observed, why)

    return check(fn)


def alert_fired_within(seconds: float) -> Checks:
    """An alert for the node reached ``firing`` within ``seconds`` (a recall check)."""

    def fn(m: Measurement) -> CheckResult:
        name, expected = "alert_fired", f"an alert firing within {seconds:g} s"
        t = m.detection_by_signal_s.get("alert")
        if t is None:
            return CheckResult(name, False, expected, "no alert fired",
                               "monitoring missed the fault (recall miss)")
        ok = t <= seconds
        return CheckResult(name, ok, expected, _s(t),
                           "alert fired in time" if ok else f"alert after {t:.3f} s")

    return check(fn)


def recovered_within(seconds: float) -> Checks:
    """The node recovered (DESIGN.md definition) within ``seconds`` of injection."""

    def fn(m: Measurement) -> CheckResult:
        name, expected = "recovery", f"recovered within {seconds:g} s"
        if m.recovery_s is None:
            return CheckResult(name, False, expected, "not recovered",
                               "no healthy stretch lasting to the end of the window")
        ok = m.recovery_s <= seconds
        why = "recovered in time" if ok else f"{m.recovery_s:.3f} s > {seconds:g} s"
        return CheckResult(name, ok, expected, _s(m.recovery_s), why)

    return check(fn)


def lost_at_most(n: int) -> Checks:
    """At most ``n`` requests were lost (clean rejections included)."""

    def fn(m: Measurement) -> CheckResult:
        ok = m.lost_total <= n
        classes = ", ".join(f"{k}={v}" for k, v in m.lost_by_class.items()) or "none"
        observed = f"{m.lost_total} lost ({classes})"
        why = f"{m.lost_total} ≤ {n}" if ok else f"{m.lost_total} lost > {n} allowed"
        return CheckResult("lost_requests", ok, f"≤ {n} lost", observed, why)

    return check(fn)


def _window_check(name: str, window: str, limit: float, attr: str, unit: str) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        expected = f"{window} {attr} ≤ {limit:g}{unit}"
        sli = m.slis.get(window)
        value = getattr(sli, attr) if sli is not None else None
        if value is None:
            return CheckResult(name, False, expected, "no data",
                               f"no successful requests in the {window} window to judge")
        ok = value <= limit
        why = f"{value:.4g} ≤ {limit:g}" if ok else f"{value:.4g} > {limit:g}"
        return CheckResult(name, ok, expected, f"{value:.4g}{unit}", why)

    return check(fn)


def ttft_p95_below(seconds: float, window: str = "after") -> Checks:
    """Client TTFT p95 in ``window`` (baseline|fault|after) at most ``seconds``."""
    return _window_check(f"ttft_p95_{window}", window, seconds, "ttft_p95_s", " s")


def error_ratio_at_most(ratio: float, window: str = "after") -> Checks:
    """Client error ratio in ``window`` at most ``ratio``."""
    return _window_check(f"error_ratio_{window}", window, ratio, "error_ratio", "")


def checks_from_slo(settings: SLOSettings) -> Checks:
    """The default check set for a node's SLO settings (inventory defaults + overrides)."""
    out = detected_within(settings.detection_s_max) & recovered_within(settings.recovery_s_max)
    if settings.lost_max is not None:
        out = out & lost_at_most(settings.lost_max)
    return out & error_ratio_at_most(settings.error_ratio_max) & ttft_p95_below(settings.ttft_s)
