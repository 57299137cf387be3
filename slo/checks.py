"""Verdicts: small composable checks over a :class:`Measurement`.

Compose them the way tenacity composes stop conditions::

    verdict = (ttft_p95_below(2.0) & lost_at_most(0) & recovered_within(60))(measurement)

Each check returns a :class:`CheckResult` (name, passed, expected, observed, one-line
why); a combination returns a :class:`Verdict` holding every result (no short-circuit, so
a report shows all of them) and the measurement's run-level evidence gaps
(``Measurement.inconclusive``). Any plain callable ``(Measurement) -> CheckResult`` may be
combined with ``&`` once wrapped in :func:`check` or passed to :func:`judge`.

A check that lacks the evidence to judge returns an *inconclusive* result (``why`` says
what was missing) rather than a failure; the verdict is then INCONCLUSIVE unless another
check failed (see :mod:`slo.verdict`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from faultkit.inventory import SLOSettings
from slo.types import Measurement
from slo.verdict import NO_CHECKS, CheckResult, Verdict

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
        return judge(measurement, self)


def check(fn: CheckFn) -> Checks:
    """Make a plain callable composable with ``&``."""
    return Checks((fn,))


def judge(measurement: Measurement, checks: Iterable[CheckFn] | Checks) -> Verdict:
    """Apply checks (a :class:`Checks` or any iterable of callables) to a measurement.

    The verdict carries ``measurement.inconclusive`` as its run-level reasons (non-empty ⇒
    INCONCLUSIVE); with no checks at all it is INCONCLUSIVE with :data:`NO_CHECKS`.
    """
    fns = checks.fns if isinstance(checks, Checks) else tuple(checks)
    results = tuple(fn(measurement) for fn in fns)
    reasons = tuple(dict.fromkeys(measurement.inconclusive))
    if not results:
        reasons = (*reasons, NO_CHECKS)
    return Verdict(results, inconclusive=reasons)


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f} s"


# --------------------------------------------------------------------------- the checks


#: the signals that count as detection: monitoring's, never the harness's own probe
MONITORING_SIGNALS = frozenset({"alert", "up"})


def detected_within(seconds: float) -> Checks:
    """*Monitoring* detected the fault — an alert firing or ``up == 0`` (``detect_signal``
    in :data:`MONITORING_SIGNALS`) — within ``seconds`` of the fault taking effect.

    The harness's readiness probe (``probe_detection_s``) is shown in ``observed`` but never
    satisfies the check: a fault only the harness noticed was not detected.
    """

    def fn(m: Measurement) -> CheckResult:
        name, expected = "detection", f"detected by monitoring within {seconds:g} s"
        probe = m.probe_detection_s
        probe_note = "" if probe is None else f" (harness probe: {probe:.3f} s)"
        if m.detection_s is None or m.detect_signal not in MONITORING_SIGNALS:
            why = "no alert firing and no up == 0 in the window"
            if probe is not None:
                why += "; only the harness's probe saw it, which is not detection"
            return CheckResult(name, False, expected, "not detected" + probe_note, why)
        ok = m.detection_s <= seconds
        observed = f"{_s(m.detection_s)} via {m.detect_signal}{probe_note}"
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
    """The node recovered (docs/definitions.md) within ``seconds`` of the fault taking effect
    (who brought it back is :func:`recovered_without_intervention`'s concern)."""

    def fn(m: Measurement) -> CheckResult:
        name, expected = "recovery", f"recovered within {seconds:g} s"
        if m.recovery_s is None:
            return CheckResult(name, False, expected, "not recovered",
                               "no healthy stretch lasting to the end of the window")
        ok = m.recovery_s <= seconds
        why = "recovered in time" if ok else f"{m.recovery_s:.3f} s > {seconds:g} s"
        return CheckResult(name, ok, expected, _s(m.recovery_s), why)

    return check(fn)


def recovered_without_intervention() -> Checks:
    """The node came back by itself: the harness did not have to intervene
    (``measurement.harness_intervened`` is empty). A recovery the harness brought about is
    not the system's own, however fast it was."""

    def fn(m: Measurement) -> CheckResult:
        name, expected = "recovered_without_intervention", "no harness intervention"
        if not m.harness_intervened:
            return CheckResult(name, True, expected, "none", "the node recovered on its own")
        did = "; ".join(m.harness_intervened)
        return CheckResult(name, False, expected, did,
                           f"did not recover without intervention: {did}")

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


def _no_value(m: Measurement, window: str, attr: str) -> tuple[bool, str]:
    """Why ``attr`` of ``window`` has no value, and whether that is a breach (``True``: the
    window had requests and every one failed, so there is no latency to time) rather than
    missing evidence (``False``: window not measured, no requests, or no figure recorded)."""
    sli = m.slis.get(window)
    if sli is None:
        return False, f"the {window} window was not measured"
    if sli.requests == 0:
        return False, f"no requests in the {window} window to judge"
    if sli.ok == 0:
        return True, f"all {sli.requests} requests in the {window} window failed"
    return False, f"no {attr} recorded for the {sli.ok} successful requests in the {window} window"


def _window_check(name: str, window: str, limit: float, attr: str, unit: str) -> Checks:
    """``attr`` of the window's SLIs at most ``limit``.

    No value: FAIL if the window had requests and all failed (only latency figures can be
    missing then; the error ratio is 1 and judged as usual), else inconclusive — no data is
    not a pass, and not a failure either.
    """

    def fn(m: Measurement) -> CheckResult:
        expected = f"{window} {attr} ≤ {limit:g}{unit}"
        sli = m.slis.get(window)
        value = getattr(sli, attr) if sli is not None else None
        if value is None:
            breach, why = _no_value(m, window, attr)
            observed = "no successful request" if breach else "no data"
            return CheckResult(name, False, expected, observed, why, inconclusive=not breach)
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
    """The default check set for a node's SLO settings (inventory defaults + overrides):
    detection, recovery, recovery without intervention, loss (if capped), error ratio and
    TTFT p95 after the fault."""
    out = (
        detected_within(settings.detection_s_max)
        & recovered_within(settings.recovery_s_max)
        & recovered_without_intervention()
    )
    if settings.lost_max is not None:
        out = out & lost_at_most(settings.lost_max)
    return out & error_ratio_at_most(settings.error_ratio_max) & ttft_p95_below(settings.ttft_s)
