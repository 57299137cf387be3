"""The findings of a postmortem as typed records: what ``postmortem.json`` holds.

An instant the evidence cannot date exactly is a :class:`Bound`: it lies after ``after``
and at or before ``by`` (epoch seconds, each a sample stamp; ``None`` where the window
gives no sample on that side). Every record has ``to_json()`` and a tolerant
``from_json()`` (the conventions of :mod:`faultkit.model.runfiles`): a missing or wrongly
typed value reads as ``None``/empty, never as an exception.
docs/postmortem.md says how each field is found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from faultkit.model.jsonvalues import flag, number, object_of, text, whole

__all__ = ["FORMAT", "AlertEpisode", "Bound", "EvidenceSummary", "Findings", "Gap",
           "Incident", "Postmortem", "Related", "Restart"]

#: ``postmortem.json``'s ``format``: raised when a field changes meaning
FORMAT = 1


def _objects(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Bound:
    """An instant known to lie in ``(after, by]`` (epoch seconds). ``after`` is ``None``
    when it precedes the window's first sample, ``by`` when no sample after it exists."""

    after: float | None
    by: float | None

    @property
    def width_s(self) -> float | None:
        """How wide the uncertainty is (s); ``None`` when a side is open."""
        return None if self.after is None or self.by is None else self.by - self.after

    def contains(self, t: float, *, slack_s: float = 0.0) -> bool:
        """``after < t <= by + slack_s`` (an open side holds anything)."""
        return ((self.after is None or t > self.after)
                and (self.by is None or t <= self.by + slack_s))

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "by": self.by, "width_s": self.width_s}

    @classmethod
    def from_json(cls, data: Any) -> Bound:
        obj = object_of(data)
        return cls(after=number(obj.get("after")), by=number(obj.get("by")))


@dataclass(frozen=True, slots=True)
class AlertEpisode:
    """One stretch in which an alert for the node fired: its first firing sample ``t_first``
    and its last, ``t_last`` (epoch seconds, evaluation stamps)."""

    alert: str
    t_first: float
    t_last: float
    labels: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"alert": self.alert, "t_first": self.t_first, "t_last": self.t_last,
                "labels": dict(self.labels)}

    @classmethod
    def from_json(cls, data: Any) -> AlertEpisode:
        obj = object_of(data)
        labels = {str(k): str(v) for k, v in object_of(obj.get("labels")).items()}
        return cls(alert=text(obj.get("alert")) or "", t_first=number(obj.get("t_first")) or 0.0,
                   t_last=number(obj.get("t_last")) or 0.0, labels=labels)


@dataclass(frozen=True, slots=True)
class Restart:
    """The engine's process start time changed: first seen in the scrape at ``t_seen``,
    the new process says it started at ``t_process_start`` (its own clock), the old one at
    ``previous`` (epoch seconds)."""

    t_seen: float
    t_process_start: float
    previous: float

    def to_json(self) -> dict[str, Any]:
        return {"t_seen": self.t_seen, "t_process_start": self.t_process_start,
                "previous": self.previous}

    @classmethod
    def from_json(cls, data: Any) -> Restart:
        obj = object_of(data)
        return cls(t_seen=number(obj.get("t_seen")) or 0.0,
                   t_process_start=number(obj.get("t_process_start")) or 0.0,
                   previous=number(obj.get("previous")) or 0.0)


@dataclass(frozen=True, slots=True)
class Gap:
    """No ``up`` sample at all in ``(after, by)``: monitoring saw nothing (Prometheus down,
    the target dropped, or the window's edge), which is not the node failing."""

    after: float
    by: float

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "by": self.by, "length_s": self.by - self.after}

    @classmethod
    def from_json(cls, data: Any) -> Gap:
        obj = object_of(data)
        return cls(after=number(obj.get("after")) or 0.0, by=number(obj.get("by")) or 0.0)


