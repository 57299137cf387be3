"""Render run directories into ``incident.md`` (+ ``timeline.png``), and gate / budget JSON
into ``gate.md`` / ``budget.md``, with jinja2 templates from ``reports/templates``.

Templates receive untrusted text raw and must pass it through the ``text``, ``code`` or
``fenced`` filters (:mod:`reports.markup`, :func:`reports.text.fenced`); numbers go
through ``num``. Autoescaping is off because the output is markdown, not HTML; the filters
escape only what markdown needs, so the raw file reads as plain text. Links are relative:
an incident report links its own files, a gate summary each scenario's run directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jinja2

from faultkit.rundir import (
    CANDIDATE_LOG,
    GATE_JSON,
    INCIDENT_MD,
    TIMELINE_JSONL,
    TIMELINE_PNG,
    GateResult,
    replaced_whole,
)
from reports import markup, text
from reports.baseline import baseline_view
from reports.chart import render_chart
from reports.diagnosis import diagnose
from reports.evidence import fault_kind
from reports.figures import key_figures
from reports.load import RUN_FILES, RunData, load_run
from reports.numbers import is_number, num, pct
from reports.outage import no_outage
from reports.phases import recovery_phases, slowest
from reports.prevention import changes_for
from reports.provenance import Figure
from reports.recovery import analyse
from reports.steady import speculation_view, steady_view
from reports.summary import judged_line, summary
from reports.tables import alert_rows, container_states, errors_by_class, log_excerpt, series_rows
from reports.timeline import rows, signed, utc
from reports.upstreams import route_around_lines, upstream_rows


def _num(value: object, digits: int = 1) -> str:
    """A number as reports show it; anything else as escaped text; ``None`` as a dash."""
    if value is None:
        return "—"
    if isinstance(value, int | float):  # a bool too: num() writes it lower-case
        return num(value, digits)
    return markup.text(value)


def _val(value: object) -> str:
    """A container state value: booleans lower-case, text escaped, ``None`` a dash."""
    if value is None:
        return "—"
    return str(value).lower() if isinstance(value, bool) else markup.text(value)


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reports", "templates"),
    autoescape=False,  # markdown output; escaping is done by the markup filters
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_ENV.filters.update(
    text=markup.text,
    code=markup.code,
    code_text=markup.code_text,
    trusted=markup.trusted,
    href=markup.href,
    fenced=text.fenced,
    inline=text.inline,  # gate.md keeps its escaping until its tests move to markup.text
    num=_num,
    pct=lambda v: "—" if v is None else pct(v),
    utc=lambda t: "—" if not is_number(t) else utc(t),
    signed=signed,
    val=_val,
)

#: files an incident report links to, in this order (the run directory's own files)
LINKED_FILES = (*RUN_FILES, TIMELINE_PNG)



def _missing_evidence(data: RunData) -> list[str]:
    """What evidence the run lacked: the verdict's (run-level reasons, then checks it could
    not judge), then any of the measurement's gaps the verdict does not already name."""
    reasons = list(data.verdict.missing_evidence) if data.verdict is not None else []
    if data.measurement is not None:
        reasons += [r for r in data.measurement.inconclusive if r not in reasons]
    return reasons


def _source_md(figure: Figure, existing: set[str]) -> str:
    """A figure's sources as markdown: the file linked (when it exists), fields as code."""
    parts = []
    for src in figure.sources:
        name = markup.link(src.file, src.file) if src.file in existing else markup.text(src.file)
        fields = ", ".join(markup.code(f) for f in src.fields)
        parts.append(" ".join(p for p in (name, fields, markup.text(src.note) if src.note else "")
                              if p))
    return "; ".join(parts)


def _effect(data: RunData) -> str | None:
    """The evidence that fixed ``t_effect`` as markdown: ``effect_detail`` and the kind of
    evidence (``None`` when the measurement does not say)."""
    m = data.measurement
    if m is None:
        return None
    kind = f"evidence: {markup.code_text(m.effect_evidence)}"
    if m.effect_detail:
        return f"{markup.text(m.effect_detail)} ({kind})"
    return None if m.effect_evidence == "call" else kind


def _flat(series: dict[str, Any]) -> bool:
    """A series whose every sample had one value: its name and value say all a row would."""
    return series["min"] is not None and series["min"] == series["max"]


