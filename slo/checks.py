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

Which objectives a window of client requests is held to — error ratio ≤ the node's
``error_ratio_max`` and client TTFT p95 ≤ its ``ttft_s`` — is said once, by
:func:`window_objectives`. The checks after a fault (:func:`checks_from_slo`,
:func:`window_checks`), the steady-state hypothesis before it
(``slo.evidence.steady_state_violations``) and the gate's steady-state phase
(``faultkit.gate.steady.judge_steady_state``) all read it, each in its own words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from faultkit.inventory import SLOSettings
from faultkit.model.windows import WindowSLIs
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


def paged_within(seconds: float) -> Checks:
    """Someone was paged — a page naming the node reached the pager — within ``seconds``
    of the fault taking effect (docs/definitions.md, "Detection to the page").

    Not detected is :func:`detected_within`'s failure, so this check is then not judged;
    an alert Alertmanager silenced or inhibited, or a page that never came, FAILs with
    the reason; no Alertmanager or no pager to date the page is INCONCLUSIVE.
    """

    def fn(m: Measurement) -> CheckResult:
        name, expected = "paged", f"paged within {seconds:g} s"
        paging = m.paging
        if paging is None or not paging.pager:
            missing = ("no Alertmanager in the inventory" if paging is None
                       else "no pager receives Alertmanager's pages (alertmanager.pager_url)")
            return CheckResult(name, False, expected, "not observed", missing,
                               inconclusive=True)
        if m.t_detect is None:
            return CheckResult(name, False, expected, "not detected",
                               "nothing was detected to page about (see detection)",
                               inconclusive=True)
        if paging.page_s is None:
            return CheckResult(name, False, expected, "no page",
                               paging.finding or "no page reached the pager")
        ok = paging.page_s <= seconds
        wait = paging.group_wait_s
        observed = _s(paging.page_s) + (f" (group_wait {wait:g} s)" if wait is not None else "")
        why = (f"paged {paging.page_s:.3f} s after the fault took effect" if ok
               else f"{paging.page_s:.3f} s > {seconds:g} s")
        return CheckResult(name, ok, expected, observed, why)

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


@dataclass(frozen=True)
class WindowObjective:
    """An objective for a window of client requests: its SLI ``attr`` (a field of
    :class:`~faultkit.model.windows.WindowSLIs`) at most ``limit`` (``unit`` follows a value in
    messages). ``key`` names the check (``<key>_<window>``)."""

    key: str
    attr: str
    limit: float
    unit: str

    def value(self, sli: WindowSLIs) -> float | None:
        """The window's figure (``None``: not measured — no requests, or none succeeded)."""
        value: float | None = getattr(sli, self.attr)
        return value

    def within(self, value: float) -> bool:
        """Whether ``value`` meets the objective: at most the limit (the limit included)."""
        return value <= self.limit

    def met(self, sli: WindowSLIs) -> bool | None:
        """Whether the window's figure meets the objective (:meth:`within`); ``None`` when
        there is no figure to compare."""
        value = self.value(sli)
        return None if value is None else self.within(value)


def error_ratio_objective(ratio: float) -> WindowObjective:
    """Client error ratio (failed / requests) at most ``ratio``."""
    return WindowObjective("error_ratio", "error_ratio", ratio, "")


def ttft_p95_objective(seconds: float) -> WindowObjective:
    """Client TTFT p95 (over successful requests) at most ``seconds``."""
    return WindowObjective("ttft_p95", "ttft_p95_s", seconds, " s")


def window_objectives(settings: SLOSettings) -> tuple[WindowObjective, WindowObjective]:
    """The objectives a window of the node's client requests is held to, in this order:
    error ratio ≤ ``error_ratio_max``, then client TTFT p95 ≤ ``ttft_s``."""
    return error_ratio_objective(settings.error_ratio_max), ttft_p95_objective(settings.ttft_s)


def window_check(objective: WindowObjective, window: str = "after") -> Checks:
    """``objective`` held by the measurement's ``window`` (baseline|fault|after).

    No value: FAIL if the window had requests and all failed (only latency figures can be
    missing then; the error ratio is 1 and judged as usual), else inconclusive — no data is
    not a pass, and not a failure either.
    """
    name, attr, limit, unit = (f"{objective.key}_{window}", objective.attr, objective.limit,
                               objective.unit)

    def fn(m: Measurement) -> CheckResult:
        expected = f"{window} {attr} ≤ {limit:g}{unit}"
        sli = m.slis.get(window)
        value = objective.value(sli) if sli is not None else None
        if value is None:
            breach, why = _no_value(m, window, attr)
            observed = "no successful request" if breach else "no data"
            return CheckResult(name, False, expected, observed, why, inconclusive=not breach)
        ok = objective.within(value)
        why = f"{value:.4g} ≤ {limit:g}" if ok else f"{value:.4g} > {limit:g}"
        return CheckResult(name, ok, expected, f"{value:.4g}{unit}", why)

    return check(fn)


def window_checks(settings: SLOSettings, window: str = "after") -> Checks:
    """The node's :func:`window_objectives` held by ``window``: error ratio, then TTFT p95."""
    error_ratio, ttft_p95 = window_objectives(settings)
    return window_check(error_ratio, window) & window_check(ttft_p95, window)


def ttft_p95_below(seconds: float, window: str = "after") -> Checks:
    """Client TTFT p95 in ``window`` (baseline|fault|after) at most ``seconds``."""
    return window_check(ttft_p95_objective(seconds), window)


def error_ratio_at_most(ratio: float, window: str = "after") -> Checks:
    """Client error ratio in ``window`` at most ``ratio``."""
    return window_check(error_ratio_objective(ratio), window)


def checks_from_slo(settings: SLOSettings) -> Checks:
    """The default check set for a node's SLO settings (inventory defaults + overrides):
    detection, recovery, recovery without intervention, loss (if capped), the page (if an
    objective), error ratio and TTFT p95 after the fault."""
    out = (
        detected_within(settings.detection_s_max)
        & recovered_within(settings.recovery_s_max)
        & recovered_without_intervention()
    )
    if settings.lost_max is not None:
        out = out & lost_at_most(settings.lost_max)
    if settings.page_s_max is not None:
        out = out & paged_within(settings.page_s_max)
    return out & window_checks(settings)
