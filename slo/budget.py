"""Error-budget review: per node and SLO, how much budget the window has left and who spent it.

For each ratio SLO of ``slo.spec`` (availability, ttft, itl) over the window (default the
inventory's ``window_days``):

- ``sli`` = 1 − error ratio over the window. **Occurrence-weighted**: good events / valid
  events over the whole window (OpenSLO *Occurrences*, Pyrra), not Sloth's mean of
  5-minute ratios. Engines without request counters (llama.cpp) fall back to a
  time-weighted availability (fraction of successful scrapes); the ``note`` says so.
- ``budget_total`` = 1 − objective; ``budget_spent_fraction`` = error ratio / budget;
  ``budget_remaining_fraction`` = 1 − spent (negative when overspent).
- ``burn_rates`` = error ratio over 1h/6h/1d/3d ÷ budget, next to the SRE-Workbook
  thresholds 14.4/6/3/1; ``would_fire`` lists the multi-window legs whose long *and*
  short windows are over their threshold now; ``alerts_firing_now`` what Prometheus fires.
- ``chaos_runs``: run directories under ``runs_dir`` that started inside the window, with
  the requests each lost and the budget fraction that cost
  (lost ÷ (budget × requests the server counted in the window)).

``None`` means "no data" (no traffic, no counter): never treated as 0 % spent.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from faultkit.inventory import Inventory, Node
from faultkit.model.durations import parse_prometheus_duration
from faultkit.rundir import MEASUREMENT_JSON, RUN_JSON, RunDir, RunInfo, UnreadableRunFile
from slo.prom import Prometheus
from slo.rules import BURN_WINDOWS
from slo.spec import RatioSLO, ratio_slos
from slo.traffic import window_traffic

THRESHOLDS: dict[str, float] = {"1h": 14.4, "6h": 6.0, "1d": 3.0, "3d": 1.0}


def parse_window(text: str) -> float:
    """A Prometheus-style duration (``30d``, ``12h``, ``2w``) in seconds
    (:func:`faultkit.model.durations.parse_prometheus_duration`: it goes into PromQL ranges)."""
    try:
        return parse_prometheus_duration(text)
    except ValueError:
        raise ValueError(f"window {text!r} must look like 30d, 12h or 2w") from None


def _num(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) or math.isinf(value) else value


def _slo_review(prom: Prometheus, slo: RatioSLO, window: str, firing: list[str],
                now: float) -> dict[str, Any]:
    budget = slo.budget
    ratio = _num(prom.query_value(slo.error_ratio(window), now))
    windows = sorted({w for _, lw, sw, _ in BURN_WINDOWS for w in (lw, sw)})
    burn = {}
    for w in windows:
        r = _num(prom.query_value(slo.error_ratio(w), now))
        burn[w] = None if r is None else r / budget
    would_fire = [
        f"{sev} {lw}/{sw} > {f:g}"
        for sev, lw, sw, f in BURN_WINDOWS
        if (burn[lw] or 0) > f and (burn[sw] or 0) > f
    ]
    spent = None if ratio is None else ratio / budget
    notes = [n for n in (slo.note,) if n]
    if ratio is None:
        notes.append("no data in the window (no traffic or metric absent)")
    return {
        "slo": slo.name,
        "objective": slo.objective,
        "description": slo.description,
        "weighting": slo.weighting,
        "sli": None if ratio is None else 1.0 - ratio,
        "budget_total": budget,
        "budget_spent_fraction": spent,
        "budget_remaining_fraction": None if spent is None else 1.0 - spent,
        "burn_rates": {k: burn.get(k) for k in THRESHOLDS},
        "burn_rates_short": {k: burn[k] for k in ("5m", "30m", "2h") if k in burn},
        "thresholds": dict(THRESHOLDS),
        "would_fire": would_fire,
        "alerts_firing_now": firing,
        "note": "; ".join(notes),
    }


def _node_requests(prom: Prometheus, node: Node, window: str, now: float) -> float | None:
    return window_traffic(prom, node, window, now).requests


def _run_start(info: RunInfo, measurement: dict[str, Any]) -> float | None:
    # "start" and "started_at": older run.json files
    for value in (info.t_start, info.get("start"), info.get("started_at")):
        if isinstance(value, int | float):
            return float(value)
    value = measurement.get("t_effect", measurement.get("t_inject"))
    return float(value) if isinstance(value, int | float) else None


def chaos_runs(runs_dir: Path, since: float, until: float) -> list[dict[str, Any]]:
    """Run directories whose run started in [since, until], oldest first."""
    out: list[dict[str, Any]] = []
    if not runs_dir.is_dir():
        return out
    for path in sorted(runs_dir.iterdir()):
        run_json, meas_json = path / RUN_JSON, path / MEASUREMENT_JSON
        if not path.is_dir() or not (run_json.exists() or meas_json.exists()):
            continue
        rd = RunDir(path)
        try:
            info = rd.info()
            meas = rd.read_object(rd.measurement_json)
        except UnreadableRunFile:
            continue  # a run directory being written right now
        t_start = _run_start(info, meas)
        if t_start is None or not since <= t_start <= until:
            continue
        out.append({
            "run_dir": str(path),
            "scenario": info.scenario,
            "node": info.node or meas.get("node"),
            "t_start": t_start,
            "lost": meas.get("lost_total"),
        })
    return out


def review(inventory: Inventory, prom: Prometheus, *, window: str | None = None,
           runs_dir: Path | None = None, now: float | None = None) -> dict[str, Any]:
    """The budget review as JSON-ready data (schema in the module docstring; docs/slo.md)."""
    prom.require_ready()
    now = time.time() if now is None else now
    alerts = prom.alerts()
    nodes_out = []
    requests_in_window: dict[str, float | None] = {}
    budgets: dict[str, float] = {}
    for node in inventory.nodes:
        settings = inventory.slo_for(node)
        win = window or f"{settings.window_days}d"
        firing = sorted({a.name for a in alerts if a.state == "firing"
                         and a.labels.get("node") == node.name})
        slos = [_slo_review(prom, s, win, firing, now) for s in ratio_slos(node, settings)]
        entry: dict[str, Any] = {"node": node.name, "engine": node.engine, "slos": slos}
        if node.prometheus is None:
            entry["note"] = "not scraped by Prometheus (no prometheus.job in the inventory)"
        nodes_out.append(entry)
        requests_in_window[node.name] = _node_requests(prom, node, win, now)
        budgets[node.name] = 1.0 - settings.availability
    win_text = window or f"{inventory.slo.window_days}d"
    runs = chaos_runs(runs_dir, now - parse_window(win_text), now) if runs_dir else []
    for run in runs:
        total = requests_in_window.get(run["node"] or "")
        budget = budgets.get(run["node"] or "")
        lost = run["lost"]
        run["budget_spent_fraction"] = (
            lost / (budget * total) if lost is not None and total and budget else None
        )
    return {
        "generated_at": now,
        "window": win_text,
        "prometheus": prom.url,
        "sli_weighting": "occurrences (good/valid events over the window); "
                         "time-based availability where an engine has no request counters",
        "nodes": nodes_out,
        "chaos_runs": runs,
    }


def _pct(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value * 100:.{digits}f}%"


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def format_table(data: dict[str, Any]) -> str:
    """A readable plain-text rendering of :func:`review`'s output."""
    lines = [f"Error-budget review over {data['window']} from {data['prometheus']} "
             f"(SLI weighting: occurrences)", ""]
    head = (f"{'node':<14}{'slo':<14}{'objective':>10}{'sli':>10}{'spent':>9}{'left':>9}"
            f"{'1h':>7}{'6h':>7}{'1d':>7}{'3d':>7}  firing / would fire")
    lines += [head, "-" * len(head)]
    for node in data["nodes"]:
        if not node["slos"]:
            lines.append(f"{node['node']:<14}{node.get('note', 'no SLOs')}")
        for s in node["slos"]:
            b = s["burn_rates"]
            alerts = ", ".join(s["alerts_firing_now"] + s["would_fire"]) or "-"
            lines.append(
                f"{node['node']:<14}{s['slo']:<14}{_pct(s['objective']):>10}"
                f"{_pct(s['sli'], 3):>10}{_pct(s['budget_spent_fraction'], 1):>9}"
                f"{_pct(s['budget_remaining_fraction'], 1):>9}"
                f"{_x(b['1h']):>7}{_x(b['6h']):>7}{_x(b['1d']):>7}{_x(b['3d']):>7}  {alerts}"
            )
            if s["note"]:
                lines.append(f"{'':<14}  note: {s['note']}")
    lines += ["", "burn-rate thresholds: 1h 14.4 · 6h 6 · 1d 3 · 3d 1", ""]
    runs = data["chaos_runs"]
    lines.append(f"Chaos runs in the window: {len(runs)}")
    for run in runs:
        lines.append(f"  {Path(run['run_dir']).name}  node={run['node']}  lost={run['lost']}  "
                     f"budget spent={_pct(run['budget_spent_fraction'], 3)}")
    return "\n".join(lines)