def incident_context(data: RunData) -> dict[str, Any]:
    """Everything ``incident.md.j2`` needs, computed from ``data`` alone."""
    diagnoses = diagnose(data)
    timeline_rows = rows(data)
    # shown verbatim: the fault as run.json holds it
    fault = data.run.get("fault") if isinstance(data.run.get("fault"), dict) else {}
    kind = fault_kind(data)
    m = data.measurement
    existing = {name for name in LINKED_FILES if (data.path / name).exists()}
    series = series_rows(data)
    phases = recovery_phases(data)
    return {
        "run": data.run,
        "path": data.path.name,
        "files": [name for name in LINKED_FILES if name in existing],
        "summary": summary(data),
        "judged": judged_line(data),
        "fault": fault,
        "fault_kind": kind,
        "measurement": m,
        "effect": _effect(data),
        "no_outage": m is not None and no_outage(kind, m),
        "verdict": data.verdict,
        "missing_evidence": _missing_evidence(data),
        "intervened": list(m.harness_intervened) if m is not None else [],
        "t_effect": data.t_effect,
        "figures": [
            {"label": f.label, "value": f.value, "source": _source_md(f, existing)}
            for f in key_figures(data, kind)
        ],
        "rows": timeline_rows,
        "errors": errors_by_class(data),
        "slis": [
            (name, m.slis[name])
            for name in ("baseline", "fault", "after")
            if m is not None and name in m.slis
        ],
        "series": [s for s in series if not _flat(s)],
        "flat_series": [s for s in series if _flat(s)],
        "alerts": alert_rows(data),
        "prom_alerts": list(data.prometheus.alerts),
        "container_captured": data.container.captured,
        "states": container_states(data),
        "log": log_excerpt(data),
        "diagnoses": diagnoses,
        "changes": changes_for(diagnoses, data),
        "recovery": analyse(data),
        "phases": phases,
        "slowest": slowest(phases),
        "missing": data.missing,
        "problems": data.problems,
        "slo": data.run.slo,
        "load_profile": data.run.load_profile,
        "upstreams": upstream_rows(data),
        "route_around": route_around_lines(data.route_around),
        "limits": _limits_probe(data),
        "soak": _soak(data),
        "speculation": speculation_view(data.run.fault_result.get("speculation")),
    }


def _soak(data: RunData) -> dict[str, Any] | None:
    """A soak's findings (``test_soak``: run.json ``fault.result.soak``), with the memory
    projection in words."""
    soak = data.run.fault_result.get("soak")
    if not isinstance(soak, dict):
        return None
    memory = soak.get("memory") if isinstance(soak.get("memory"), dict) else None
    rows: list[tuple[str, str]] = []
    if memory:
        mib = 2**20
        for label, key, scale, unit in (("slope", "slope_bps", 1024, "KiB/s"),
                                        ("slope, lower 95 % bound", "slope_low_bps", 1024,
                                         "KiB/s"),
                                        ("rise over the fit", "rise_bytes", mib, "MiB"),
                                        ("fitted now", "last_bytes", mib, "MiB"),
                                        ("container limit", "limit_bytes", mib, "MiB")):
            value = memory.get(key)
            rows.append((label, f"{value / scale:.1f} {unit}"
                         if is_number(value) else "—"))
        for label, key in (("time to the limit", "seconds_to_limit"),
                           ("time to the limit at the lower bound", "seconds_to_limit_low")):
            value = memory.get(key)
            rows.append((label, f"{value / 3600:.2f} h" if is_number(value)
                         else "never (not rising)"))
        rows.append(("horizon", f"{memory.get('horizon_s', 0) / 3600:g} h"))
    return {"memory_rows": rows, "memory_why": soak.get("memory_why") or "",
            "preemptions_why": soak.get("preemptions_why") or "",
            "seconds": data.run.fault_result.get("seconds"),
            "rate": data.run.fault_result.get("rate"),
            "samples": len(soak.get("memory_samples") or [])}


def _limits_probe(data: RunData) -> dict[str, Any] | None:
    """The context-limit probe's result (``test_limits``: run.json ``fault.result``)."""
    result = data.run.fault_result
    steps = result.get("steps")
    if not isinstance(steps, list) or "context_limit" not in result:
        return None
    return {"result": result, "steps": [s for s in steps if isinstance(s, dict)]}


