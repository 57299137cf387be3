"""The evidence tables of an incident report, from the run directory's files: the
Prometheus series and alerts captured, the client errors by class (lost, as the headline
counts them, and failed in the whole run), the container's fields before and after, and the
log excerpt of the container that failed."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from faultkit.model.events import ALERT_PREFIX
from reports.diagnosis import CONTEXT_RE, GPU_OOM_RE, ROUTINE_LOG_RE, STARTUP_KV_RE
from reports.load import RunData, finite_points

#: container.json fields the report tabulates (status, id and restart count always; the rest
#: when they changed)
CONTAINER_FIELDS = (
    "status",
    "id",
    "exit_code",
    "oom_killed",
    "restart_count",
    "started_at",
    "finished_at",
    "image",
)
#: the log excerpt's length, from a few lines before the first that says why
LOG_EXCERPT_LINES = 12


def series_rows(data: RunData) -> list[dict[str, Any]]:
    """The captured series, but ``ALERTS`` when the observer saw the alerts change state:
    the alerts table says the same in one row per alert."""
    result = []
    observed = bool(alert_rows(data))
    for s in data.prometheus.series:
        if observed and s.name == "alerts":
            continue
        pts = finite_points(s.values)
        result.append(
            {
                "name": s.name,
                "promql": s.promql,
                "labels": s.labels,
                "samples": len(s.values),
                "min": min((v for _, v in pts), default=None),
                "max": max((v for _, v in pts), default=None),
            }
        )
    return result


def alert_rows(data: RunData) -> list[dict[str, Any]]:
    t0 = data.t0
    alerts: dict[str, dict[str, Any]] = {}
    for e in data.timeline:
        if e.source == "observer" and e.kind.startswith(ALERT_PREFIX):
            name = str(e.data.get("alertname", "?"))
            entry = alerts.setdefault(name, {"name": name})
            entry.setdefault(e.kind.removeprefix(ALERT_PREFIX), None if t0 is None else e.t - t0)
    return list(alerts.values())


def errors_by_class(data: RunData) -> list[dict[str, Any]]:
    """Failed requests by class: how many were lost (the measurement's count, the one the
    headline and Key figures give) and how many failed in the whole run."""
    counts: Counter[str] = Counter()
    statuses: dict[str, set[int]] = {}
    example: dict[str, str] = {}
    for r in data.ledger:
        if r.status == "ok":
            continue
        cls = r.error_class or r.status
        counts[cls] += 1
        if r.http_status is not None:
            statuses.setdefault(cls, set()).add(r.http_status)
        if r.error_detail and cls not in example:
            example[cls] = r.error_detail
    lost = data.measurement.lost_by_class if data.measurement is not None else {}
    return [
        {
            "cls": c,
            "lost": lost.get(c, 0) if data.measurement is not None else None,
            "count": n,
            "http": ", ".join(map(str, sorted(statuses.get(c, ())))),
            "example": example.get(c, ""),
        }
        for c, n in counts.most_common()
    ]


@dataclass(frozen=True, slots=True)
class LogExcerpt:
    """What the report shows of a log: ``lines`` without routine traffic, and how many
    routine lines (health checks, answered requests) were left out."""

    lines: list[str]
    routine: int


def log_excerpt(data: RunData) -> LogExcerpt | None:
    """The log of the container that failed — a failed rollout's candidate, else the node's
    since the run began — without routine traffic (:data:`ROUTINE_LOG_RE`), from a few lines
    before the first line that says why; None when no log was captured."""
    candidate = data.run.fault_result.get("candidate_log_tail")
    tail = candidate if isinstance(candidate, str) and candidate.strip() else \
        data.container.log_tail
    if tail is None or not tail.strip():
        return None
    every = tail.splitlines()
    lines = [line for line in every if not ROUTINE_LOG_RE.search(line)]
    pattern = re.compile(
        "|".join(p.pattern for p in (GPU_OOM_RE, STARTUP_KV_RE, CONTEXT_RE))
        + r"|error|killed|Traceback",
        re.IGNORECASE,
    )
    hits = [i for i, line in enumerate(lines) if pattern.search(line)]
    start = max(0, hits[0] - 5) if hits else max(0, len(lines) - LOG_EXCERPT_LINES)
    return LogExcerpt(lines[start : start + LOG_EXCERPT_LINES], len(every) - len(lines))


def container_states(data: RunData) -> list[dict[str, Any]]:
    """The container's fields before and after the run: its status and identity, and every
    other field only when it changed (an unchanged exit code or image says nothing)."""
    before, after = data.container.before, data.container.after
    always = ("status", "id", "restart_count")
    return [
        {
            "field": f,
            "before": before.get(f, "not captured"),
            "after": after.get(f, "not captured"),
        }
        for f in CONTAINER_FIELDS
        if f in always or before.get(f) != after.get(f)
    ]
