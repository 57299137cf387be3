"""Capture what Prometheus saw during a run: series for the report and a request-count check.

These functions do I/O (through :class:`slo.prom.Prometheus`); the arithmetic they use is
pure and unit-tested (:func:`counter_increase`). :func:`capture` returns a
:class:`PrometheusCapture`, the typed ``prometheus.json`` (docs/run-directory.md)::

    {"series": [{"name", "promql", "labels", "values": [[t, v], ...]}],
     "alerts": [{"alertname", "state", "activeAt", "t_seen", "t_state", "labels"}]}
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from faultkit.inventory import Node
from faultkit.model.events import ALERT_PREFIX
from faultkit.model.records import Event, RequestRecord
from slo.profiles import NodeQueries
from slo.prom import Prometheus, Series


@dataclass(frozen=True, slots=True)
class CapturedSeries:
    """One range-queried series of ``prometheus.json``: the signal's ``name`` in the engine
    profile (or ``alerts``), its PromQL, labels and raw ``[t, value]`` samples as written."""

    name: str
    promql: str
    labels: dict[str, Any] = field(default_factory=dict)
    values: list[Any] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "promql": self.promql, "labels": self.labels,
                "values": self.values}


@dataclass(frozen=True, slots=True)
class PrometheusCapture:
    """``prometheus.json``: what Prometheus saw during the run (``series``), the alert
    transitions the observer recorded (``alerts``), and ``error`` when Prometheus could not
    be read at the end of the run. :meth:`from_json` is tolerant like the run models: a
    series that is not an object is dropped, a missing name or PromQL reads ``"?"`` /
    ``"not captured"``."""

    series: tuple[CapturedSeries, ...] = ()
    alerts: tuple[dict[str, Any], ...] = ()
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"series": [s.to_json() for s in self.series],
                               "alerts": list(self.alerts)}
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, data: Any) -> PrometheusCapture:
        if not isinstance(data, dict):
            return cls()
        raw_series, raw_alerts = data.get("series"), data.get("alerts")
        series: list[Any] = raw_series if isinstance(raw_series, list) else []
        alerts: list[Any] = raw_alerts if isinstance(raw_alerts, list) else []
        error = data.get("error")
        return cls(
            series=tuple(
                CapturedSeries(
                    name=str(s.get("name", "?")),
                    promql=str(s.get("promql", "not captured")),
                    labels=s["labels"] if isinstance(s.get("labels"), dict) else {},
                    values=s["values"] if isinstance(s.get("values"), list) else [],
                )
                for s in series if isinstance(s, dict)
            ),
            alerts=tuple(a for a in alerts if isinstance(a, dict)),
            error=str(error) if error else None,
        )


def counter_increase(values: Sequence[tuple[float, float]]) -> float:
    """Exact increase of a counter over raw samples, surviving resets (restarts).

    A drop means the process restarted and the counter began again from zero, so the
    post-reset value is all new increase (the same rule PromQL's ``increase()`` uses,
    without its extrapolation to the window edges).
    """
    total = 0.0
    for (_, prev), (_, cur) in itertools.pairwise(values):
        if math.isnan(prev) or math.isnan(cur):
            continue
        total += cur - prev if cur >= prev else cur
    return total


def alerts_from_timeline(timeline: Sequence[Event], node: str) -> list[dict[str, Any]]:
    """The observer's alert transitions for ``node``, in the prometheus.json shape."""
    return [
        {
            "alertname": e.data.get("alertname"),
            "state": e.data.get("state", e.kind.removeprefix(ALERT_PREFIX)),
            "activeAt": e.data.get("activeAt"),
            "t_seen": e.t,
            "t_state": e.data.get("t_state"),
            "labels": e.data.get("labels", {}),
        }
        for e in timeline
        if e.source == "observer" and e.node == node and e.kind.startswith(ALERT_PREFIX)
    ]


def capture(
    prom: Prometheus,
    node: Node,
    start: float,
    end: float,
    *,
    step: float = 1.0,
    timeline: Sequence[Event] = (),
    rate_window: str = "5s",
) -> PrometheusCapture:
    """Range-query every signal of the node's engine profile over [start, end].

    Includes ``up`` and the node's ``ALERTS`` series; signals the engine lacks are skipped.
    """
    queries = NodeQueries.for_node(node)
    series: list[CapturedSeries] = []
    if queries is not None:
        promqls = dict(queries.catalogue(rate_window))
        job = node.prometheus.job if node.prometheus else node.name
        promqls["alerts"] = f'ALERTS{{job="{job}"}} or ALERTS{{node="{node.name}"}}'
        for name, promql in promqls.items():
            for s in prom.query_range(promql, start, end, step):
                series.append(CapturedSeries(name, promql, dict(s.labels),
                                             [[t, v] for t, v in s.values]))
    return PrometheusCapture(tuple(series), tuple(alerts_from_timeline(timeline, node.name)))


def _raw_increase(prom: Prometheus, selector: str | None, start: float, end: float) -> float:
    if selector is None:
        return float("nan")
    span = max(1, math.ceil(end - start))
    found: list[Series] = prom.query_samples(f"{selector}[{span}s]", end)
    return sum(counter_increase(s.values) for s in found)


def cross_check(
    prom: Prometheus,
    node: Node,
    ledger: Sequence[RequestRecord],
    start: float,
    end: float,
) -> dict[str, Any]:
    """Server-side request counts over [start, end] next to the client's.

    ``server_requests`` / ``server_errors`` are exact raw-sample deltas that survive
    counter resets; ``server_requests_increase`` is PromQL's ``increase()`` (extrapolated,
    rounded). Requests refused at TCP level or answered after the last scrape before a
    crash never reach server metrics, so the client count is authoritative; a gap is a
    finding to explain, not an error.
    """
    queries = NodeQueries.for_node(node)
    client = [r for r in ledger if r.node == node.name and r.kind != "probe"
              and start <= r.t_end <= end]
    out: dict[str, Any] = {
        "start": start,
        "end": end,
        "client_requests": len(client),
        "client_ok": sum(1 for r in client if r.status == "ok"),
        "client_answered": sum(1 for r in client if r.http_status is not None),
    }
    if queries is None or queries.profile.requests_total is None:
        out["note"] = (f"{node.profile_engine} exposes no request counter"
                       if queries else "node is not scraped by Prometheus")
        return out
    p = queries.profile
    span = max(1, math.ceil(end - start))
    inc = prom.query_value(queries.increase(p.requests_total, f"{span}s") or "", end)
    out["server_requests"] = round(_raw_increase(prom, queries.series(p.requests_total),
                                                 start, end))
    errors = _raw_increase(prom, queries.series(p.errors_total), start, end)
    out["server_errors"] = None if math.isnan(errors) else round(errors)
    out["server_requests_increase"] = None if inc is None or math.isnan(inc) else round(inc)
    out["difference"] = out["client_answered"] - out["server_requests"]
    return out