def render_incident(run_dir: Path) -> Path:
    """Write ``incident.md`` and ``timeline.png`` into ``run_dir``; return the md path.

    Each is replaced whole (``faultkit.rundir.replaced_whole``): a process killed while
    rendering leaves the files as they were, and ``faultkit report RUN_DIR`` renders again.

    Reads only the run directory's files. Raises ``NotARunDirectory`` for a path that
    holds none of them.
    """
    data = load_run(run_dir)
    render_chart(data, run_dir / TIMELINE_PNG)
    md = _ENV.get_template("incident.md.j2").render(**incident_context(data))
    out = run_dir / INCIDENT_MD
    with replaced_whole(out) as tmp:  # a kill mid-write leaves no torn report
        tmp.write_text(md, encoding="utf-8")
    return out


def relative_link(target: object, base: Path, *, inside: str = "") -> str | None:
    """The path of ``target`` relative to directory ``base``, for a markdown link.

    ``target`` is a path as some JSON recorded it (relative to the working directory of
    the process that wrote it, or absolute). Tried in order: ``base/inside/<name>`` (a
    gate's own ``runs/``), then ``target`` itself if it exists. ``None`` when neither
    exists: a dead link is worse than none.
    """
    if not isinstance(target, str) or not target:
        return None
    path = Path(target)
    if inside and (base / inside / path.name).exists():
        return path.name if inside == "." else f"{inside}/{path.name}"
    if path.exists():
        return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()
    return None


def _scenario_rows(scenarios: list[dict[str, Any]], gate_dir: Path) -> list[dict[str, Any]]:
    """Each gate scenario with ``rel``: its run directory relative to the gate directory."""
    out = []
    for s in scenarios:
        rel = relative_link(s.get("run_dir"), gate_dir, inside="runs")
        has_report = rel is not None and (gate_dir / rel / INCIDENT_MD).exists()
        out.append({**s, "rel": rel, "has_report": has_report})
    return out


def render_gate(result: GateResult, out: Path) -> Path:
    """Write the gate summary for a gate result (``gate.json``; template
    ``templates/gate.md.j2``) to ``out``.

    Scenario rows link their run directory and incident report relative to ``out``'s
    directory (the gate directory), when those exist.
    """
    gate_dir = out.parent
    md = _ENV.get_template("gate.md.j2").render(
        d=result.to_json(),
        scenarios=_scenario_rows(result.scenarios, gate_dir),
        not_passed=result.not_passed,
        accepted=result.accepted,
        diff="\n".join(line.rstrip("\n") for line in result.config_diff),
        junit=relative_link(result.junit_xml, gate_dir, inside="."),
        files=[n for n in (GATE_JSON, TIMELINE_JSONL, CANDIDATE_LOG) if (gate_dir / n).exists()],
        steady=_steady_with_evidence(result.steady_state, gate_dir),
        baseline=baseline_view(result.baseline, result.scenarios),
        pool=[{"node": str(p.get("node") or "?"),
               "steady": _steady_with_evidence(p.get("steady_state"), gate_dir),
               "count": len(p.get("scenarios") or ()),
               "expected": _seconds(p.get("expected_s"))} for p in result.pool],
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md, encoding="utf-8")
    return out


def _steady_with_evidence(steady: object, gate_dir: Path) -> dict[str, Any] | None:
    """:func:`~reports.steady.steady_view` with each measured side's ``rel``: its
    steady-state run directory relative to the gate directory (``None``: not recorded, or
    no longer there)."""
    view = steady_view(steady)
    if view is None or not view.get("checked") or not isinstance(steady, dict):
        return view
    for side in ("current", "candidate"):
        recorded = steady.get(side)
        run_dir = recorded.get("run_dir") if isinstance(recorded, dict) else None
        view[side]["rel"] = relative_link(run_dir, gate_dir, inside="steady")
    return view


def render_budget(data: dict[str, Any], out: Path) -> Path:
    """Write the error-budget review for a budget JSON (from ``faultkit budget``) to ``out``."""
    nodes = [n for n in data.get("nodes") or [] if isinstance(n, dict)]
    runs = [
        {**r, "rel": relative_link(r.get("run_dir"), out.parent)}
        for r in data.get("chaos_runs") or []
        if isinstance(r, dict)
    ]
    md = _ENV.get_template("budget.md.j2").render(d=data, nodes=nodes, runs=runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md, encoding="utf-8")
    return out


def _seconds(value: object) -> str | None:
    """``expected_s`` of a pool entry as "~N s" (None when absent or not a number)."""
    if not is_number(value):
        return None
    return f"~{value:.0f} s"
