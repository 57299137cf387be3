"""A scenario's live status: what it is doing now, as one line of text.

::

    kill[sim-vllm] · recovering 12 s · total 31 s · last 1 s: 0 ok, 10 failed · node NOT READY

:class:`LiveStatus` is the model of one test: its phase, set by the experiment at each step
of the run (:data:`PHASES`) and by the fault's own ``inject_start``/``inject_end``/
``revert_start`` events, with the time spent in it and in the whole test; the requests the
load generator's ledger finished in the last second (``ok``; ``failed`` is every other
terminal status); the node's readiness as the observer's last probe saw it; the alerts for
the node Prometheus has firing or pending, or that Prometheus is down. The experiment feeds
it every timeline event (``Experiment.emit``) and every ledger record of the node's load
(``BackgroundLoad(on_record=…)``). It is thread-safe and costs a lock per event and per
record when nothing draws it. Durations are on the monotonic clock.

:func:`render` makes the line's text from a :class:`Snapshot` (:func:`segments`,
:func:`compose`);
:mod:`faultkit.plugin.terminal` draws it on pytest's terminal (the runner never imports the
plugin: the plugin reads this model).

Light (the standard library and the dependency-free ``faultkit.model.events`` and
``faultkit.runtime.progress``): the plugin's entry module imports it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from faultkit.model.events import EventKind
from faultkit.runtime.progress import format_elapsed

if TYPE_CHECKING:
    from faultkit.model.records import Event

__all__ = ["PHASES", "SEP", "LiveStatus", "Part", "Snapshot", "compose", "render", "segments"]

#: the phases of a scenario, in order (a scenario may name its own)
PHASES = (
    "setup",  # the fixtures are being set up; nothing runs yet
    "preflight",  # the evidence the verdict needs: Prometheus, alert rules, clock, container
    "baseline",  # load and observer running; the steady-state hypothesis is checked
    "inject",  # the fault is being applied
    "hold",  # the fault is applied (hold_s, or while `during` runs)
    "revert",  # the fault is being reverted
    "recovering",  # waiting until the node has recovered (or the deadline)
    "drain",  # new requests stopped; in-flight ones finish (up to 10 s)
    "measure",  # Docker events, Prometheus series, the measurement
    "verdict",  # the checks
    "report",  # the incident report is rendered
)

#: the fault's own timeline events that move the phase on
_FAULT_PHASES: Mapping[str, str] = {
    EventKind.INJECT_START: "inject",
    EventKind.INJECT_END: "hold",
    EventKind.REVERT_START: "revert",
}

#: between two parts of the line
SEP = " · "
_STYLES = {"bold": "\x1b[1m", "red": "\x1b[31m", "yellow": "\x1b[33m"}
_RESET = "\x1b[0m"


# --------------------------------------------------------------------------- the model


class Finished(Protocol):
    """What is read of a finished request (a :class:`~faultkit.model.records.RequestRecord`)."""

    @property
    def status(self) -> str: ...


@dataclass(frozen=True)
class Snapshot:
    """What the line shows, at one moment. ``ok``/``failed`` are ``None`` before the first
    request finished, ``ready`` before the first probe; ``alerts_known`` once the observer
    has reported anything (it writes changes only, so silence then means "no alerts")."""

    label: str
    phase: str
    phase_s: float
    total_s: float
    ok: int | None = None
    failed: int | None = None
    ready: bool | None = None
    firing: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    prometheus_down: bool = False
    alerts_known: bool = False


class LiveStatus:
    """The live status of one test; see the module docstring.

    ``label`` names the test on the line (``kill[sim-vllm]``). ``clock`` is monotonic
    seconds (tests pass a fake). ``on_change`` is called, outside the lock, after each
    phase change (the renderer redraws at once rather than at its next tick).
    """

    def __init__(
        self,
        label: str = "",
        *,
        clock: Callable[[], float] = time.monotonic,
        window_s: float = 1.0,
    ) -> None:
        self.label = label
        self.clock = clock
        self.window_s = window_s
        self.on_change: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._t0 = clock()
        self._phase = "setup"
        self._t_phase = self._t0
        self._finished: deque[tuple[float, bool]] = deque()  # (monotonic t, ok)
        self._load_seen = False
        self._ready: bool | None = None
        self._alerts: dict[tuple[str, str], tuple[str, str]] = {}  # key → (name, state)
        self._prometheus_down = False
        self._observer_seen = False

    def __repr__(self) -> str:  # shown in a failed test's traceback (the fixture's value)
        return f"LiveStatus({self.label!r}, phase={self._phase!r})"

    @property
    def current_phase(self) -> str:
        return self._phase

    def phase(self, name: str) -> None:
        """Enter phase ``name`` (its elapsed time starts again); the same phase again is a
        no-op."""
        with self._lock:
            if name == self._phase:
                return
            self._phase = name
            self._t_phase = self.clock()
        notify = self.on_change
        if notify is not None:
            notify()

    def on_event(self, event: Event) -> None:
        """Take in one timeline event: the fault's phases, readiness, alerts, Prometheus."""
        kind, data = str(event.kind), event.data
        phase = _FAULT_PHASES.get(kind)
        if phase is not None:
            self.phase(phase)
            return
        with self._lock:
            if kind in (EventKind.HEALTH_OK, EventKind.HEALTH_FAIL):
                self._ready = kind == EventKind.HEALTH_OK
            elif kind == EventKind.PROMETHEUS_DOWN:
                self._prometheus_down = True
            elif kind == EventKind.PROMETHEUS_UP:
                self._prometheus_down = False
            elif kind in (
                EventKind.ALERT_PENDING,
                EventKind.ALERT_FIRING,
                EventKind.ALERT_RESOLVED,
            ):
                name = str(data.get("alertname", "?"))
                labels = data.get("labels") or {}
                key = (name, ",".join(f"{k}={v}" for k, v in sorted(dict(labels).items())))
                if kind == EventKind.ALERT_RESOLVED:
                    self._alerts.pop(key, None)
                else:
                    self._alerts[key] = (name, kind.removeprefix("alert_"))
            else:
                return
            self._observer_seen = True

    def on_record(self, record: Finished) -> None:
        """Take in one finished request (the ledger's ``on_record`` callback)."""
        now = self.clock()
        with self._lock:
            self._load_seen = True
            self._finished.append((now, record.status == "ok"))
            self._prune(now)

    def _prune(self, now: float) -> None:
        while self._finished and self._finished[0][0] <= now - self.window_s:
            self._finished.popleft()

    def snapshot(self) -> Snapshot:
        """What the line shows now."""
        now = self.clock()
        with self._lock:
            self._prune(now)
            ok = sum(1 for _, good in self._finished if good)
            states = sorted(set(self._alerts.values()))
            return Snapshot(
                label=self.label,
                phase=self._phase,
                phase_s=now - self._t_phase,
                total_s=now - self._t0,
                ok=ok if self._load_seen else None,
                failed=len(self._finished) - ok if self._load_seen else None,
                ready=self._ready,
                firing=tuple(n for n, s in states if s == "firing"),
                pending=tuple(n for n, s in states if s == "pending"),
                prometheus_down=self._prometheus_down,
                alerts_known=self._observer_seen,
            )


