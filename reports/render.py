"""Render run directories into ``incident.md`` (+ ``timeline.png``), and gate / budget JSON
into ``gate.md`` / ``budget.md``, with jinja2 templates from ``reports/templates``.

Templates receive untrusted text raw and must pass it through the ``inline``, ``code`` or
``fenced`` filters (:mod:`reports.text`); numbers go through ``num``. Autoescaping is off
because the output is markdown, not HTML; the filters do the escaping markdown needs.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import jinja2

from reports import text
from reports.chart import render_chart
from reports.diagnosis import CONTEXT_RE, GPU_OOM_RE, STARTUP_KV_RE, diagnose, fault_kind
from reports.figures import key_figures, num, pct
from reports.load import RunData, finite_points, load_run
from reports.prevention import changes_for
from reports.recovery import analyse
from reports.timeline import mermaid, rows, signed, utc

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reports", "templates"),
    autoescape=False,  # markdown output; escaping is done by the text filters
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_ENV.filters.update(
    inline=text.inline,
    code=text.code,
    fenced=text.fenced,
    num=lambda v, d=1: (
        "—" if v is None else (num(v, d) if isinstance(v, int | float) else text.inline(v))
    ),
    pct=lambda v: "—" if v is None else pct(v),
    utc=lambda t: "—" if not isinstance(t, int | float) else utc(t),
    signed=signed,
    val=lambda x: "—" if x is None else (str(x).lower() if isinstance(x, bool) else text.inline(x)),
)

CONTAINER_FIELDS = (
    "status",
    "exit_code",
    "oom_killed",
    "restart_count",
    "started_at",
    "finished_at",
    "image",
)
LOG_EXCERPT_LINES = 20


def _series_rows(data: RunData) -> list[dict[str, Any]]:
    result = []
    for s in data.prometheus.get("series") or []:
        if not isinstance(s, dict):
            continue
        pts = finite_points(s.get("values"))
        result.append(
            {
                "name": s.get("name", "?"),
                "promql": s.get("promql", "not captured"),
                "labels": s.get("labels") or {},
                "samples": len(s.get("values") or []),
                "min": min((v for _, v in pts), default=None),
                "max": max((v for _, v in pts), default=None),
            }
        )
    return result


def _alert_rows(data: RunData) -> list[dict[str, Any]]:
    t0 = data.t0
    alerts: dict[str, dict[str, Any]] = {}
    for e in data.timeline:
        if e.source == "observer" and e.kind.startswith("alert_"):
            name = str(e.data.get("alertname", "?"))
            entry = alerts.setdefault(name, {"name": name})
            entry.setdefault(e.kind.removeprefix("alert_"), None if t0 is None else e.t - t0)
    return list(alerts.values())


def _errors_by_class(data: RunData) -> list[dict[str, Any]]:
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
    return [
        {
            "cls": c,
            "count": n,
            "http": ", ".join(map(str, sorted(statuses.get(c, ())))),
            "example": example.get(c, ""),
        }
        for c, n in counts.most_common()
    ]


def _log_excerpt(data: RunData) -> str | None:
    tail = data.container.get("log_tail")
    if not isinstance(tail, str) or not tail.strip():
        return None
    lines = tail.splitlines()
    pattern = re.compile(
        "|".join(p.pattern for p in (GPU_OOM_RE, STARTUP_KV_RE, CONTEXT_RE))
        + r"|error|killed|Traceback",
        re.IGNORECASE,
    )
    hits = [i for i, line in enumerate(lines) if pattern.search(line)]
    if hits:
        start = max(0, hits[0] - 5)
        return "\n".join(lines[start : start + LOG_EXCERPT_LINES])
    return "\n".join(lines[-LOG_EXCERPT_LINES:])


def _states(data: RunData) -> list[dict[str, Any]]:
    before, after = data.container.get("before"), data.container.get("after")
    b = before if isinstance(before, dict) else {}
    a = after if isinstance(after, dict) else {}
    return [
        {
            "field": f,
            "before": b.get(f, "not captured") if b else "not captured",
            "after": a.get(f, "not captured") if a else "not captured",
        }
        for f in CONTAINER_FIELDS
    ]


def _missing_evidence(data: RunData) -> list[str]:
    """What evidence the run lacked: the verdict's (run-level reasons, then checks it could
    not judge), then any of the measurement's gaps the verdict does not already name."""
    reasons = list(data.verdict.missing_evidence) if data.verdict is not None else []
    if data.measurement is not None:
        reasons += [r for r in data.measurement.inconclusive if r not in reasons]
    return reasons


