"""Detection: the first moment monitoring showed a fault (docs/definitions.md, "Detection").

Pure functions over the observer's timeline events. :func:`detect` is the one place that
picks the signal (an alert firing, else ``up == 0``); the harness's readiness probe is
returned as a figure, never as detection. Times are epoch seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

from faultkit.model.events import EventKind
from faultkit.model.records import Event
from slo.carried import carried_over_alerts
from slo.types import DetectSignal

__all__ = ["detect"]


def _state_time(event: Event) -> float:
    """When the monitoring system itself recorded the change this event reports."""
    for key in ("t_state", "t_sample"):
        value = event.data.get(key)
        if isinstance(value, int | float):
            return float(value)
    return event.t


#: signal kinds on the observer's track → the name measurement reports
_SIGNALS: dict[str, str] = {
    EventKind.ALERT_FIRING: "alert", EventKind.UP_0: "up", EventKind.HEALTH_FAIL: "probe",
    # a rule with a for: goes pending first: shown, never detection (nobody is told yet)
    EventKind.ALERT_PENDING: "pending",
}


#: the transition that ends what each signal kind shows (a scrape that succeeds again, an
#: alert that resolves)
_REVERSALS: dict[str, str] = {
    EventKind.ALERT_FIRING: EventKind.ALERT_RESOLVED, EventKind.UP_0: EventKind.UP_1,
}


def _held(timeline: Sequence[Event], node: str, event: Event, t_from: float) -> bool:
    """Whether what ``event`` shows still held at ``t_from`` (no reversal stamped between)."""
    reversal = _REVERSALS.get(event.kind)
    name = event.data.get("alertname")
    t = _state_time(event)
    return not any(
        e.source == "observer" and e.node == node and e.kind == reversal
        and (name is None or e.data.get("alertname") == name)
        and t < _state_time(e) < t_from
        for e in timeline
    )


def detect(
    timeline: Sequence[Event], node: str, t_from: float, t_acting: float | None = None
) -> tuple[float | None, DetectSignal | None, str | None, dict[str, float], list[str]]:
    """First moment each signal showed the fault at or after ``t_from``; pick by priority.

    Returns (t_detect, monitoring signal, detail, first time per signal incl. ``probe``
    and ``pending``, notes). Only ``alert`` and ``up`` are detection; ``probe`` and an
    alert still ``pending`` (its rule's ``for:`` not yet elapsed) are reported as figures.
    A signal counts only as a *transition* (an alert already firing before the fault
    began shows up as no new ``alert_firing`` event).

    Prometheus stamps a scrape with the moment it *began* and an alert with the evaluation
    tick that fired it, so the scrape under way when the fault took effect (and the alert
    it fires) carry a time a little before ``t_from``. A monitoring transition stamped
    before ``t_from`` therefore counts as detection *at* ``t_from`` (0 s, never a negative
    figure) when the observer first saw it at or after the fault's first act
    (``t_acting``) and it still held at ``t_from``; the notes say so. Any other transition
    stamped before ``t_from`` is a finding about the signal (notes), never detection. So is
    an alert that was active before the fault (:func:`slo.carried.carried_over_alerts`), whenever it
    moves to firing.
    """
    firsts: dict[str, tuple[float, str]] = {}
    early: dict[str, float] = {}
    straddled: dict[str, tuple[float, float]] = {}  # signal -> (stamp, seen)
    carried = carried_over_alerts(timeline, node, t_from, t_acting)
    carried_notes: dict[str, str] = {}
    for event in timeline:
        if event.source != "observer" or event.node != node or event.kind not in _SIGNALS:
            continue
        old = next((c for c in carried if c.instance(event)), None)
        if old is not None:
            if event.kind == EventKind.ALERT_FIRING:
                carried_notes.setdefault(old.name, (
                    f"alert {old.name} was already active {t_from - old.active_at:.1f} s "
                    f"before the fault took effect: its firing at "
                    f"{_state_time(event) - t_from:+.1f} s shows what held before the "
                    "fault, not counted as detection"))
            continue
        if event.kind == EventKind.ALERT_PENDING and not event.data.get("for_s"):
            continue  # a rule without a for: fires at once: its pending tells nothing
        signal = _SIGNALS[event.kind]
        t = _state_time(event)
        if event.kind == EventKind.ALERT_FIRING:
            detail = f"alert {event.data.get('alertname')} firing"
        elif event.kind == EventKind.ALERT_PENDING:
            detail = f"alert {event.data.get('alertname')} pending"
        elif event.kind == EventKind.UP_0:
            detail = "up == 0 (scrape failed)"
        else:
            detail = f"readiness probe failed: {event.data.get('detail')}"
        if t < t_from:
            caused = (signal != "probe" and t_acting is not None and event.t >= t_acting
                      and _held(timeline, node, event, t_from))
            if caused and signal not in straddled:
                straddled[signal] = (t, event.t)
                t, detail = t_from, f"{detail}, stamped {t_from - t:.3f} s before t_effect"
            else:
                if event.t >= t_from - 0.5 and signal not in firsts:
                    early.setdefault(signal, t)  # seen around the fault but stamped before it
                continue
        if signal not in firsts or t < firsts[signal][0]:
            firsts[signal] = (t, detail)
    notes = [f"the {signal} signal was stamped {t_from - t:.3f} s before the fault took "
             "effect (not counted as detection)" for signal, t in early.items()
             if signal not in firsts]
    notes += [f"the {signal} signal was stamped {t_from - stamp:.3f} s before the fault took "
              f"effect by the scrape or evaluation under way then (first seen "
              f"{seen - t_from:+.3f} s after it): counted as detection at t_effect"
              for signal, (stamp, seen) in straddled.items()
              if signal in firsts and firsts[signal][0] == t_from]
    notes += carried_notes.values()
    by_signal = {k: v[0] for k, v in firsts.items()}
    for signal in ("alert", "up"):
        if signal in firsts:
            t, detail = firsts[signal]
            return t, signal, detail, by_signal, notes  # type: ignore[return-value]
    return None, None, None, by_signal, notes