# --------------------------------------------------------------------------- the line's text


class Part(NamedTuple):
    """One part of the line: what it tells (``label``, ``phase``, ``total``, ``requests``,
    ``node``, ``alerts``), its text and its style (``""``, ``bold``, ``red``, ``yellow``)."""

    kind: str
    text: str
    style: str = ""


#: what :func:`render` leaves out, in turn, when the line is too wide: the total time, then
#: the test's name (``-v`` shows it on pytest's row just above)
_DROPPABLE = ("total", "label")


def render(s: Snapshot, width: int, *, markup: bool = False) -> str:
    """The line for ``s`` in at most ``width`` columns: every part if they fit, else without
    the parts of :data:`_DROPPABLE`, one by one, else cut (:func:`compose`)."""
    parts = segments(s)
    for n in range(len(_DROPPABLE) + 1):
        kept = [p for p in parts if p.kind not in _DROPPABLE[:n]]
        if sum(len(p.text) for p in kept) + len(SEP) * (len(kept) - 1) <= width:
            return compose(kept, width, markup=markup)
    return compose(kept, width, markup=markup)


def segments(s: Snapshot) -> list[Part]:
    """The parts of the line, in order."""
    parts = [Part("label", s.label)] if s.label else []
    parts.append(Part("phase", f"{s.phase} {format_elapsed(s.phase_s)}", "bold"))
    parts.append(Part("total", f"total {format_elapsed(s.total_s)}"))
    if s.ok is not None:
        text = f"last 1 s: {s.ok} ok, {s.failed} failed"
        parts.append(Part("requests", text, "red" if s.failed else ""))
    if s.ready is not None:
        parts.append(
            Part("node", "node ready") if s.ready else Part("node", "node NOT READY", "red")
        )
    if s.prometheus_down:
        parts.append(Part("alerts", "Prometheus down", "yellow"))
    elif s.firing or s.pending:
        alerts = []
        if s.firing:
            alerts.append("firing: " + ", ".join(s.firing))
        if s.pending:
            alerts.append("pending: " + ", ".join(s.pending))
        parts.append(Part("alerts", "; ".join(alerts), "red" if s.firing else "yellow"))
    elif s.alerts_known:
        parts.append(Part("alerts", "no alerts"))
    return parts


def compose(parts: Sequence[Part], width: int, *, markup: bool = False) -> str:
    """The parts joined by :data:`SEP`, cut with ``…`` to at most ``width`` characters;
    styled with ANSI codes when ``markup`` (the codes do not count towards ``width``)."""
    out: list[str] = []
    used = 0
    for i, (_, text, style) in enumerate(parts):
        piece = (SEP if i else "") + text
        if used + len(piece) > width:
            room = width - used
            if room > 0:
                out.append(piece[: room - 1] + "…")
            break
        if markup and style:
            piece = (SEP if i else "") + _STYLES[style] + text + _RESET
        out.append(piece)
        used += len((SEP if i else "") + text)
    return "".join(out)