@dataclass(frozen=True, slots=True)
class Incident:
    """One outage seen as failed scrapes of the node.

    ``start``: after the last good scrape, by the first failed one. ``end``: after the last
    failed scrape, by the first good scrape of a stretch that held ``hold_s``; ``None`` while
    it was still failing at the window's end. ``held`` is False when the good stretch after
    it reached the window's end before lasting ``hold_s``. ``detection`` is the first alert
    for the node that began firing inside the incident; ``alerts`` every one that did.
    """

    start: Bound
    end: Bound | None
    held: bool
    failed_scrapes: int
    #: good scrapes inside the incident (a flap: the node answered, but not for hold_s)
    good_scrapes_inside: int
    detection: AlertEpisode | None
    alerts: tuple[AlertEpisode, ...]
    restarts: tuple[Restart, ...]

    @property
    def duration_s(self) -> tuple[float, float] | None:
        """The outage's length as (shortest, longest) the bounds allow; ``None`` when a
        side is open."""
        if self.end is None or None in (self.start.after, self.start.by, self.end.after,
                                        self.end.by):
            return None
        assert self.start.after is not None and self.start.by is not None
        assert self.end.after is not None and self.end.by is not None
        return max(0.0, self.end.after - self.start.by), self.end.by - self.start.after

    def to_json(self) -> dict[str, Any]:
        duration = self.duration_s
        return {
            "start": self.start.to_json(),
            "end": None if self.end is None else self.end.to_json(),
            "held": self.held,
            "duration_s": None if duration is None else {"min": duration[0], "max": duration[1]},
            "failed_scrapes": self.failed_scrapes,
            "good_scrapes_inside": self.good_scrapes_inside,
            "detection": None if self.detection is None else self.detection.to_json(),
            "alerts": [a.to_json() for a in self.alerts],
            "restarts": [r.to_json() for r in self.restarts],
        }

    @classmethod
    def from_json(cls, data: Any) -> Incident:
        obj = object_of(data)
        end, detection = obj.get("end"), obj.get("detection")
        return cls(
            start=Bound.from_json(obj.get("start")),
            end=Bound.from_json(end) if isinstance(end, dict) else None,
            held=bool(flag(obj.get("held"))),
            failed_scrapes=whole(obj.get("failed_scrapes")) or 0,
            good_scrapes_inside=whole(obj.get("good_scrapes_inside")) or 0,
            detection=AlertEpisode.from_json(detection) if isinstance(detection, dict) else None,
            alerts=tuple(AlertEpisode.from_json(a) for a in _objects(obj.get("alerts"))),
            restarts=tuple(Restart.from_json(r) for r in _objects(obj.get("restarts"))),
        )


@dataclass(frozen=True, slots=True)
class Findings:
    """What :func:`~faultkit.postmortem.incidents.find_incidents` found in one window."""

    incidents: tuple[Incident, ...]
    #: restarts seen where no scrape failed (a crash and restart inside one scrape interval)
    restarts_outside: tuple[Restart, ...]
    gaps: tuple[Gap, ...]
    #: how long good scrapes must last for the node to count as recovered (s)
    hold_s: float

    def to_json(self) -> dict[str, Any]:
        return {"incidents": [i.to_json() for i in self.incidents],
                "restarts_outside": [r.to_json() for r in self.restarts_outside],
                "gaps": [g.to_json() for g in self.gaps], "hold_s": self.hold_s}

    @classmethod
    def from_json(cls, data: Any) -> Findings:
        obj = object_of(data)
        return cls(
            incidents=tuple(Incident.from_json(i) for i in _objects(obj.get("incidents"))),
            restarts_outside=tuple(Restart.from_json(r)
                                   for r in _objects(obj.get("restarts_outside"))),
            gaps=tuple(Gap.from_json(g) for g in _objects(obj.get("gaps"))),
            hold_s=number(obj.get("hold_s")) or 0.0,
        )


