"""A Grafana dashboard (JSON model) for the inventory's SLOs, from the same definitions
``faultkit rules`` uses (:mod:`slo.spec` ``ratio_slos``, :mod:`slo.rules` recordings).

Per scraped node, a row with the node's Faultkit alerts and, per ratio SLO, four panels:
the SLI over the SLO period, the error budget remaining, the SLI over time
(``1 - slo:sli_error:ratio_rate<w>``) and the burn rate over each window of
:data:`slo.rules.SLI_WINDOWS` (error ratio ÷ budget, with the 1/3/6/14.4 lines). An
overview above shows every node's budget, 1 h burn rate and alerts, filtered by the
``node`` variable. Every query reads the recording rules by ``sloth_id``, so the
dashboard shows exactly what the alerts evaluate.

The datasource is the ``${DS_PROMETHEUS}`` variable. Chaos runs become one annotation
query (:func:`chaos_runs_expr`): Grafana's dashboard JSON has no static annotation list,
so each run (start, end, text) is written as a PromQL expression that returns a series
exactly while the run lasted, labelled with the run's text, and Grafana draws it as a
region. Every ``expr`` in the result is plain PromQL (``promtool`` parses it once
``$node`` is read as a regex).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from faultkit.constants import GENERATE_PROBE_JOB
from faultkit.inventory import Inventory, Node
from slo.profiles import NodeQueries
from slo.rules import BURN_WINDOWS, SLI_WINDOWS
from slo.spec import RatioSLO, ratio_slos

SCHEMA_VERSION = 39
DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
ALERTS_SELECTOR = 'alertname=~"Faultkit.*"'
#: burn-rate factors drawn as threshold lines (SRE Workbook, as in slo.rules)
BURN_LINES: tuple[float, ...] = tuple(sorted({f for *_, f in BURN_WINDOWS}))
WIDTH = 24


@dataclass(frozen=True, slots=True)
class RunAnnotation:
    """One chaos run on the dashboard: epoch seconds ``time`` to ``time_end`` and a text."""

    time: float
    time_end: float
    text: str
    node: str = ""
    scenario: str = ""
    verdict: str = ""


class _Layout:
    """Hands out panel ids and grid positions, left to right, wrapping at 24 columns."""

    def __init__(self) -> None:
        self.next_id = 1
        self.x = 0
        self.y = 0
        self.row_h = 0

    def place(self, w: int, h: int) -> tuple[int, dict[str, int]]:
        if self.x + w > WIDTH:
            self.newline()
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.row_h = max(self.row_h, h)
        self.next_id += 1
        return self.next_id - 1, pos

    def newline(self) -> None:
        self.y += self.row_h
        self.x = 0
        self.row_h = 0


def _target(expr: str, legend: str = "", ref: str = "A") -> dict[str, Any]:
    return {"refId": ref, "datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
            "range": True, "instant": False}


def _thresholds(*steps: tuple[str, float | None]) -> dict[str, Any]:
    return {"mode": "absolute",
            "steps": [{"color": colour, "value": value} for colour, value in steps]}


def _panel(layout: _Layout, kind: str, title: str, targets: list[dict[str, Any]], *,
           w: int, h: int, unit: str = "none", thresholds: dict[str, Any] | None = None,
           description: str = "", options: dict[str, Any] | None = None,
           custom: dict[str, Any] | None = None) -> dict[str, Any]:
    panel_id, pos = layout.place(w, h)
    defaults: dict[str, Any] = {"unit": unit}
    if thresholds is not None:
        defaults["thresholds"] = thresholds
    if custom is not None:
        defaults["custom"] = custom
    return {"id": panel_id, "type": kind, "title": title, "description": description,
            "datasource": DATASOURCE, "gridPos": pos, "targets": targets,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": options or {}}


def _row(layout: _Layout, title: str) -> dict[str, Any]:
    layout.newline()
    panel_id, pos = layout.place(WIDTH, 1)
    layout.newline()
    return {"id": panel_id, "type": "row", "title": title, "gridPos": pos,
            "collapsed": False, "panels": []}


_STAT_OPTIONS: dict[str, Any] = {
    "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
    "colorMode": "background", "graphMode": "none", "textMode": "auto",
    "orientation": "auto", "justifyMode": "auto",
}
_LINES: dict[str, Any] = {"thresholdsStyle": {"mode": "line"}, "lineWidth": 1,
                          "fillOpacity": 0, "spanNulls": False}


def _sel(slo: RatioSLO) -> str:
    return f'{{sloth_id="{slo.node}-{slo.name}"}}'


def _budget(slo: RatioSLO) -> str:
    """The error budget as ``slo.rules`` writes it (``1 - objective``, 6 significant)."""
    return f"{slo.budget:.6g}"


def _slo_panels(layout: _Layout, slo: RatioSLO, period: str) -> list[dict[str, Any]]:
    """SLI (period), budget remaining, SLI over time and burn rates of one SLO."""
    sel = _sel(slo)
    objective = _thresholds(("red", None), ("green", slo.objective))
    note = f" {slo.note}" if slo.note else ""
    sli_windows = dict.fromkeys(("5m", "1h", "1d", period))
    return [
        _panel(layout, "stat", f"{slo.node}: {slo.name}: SLI over {period}",
               [_target(f"1 - slo:sli_error:ratio_rate{period}{sel}", period)],
               w=4, h=6, unit="percentunit", thresholds=objective, options=_STAT_OPTIONS,
               description=f"{slo.description} (objective {slo.objective:g}).{note}"),
        _panel(layout, "stat", f"{slo.node}: {slo.name}: error budget remaining",
               [_target(f"slo:period_error_budget_remaining:ratio{sel}", "remaining")],
               w=4, h=6, unit="percentunit", options=_STAT_OPTIONS,
               thresholds=_thresholds(("red", None), ("orange", 0.0), ("green", 0.25)),
               description=f"1 - (error ratio over {period} / budget {_budget(slo)})"),
        _panel(layout, "timeseries", f"{slo.node}: {slo.name}: SLI",
               [_target(f"1 - slo:sli_error:ratio_rate{w}{sel}", w, chr(65 + i))
                for i, w in enumerate(sli_windows)],
               w=8, h=6, unit="percentunit", thresholds=objective, custom=_LINES,
               description="good / valid events over each window; the line is the objective"),
        _panel(layout, "timeseries", f"{slo.node}: {slo.name}: burn rate (× budget)",
               [_target(f"slo:sli_error:ratio_rate{w}{sel} / {_budget(slo)}", w, chr(65 + i))
                for i, w in enumerate(SLI_WINDOWS)],
               w=8, h=6, custom=_LINES,
               thresholds=_thresholds(("green", None), *(
                   (colour, f) for colour, f in zip(("yellow", "orange", "red", "dark-red"),
                                                    BURN_LINES, strict=False))),
               description="error ratio over each window / error budget; pages at 14.4 (1h "
                           "and 5m) or 6 (6h and 30m), tickets at 3 (1d and 2h) or 1 "
                           "(3d and 6h)"),
    ]


def _node_panels(layout: _Layout, node: Node, slos: list[RatioSLO],
                 period: str) -> list[dict[str, Any]]:
    panels = [_row(layout, f"{node.name} ({node.engine})")]
    panels.append(_panel(
        layout, "state-timeline", f"{node.name}: Faultkit alerts",
        [_target(f'max by (alertname, alertstate, sloth_slo) '
                 f'(ALERTS{{{ALERTS_SELECTOR}, node="{node.name}"}})',
                 "{{alertname}} {{sloth_slo}} {{alertstate}}")],
        w=WIDTH, h=5, description="pending and firing alerts of this node",
        options={"showValue": "never", "mergeValues": True}))
    layout.newline()
    progress = _progress_panel(layout, node)
    if progress is not None:
        panels.append(progress)
        layout.newline()
    for slo in slos:
        panels += _slo_panels(layout, slo, period)
        layout.newline()
    return panels


def _progress_panel(layout: _Layout, node: Node) -> dict[str, Any] | None:
    """Is the engine making progress: tokens per second against the requests it holds, and
    the generation probe (what ``FaultkitEngineStalled`` reads; docs/slo.md)."""
    q = NodeQueries.for_node(node)
    if q is None or node.kind != "engine" or q.profile.generation_tokens is None:
        return None
    p = q.profile
    held = [g for g in (q.gauge(p.running), q.gauge(p.waiting)) if g is not None]
    targets = [_target(str(q.rate(p.generation_tokens, "1m")), "tokens/s", "A")]
    if held:
        targets.append(_target(" + ".join(held), "requests held", "B"))
    targets.append(_target(
        f'min(probe_success{{job="{GENERATE_PROBE_JOB}", node="{node.name}"}})',
        "generation probe (1 = answered)", "C"))
    return _panel(layout, "timeseries", f"{node.name}: engine progress", targets,
                  w=WIDTH, h=6, custom=_LINES,
                  description="a stalled engine holds requests while its tokens/s is 0 "
                              "and the generation probe gets no answer "
                              "(FaultkitEngineStalled)")


def _overview(layout: _Layout) -> list[dict[str, Any]]:
    node = 'sloth_service=~"$node"'
    on = "on(sloth_id, sloth_slo, sloth_service) group_left"
    return [
        _row(layout, "Overview"),
        _panel(layout, "bargauge", "Error budget remaining (SLO period)",
               [_target(f"slo:period_error_budget_remaining:ratio{{{node}}}",
                        "{{sloth_service}} {{sloth_slo}}")],
               w=12, h=8, unit="percentunit",
               thresholds=_thresholds(("red", None), ("orange", 0.0), ("green", 0.25)),
               options={"orientation": "horizontal", "displayMode": "basic",
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                          "values": False}}),
        _panel(layout, "timeseries", "Burn rate over 1h (pages at 14.4 with 5m)",
               [_target(f"slo:sli_error:ratio_rate1h{{{node}}} / {on} "
                        f"slo:error_budget:ratio{{{node}}}", "{{sloth_service}} {{sloth_slo}}")],
               w=12, h=8, custom=_LINES,
               thresholds=_thresholds(("green", None), ("red", 14.4))),
        _panel(layout, "state-timeline", "Faultkit alerts",
               [_target(f'max by (node, alertname, alertstate, sloth_slo) '
                        f'(ALERTS{{{ALERTS_SELECTOR}, node=~"$node"}})',
                        "{{node}} {{alertname}} {{sloth_slo}} {{alertstate}}")],
               w=WIDTH, h=8, options={"showValue": "never", "mergeValues": True}),
    ]


def _promql_string(text: str) -> str:
    """A PromQL string literal (Go escapes via JSON) for a label value."""
    return json.dumps(text, ensure_ascii=False)


def _clean(text: str) -> str:
    """Annotation text without ``$`` (Grafana interpolates it; label_replace expands it)."""
    return " ".join(text.replace("$", "").split())


def chaos_runs_expr(runs: Sequence[RunAnnotation]) -> str | None:
    """One PromQL expression that returns, for each run, a series only while it lasted.

    ``(vector(time()) >= start) <= end`` keeps the evaluation time inside [start, end];
    ``label_replace`` stamps the run's text, node, scenario and verdict on it. Runs are
    joined with ``or``. ``None`` when there is no run.
    """
    parts = []
    for run in runs:
        expr = f"(vector(time()) >= {run.time:.3f}) <= {run.time_end:.3f}"
        for label, value in (("run", run.text), ("node", run.node),
                             ("scenario", run.scenario), ("verdict", run.verdict)):
            expr = (f"label_replace({expr}, {_promql_string(label)}, "
                    f'{_promql_string(_clean(value))}, "", "")')
        parts.append(expr)
    return " or ".join(parts) if parts else None


def _annotations(runs: Sequence[RunAnnotation]) -> list[dict[str, Any]]:
    annotations: list[dict[str, Any]] = [
        {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
         "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
         "name": "Annotations & Alerts", "type": "dashboard"},
        {"name": "Faultkit alerts firing", "datasource": DATASOURCE, "enable": True,
         "iconColor": "red", "step": "10s",
         "expr": f'ALERTS{{{ALERTS_SELECTOR}, alertstate="firing", node=~"$node"}}',
         "titleFormat": "{{alertname}}", "textFormat": "{{node}} {{sloth_slo}} ({{severity}})",
         "tagKeys": "node,severity", "useValueForTime": False},
    ]
    expr = chaos_runs_expr(runs)
    if expr is not None:
        annotations.append(
            {"name": "Chaos runs", "datasource": DATASOURCE, "enable": True,
             "iconColor": "orange", "step": "5s", "expr": expr,
             "titleFormat": "chaos run {{scenario}} on {{node}}: {{verdict}}",
             "textFormat": "{{run}}", "tagKeys": "node,scenario,verdict",
             "useValueForTime": False})
    return annotations


def _templating(nodes: Sequence[str]) -> dict[str, Any]:
    options = [{"text": "All", "value": "$__all", "selected": True}] + [
        {"text": n, "value": n, "selected": False} for n in nodes
    ]
    return {"list": [
        {"name": "DS_PROMETHEUS", "label": "Prometheus", "type": "datasource",
         "query": "prometheus", "current": {}, "hide": 0, "refresh": 1, "regex": "",
         "options": []},
        {"name": "node", "label": "Node", "type": "custom", "query": ",".join(nodes),
         "multi": True, "includeAll": True, "hide": 0, "options": options,
         "current": {"selected": True, "text": ["All"], "value": ["$__all"]}},
    ]}


def build_dashboard(inventory: Inventory, runs: Sequence[RunAnnotation] = (), *,
                    title: str = "faultkit: SLOs and chaos runs",
                    uid: str = "faultkit-slos") -> dict[str, Any]:
    """The dashboard JSON model for ``inventory``'s scraped nodes, annotated with ``runs``."""
    layout = _Layout()
    panels = _overview(layout)
    nodes = []
    for node in inventory.nodes:
        if node.prometheus is None:
            continue  # not scraped: no recordings (as in slo.rules)
        settings = inventory.slo_for(node)
        nodes.append(node.name)
        panels += _node_panels(layout, node, ratio_slos(node, settings),
                               f"{settings.window_days}d")
    return {
        "id": None, "uid": uid, "title": title, "tags": ["faultkit", "slo", "chaos"],
        "timezone": "utc", "editable": True, "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION, "version": 1, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "annotations": {"list": _annotations(runs)},
        "templating": _templating(nodes),
        "panels": panels,
        "description": "Generated by `faultkit dashboard` from " + inventory.source
                       + "; regenerate instead of editing.",
    }


def exprs(dashboard: dict[str, Any]) -> Iterator[str]:
    """Every PromQL expression in ``dashboard``: panel targets, then annotation queries."""
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            yield str(target["expr"])
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            yield str(annotation["expr"])
