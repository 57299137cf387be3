"""Timeline rows for the report's one timeline table.

Rows merge timeline.jsonl events with the measurement's own instants (first impact,
detection, recovery). Times are epoch seconds; ``rel_s`` is seconds from the moment the
fault took effect (``t_effect``), or from the first event when no fault took effect.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from faultkit.model.events import ALERT_PREFIX, EventKind
from reports.evidence import fault_kind
from reports.load import RunData
from reports.numbers import is_number
from reports.outage import no_outage


@dataclass(frozen=True, slots=True)
class Row:
    t: float
    rel_s: float | None
    source: str
    event: str  # untrusted text inside: escape before rendering

    @property
    def utc(self) -> str:
        return utc(self.t)


def utc(t: float) -> str:
    """``2026-05-01 12:00:03.120`` (UTC, milliseconds)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _describe(kind: str, data: dict[str, Any]) -> str:
    parts = [kind]
    if "fault" in data:
        parts.append(str(data["fault"]))
        params = data.get("params")
        # the parameters once, where the fault begins; its later events name it only
        if kind == "inject_start" and isinstance(params, dict) and params:
            parts.append(" ".join(f"{k}={v}" for k, v in sorted(params.items())))
    if "alertname" in data:
        parts.append(str(data["alertname"]))
    if "what" in data:
        parts.append(str(data["what"]))
    for key in ("reason", "detail", "config", "status", "exit_code", "oom_killed"):
        if key in data:
            parts.append(
                f"{key}={json.dumps(data[key]) if isinstance(data[key], bool) else data[key]}"
            )
    latency = data.get("latency_s")
    if kind in _PROBES and is_number(latency) and latency >= SLOW_ANSWER_S:
        # a probe sent into a hang is answered only once the node serves again: the row is
        # at its send time, and says when the answer came (what recovery is dated by)
        parts.append(f"(sent here, answered {latency:.2f} s later)")
    return " ".join(parts)


#: the readiness probe's events, dated by when the probe was sent
_PROBES = frozenset({EventKind.HEALTH_OK, EventKind.HEALTH_FAIL})
#: a probe answer this slow is told apart from its send time in the timeline
SLOW_ANSWER_S = 0.1


#: same-source events this close to the first of their run share one row
FOLD_WITHIN_S = 1.0
#: sources whose events are anchors a reader looks for: they share a row only when they
#: happened at the same instant (within this), like a fault's ``ready`` and ``revert_end``
_ANCHORS = frozenset({"fault", "measurement"})
SAME_INSTANT_S = 0.05


#: harness events the report says elsewhere: the run's start and end (the Run table's
#: run window) and ``restart_seen`` (the ``docker_die`` and ``docker_start`` it pairs)
_SAID_ELSEWHERE = frozenset(
    {EventKind.SCENARIO_START, EventKind.SCENARIO_END, EventKind.RESTART_SEEN,
     # the detection row gives the route's timing, when Alertmanager held the alert and
     # the page; the timeline marks the page itself
     EventKind.AM_ROUTE, EventKind.AM_ALERT, EventKind.PAGED}
)


def _listed_elsewhere(source: str, kind: str) -> bool:
    """Events another part of the report already gives: observer alert changes (the Alerts
    table has each alert's pending, firing and resolved instants; the timeline marks
    detection itself) and :data:`_SAID_ELSEWHERE`."""
    if source == "observer" and kind.startswith(ALERT_PREFIX):
        return True
    return kind in _SAID_ELSEWHERE


def fold(rows: list[Row]) -> list[Row]:
    """Consecutive rows of one source as one row, each later event with its own offset (a
    kill's ``docker_kill · docker_die … (+0.5) · docker_start (+1.1)``), so a burst of
    routine events reads as the one thing it was: within :data:`FOLD_WITHIN_S` of the
    first, or :data:`SAME_INSTANT_S` for the :data:`_ANCHORS`. ``rows`` is in time order."""
    out: list[Row] = []
    for row in rows:
        head = out[-1] if out else None
        window = SAME_INSTANT_S if row.source in _ANCHORS else FOLD_WITHIN_S
        if head is not None and row.source == head.source and row.t - head.t <= window:
            offset = "" if row.rel_s is None or head.rel_s is None or (
                abs(row.rel_s - head.rel_s) < SAME_INSTANT_S
            ) else f" ({signed(row.rel_s)})"
            out[-1] = Row(head.t, head.rel_s, head.source, f"{head.event} · {row.event}{offset}")
        else:
            out.append(row)
    return out


def rows(data: RunData) -> list[Row]:
    """The report's timeline: every event but those :func:`_listed_elsewhere`, with the
    measurement's instants, in time order and :func:`fold`-ed."""
    t0 = data.t0
    out = [
        Row(e.t, None if t0 is None else e.t - t0, e.source, _describe(e.kind, e.data))
        for e in data.timeline
        if not _listed_elsewhere(e.source, e.kind)
    ]
    m = data.measurement
    if m is not None:
        # a request-level fault the node served through has no recovery to mark
        recovered = None if no_outage(fault_kind(data), m) else m.t_recovered
        marks: list[tuple[float | None, str]] = [
            (m.t_effect, f"fault took effect (t_effect, evidence {m.effect_evidence})"),
            (m.t_impact, "first failed request (t_impact)"),
            (m.t_detect, f"detected by {m.detect_signal} (t_detect)"),
            (m.paging.t_paged if m.paging else None,
             f"paged: {m.paging.alertname} reached {m.paging.receiver} (t_paged)"
             if m.paging else ""),
            (recovered, "recovered: steady state held (t_recovered)"),
        ]
        out += [
            Row(t, None if t0 is None else t - t0, "measurement", text)
            for t, text in marks
            if t is not None
        ]
    return fold(sorted(out, key=lambda r: r.t))


def signed(x: float) -> str:
    """``+1.2`` / ``-0.4``; values that round to zero print as ``+0.0`` (never ``-0.0``)."""
    return "+0.0" if abs(x) < 0.05 else f"{x:+.1f}"