@dataclass(frozen=True, slots=True)
class EvidenceSummary:
    """Which evidence the findings rest on, and which was missing."""

    up_samples: int
    up_series: int
    alert_series: int
    #: ``None``: the engine exposes no process start time (restarts cannot be seen)
    process_start_metric: str | None
    process_start_samples: int
    missing: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"up_samples": self.up_samples, "up_series": self.up_series,
                "alert_series": self.alert_series,
                "process_start_metric": self.process_start_metric,
                "process_start_samples": self.process_start_samples,
                "missing": list(self.missing)}

    @classmethod
    def from_json(cls, data: Any) -> EvidenceSummary:
        obj = object_of(data)
        missing = obj.get("missing")
        return cls(
            up_samples=whole(obj.get("up_samples")) or 0,
            up_series=whole(obj.get("up_series")) or 0,
            alert_series=whole(obj.get("alert_series")) or 0,
            process_start_metric=text(obj.get("process_start_metric")),
            process_start_samples=whole(obj.get("process_start_samples")) or 0,
            missing=tuple(str(m) for m in missing) if isinstance(missing, list) else (),
        )


@dataclass(frozen=True, slots=True)
class Related:
    """An incident of another node of the same postmortem that overlapped one of this
    node's: ``incident`` (1-based) is this node's, ``node``/``other`` (1-based) the other's;
    ``t_start``/``t_end`` the other's outage (its start's earlier side … its end's later
    side, ``None`` when still failing: :func:`faultkit.postmortem.related.outage_span`);
    ``run`` the other's run directory."""

    incident: int
    node: str
    other: int
    t_start: float
    t_end: float | None
    run: str

    def to_json(self) -> dict[str, Any]:
        return {"incident": self.incident, "node": self.node, "other": self.other,
                "t_start": self.t_start, "t_end": self.t_end, "run": self.run}

    @classmethod
    def from_json(cls, data: Any) -> Related:
        obj = object_of(data)
        return cls(incident=whole(obj.get("incident")) or 0, node=text(obj.get("node")) or "",
                   other=whole(obj.get("other")) or 0,
                   t_start=number(obj.get("t_start")) or 0.0, t_end=number(obj.get("t_end")),
                   run=text(obj.get("run")) or "")


@dataclass(frozen=True, slots=True)
class Postmortem:
    """``postmortem.json``: the window asked about, where the evidence came from, what it
    showed. Times are epoch seconds; ``t_written`` is when the file was written."""

    node: str
    job: str
    prometheus_url: str
    t_from: float
    t_to: float
    t_written: float
    scrape_interval_s: float
    evidence: EvidenceSummary
    findings: Findings
    #: each incident's run directory (its name, beside this one), in the incidents' order
    runs: tuple[str, ...] = ()
    #: the other nodes' incidents that overlapped this node's (a postmortem of several nodes,
    #: or of a gateway with its upstreams)
    related: tuple[Related, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "node": self.node, "job": self.job, "runs": list(self.runs),
                "related": [r.to_json() for r in self.related],
                "prometheus_url": self.prometheus_url, "t_from": self.t_from,
                "t_to": self.t_to, "t_written": self.t_written,
                "scrape_interval_s": self.scrape_interval_s,
                "evidence": self.evidence.to_json(), "findings": self.findings.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> Postmortem:
        obj = object_of(data)
        return cls(
            node=text(obj.get("node")) or "", job=text(obj.get("job")) or "",
            prometheus_url=text(obj.get("prometheus_url")) or "",
            t_from=number(obj.get("t_from")) or 0.0, t_to=number(obj.get("t_to")) or 0.0,
            t_written=number(obj.get("t_written")) or 0.0,
            scrape_interval_s=number(obj.get("scrape_interval_s")) or 0.0,
            evidence=EvidenceSummary.from_json(obj.get("evidence")),
            findings=Findings.from_json(obj.get("findings")),
            runs=tuple(str(r) for r in runs) if isinstance(runs := obj.get("runs"), list)
            else (),
            related=tuple(Related.from_json(r) for r in _objects(obj.get("related"))),
        )