def incident_context(data: RunData) -> dict[str, Any]:
    """Everything ``incident.md.j2`` needs, computed from ``data`` alone."""
    diagnoses = diagnose(data)
    timeline_rows = rows(data)
    fault = data.run.get("fault") if isinstance(data.run.get("fault"), dict) else {}
    m = data.measurement
    return {
        "run": data.run,
        "path": data.path.name,
        "fault": fault,
        "fault_kind": fault_kind(data),
        "measurement": m,
        "verdict": data.verdict,
        "missing_evidence": _missing_evidence(data),
        "intervened": list(m.harness_intervened) if m is not None else [],
        "t_effect": data.t_effect,
        "figures": key_figures(data),
        "rows": timeline_rows,
        "mermaid": mermaid(timeline_rows),
        "errors": _errors_by_class(data),
        "slis": [
            (name, m.slis[name])
            for name in ("baseline", "fault", "after")
            if m is not None and name in m.slis
        ],
        "series": _series_rows(data),
        "alerts": _alert_rows(data),
        "prom_alerts": [a for a in data.prometheus.get("alerts") or [] if isinstance(a, dict)],
        "container_captured": bool(data.container),
        "states": _states(data),
        "log": _log_excerpt(data),
        "diagnoses": diagnoses,
        "changes": changes_for(diagnoses),
        "recovery": analyse(data),
        "missing": data.missing,
        "problems": data.problems,
        "slo": data.run.get("slo") if isinstance(data.run.get("slo"), dict) else {},
        "load_profile": data.run.get("load_profile")
        if isinstance(data.run.get("load_profile"), dict)
        else {},
    }


def render_incident(run_dir: Path) -> Path:
    """Write ``incident.md`` and ``timeline.png`` into ``run_dir``; return the md path.

    Reads only the run directory's files. Raises ``NotARunDirectory`` for a path that
    holds none of them.
    """
    data = load_run(run_dir)
    render_chart(data, run_dir / "timeline.png")
    md = _ENV.get_template("incident.md.j2").render(**incident_context(data))
    out = run_dir / "incident.md"
    out.write_text(md, encoding="utf-8")
    return out


def render_gate(data: dict[str, Any], out: Path) -> Path:
    """Write the gate summary for a gate JSON (schema in ``templates/gate.md.j2``) to ``out``."""
    scenarios = [s for s in data.get("scenarios") or [] if isinstance(s, dict)]
    not_passed = data.get("not_passed")
    diff = data.get("config_diff") or []
    md = _ENV.get_template("gate.md.j2").render(
        d=data,
        scenarios=scenarios,
        not_passed=[str(line) for line in not_passed] if isinstance(not_passed, list) else [],
        diff="\n".join(str(line).rstrip("\n") for line in diff)
        if isinstance(diff, list)
        else str(diff),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md, encoding="utf-8")
    return out


def render_budget(data: dict[str, Any], out: Path) -> Path:
    """Write the error-budget review for a budget JSON (from ``faultkit budget``) to ``out``."""
    nodes = [n for n in data.get("nodes") or [] if isinstance(n, dict)]
    runs = [r for r in data.get("chaos_runs") or [] if isinstance(r, dict)]
    md = _ENV.get_template("budget.md.j2").render(d=data, nodes=nodes, runs=runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md, encoding="utf-8")
    return out
