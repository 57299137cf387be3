"""``postmortem.md``: the postmortem as an SRE reads it — the verdict first, then one
timeline per incident, the bounds behind every time, and which evidence there was.

Every time is Prometheus' own stamp, shown in UTC to the millisecond and in seconds from
the incident's first failed scrape. Nothing here is computed that ``postmortem.json`` does
not hold, except the differences the text states.
"""

from __future__ import annotations

from datetime import UTC, datetime

from faultkit.postmortem.incidents import GAP_INTERVALS
from faultkit.postmortem.model import Bound, Incident, Postmortem, Related
from reports.text import code, inline

__all__ = ["render_markdown", "utc"]


def utc(t: float | None) -> str:
    """``2026-12-07 03:30:01.123 UTC``; ``—`` for ``None``."""
    if t is None:
        return "—"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _s(x: float) -> str:
    return f"{x:.1f} s" if abs(x) >= 10 else f"{x:.2f} s"


def _bound(b: Bound | None, open_end: str = "still failing at the window's end") -> str:
    if b is None:
        return open_end
    if b.after is None:
        return f"by {utc(b.by)}, failing at the window's first sample (before it: not read)"
    by = "after the window" if b.by is None else utc(b.by)
    width = "" if b.width_s is None else f" (a bound {_s(b.width_s)} wide)"
    return f"after {utc(b.after)}, by {by}{width}"


def _summary_line(n: int, inc: Incident, interval_s: float) -> str:
    parts = [f"**Incident {n}**: {inc.failed_scrapes} failed scrape"
             + ("s" if inc.failed_scrapes != 1 else "")]
    duration = inc.duration_s
    if inc.start.after is None:
        parts.append("already failing at the window's first sample")
    for side, bound in (("start", inc.start), ("end", inc.end)):
        width = None if bound is None else bound.width_s
        if width is not None and width > GAP_INTERVALS * interval_s:
            parts.append(f"its {side} is known only within {_s(width)} (no sample between)")
    if inc.end is None:
        parts.append("still down at the window's end")
    elif duration is not None:
        parts.append(f"down for {_s(duration[0])}–{_s(duration[1])}")
    if inc.failed_scrapes == 1:
        parts.append("one scrape only: it may be the scrape that failed, not the node")
    if inc.detection is None:
        parts.append("**no alert for the node began firing during it**")
    else:
        parts.append(f"detected by {code(inc.detection.alert)} at {utc(inc.detection.t_first)}"
                     + _detect_delay(inc))
    if inc.end is not None:
        parts.append("recovered" + ("" if inc.held else
                                    " (not yet held: the window ended first)"))
    parts.append(f"{len(inc.restarts)} restart(s) seen" if inc.restarts
                 else "no restart seen")
    return "; ".join(parts) + "."


def _detect_delay(inc: Incident) -> str:
    assert inc.detection is not None
    t, start = inc.detection.t_first, inc.start
    if start.after is None or start.by is None:
        return ""
    low, high = max(0.0, t - start.by), t - start.after
    return f" ({_s(low)}–{_s(high)} after the outage began)"


def _timeline(inc: Incident) -> list[str]:
    zero = inc.start.by
    rows: list[tuple[float, str, str]] = []
    if inc.start.after is not None:
        rows.append((inc.start.after, "last good scrape before the outage", "`up` = 1"))
    if inc.start.by is not None:
        rows.append((inc.start.by, "first failed scrape", "`up` = 0"))
    rows += [(a.t_first, f"alert {code(a.alert)} began firing",
              f"`ALERTS` (last firing sample {utc(a.t_last)})") for a in inc.alerts]
    rows += [(r.t_process_start, "the engine's new process started (its own clock)",
              f"process start time, first scraped at {utc(r.t_seen)}") for r in inc.restarts]
    if inc.end is not None and inc.end.after is not None:
        rows.append((inc.end.after, "last failed scrape", "`up` = 0"))
    if inc.end is not None and inc.end.by is not None:
        rows.append((inc.end.by, "first good scrape after it" + (", held" if inc.held else
                                                                 ", not held to the window's end"),
                     "`up` = 1"))
    lines = ["| time (UTC) | from first failed scrape | what | evidence |", "|---|---|---|---|"]
    for t, what, evidence in sorted(rows, key=lambda r: r[0]):
        offset = "—" if zero is None else f"{t - zero:+.3f} s"
        lines.append(f"| {utc(t)} | {offset} | {what} | {evidence} |")
    return lines


def _meanwhile(r: Related) -> str:
    """An overlapping incident of another node of the same postmortem, with its report."""
    until = "still down at the window's end" if r.t_end is None else f"to {utc(r.t_end)}"
    report = f" ([its report](../{r.run}/incident.md))" if r.run else ""
    return (f"- Meanwhile {inline(r.node)} was down too (its incident {r.other}, from "
            f"{utc(r.t_start)} {until}){report}.")


def render_markdown(pm: Postmortem) -> str:
    """The whole ``postmortem.md`` text."""
    f, ev = pm.findings, pm.evidence
    out = [f"# Postmortem: {inline(pm.node)}",
           "",
           f"Window {utc(pm.t_from)} → {utc(pm.t_to)}, from monitoring alone: Prometheus at "
           f"{code(pm.prometheus_url)}, job {code(pm.job)}, scraped every "
           f"{_s(pm.scrape_interval_s)}. Recovered means good scrapes held {_s(f.hold_s)}.",
           ""]
    if not f.incidents:
        out.append(f"**No outage**: every one of the {ev.up_samples} scrapes in the window "
                   "answered.")
    else:
        out.append(f"**{len(f.incidents)} incident(s)** in the window.")
        out += ["", *(f"- {_summary_line(n, inc, pm.scrape_interval_s)}"
                      for n, inc in enumerate(f.incidents, 1))]
    out += ["", "Each incident's report — users affected (estimated from the server's "
            "counters), the diagnosis from Docker's events and the container's log, the "
            "objectives judged — is the incident report of its own run directory:"]
    out += [f"- Incident {n}: [{name}/incident.md](../{name}/incident.md)"
            for n, name in enumerate(pm.runs, 1)] or ["- none written"]
    if f.restarts_outside:
        out += ["", f"{len(f.restarts_outside)} restart(s) with no failed scrape (a crash and "
                "restart within one scrape interval): "
                + ", ".join(utc(r.t_process_start) for r in f.restarts_outside) + "."]
    for n, inc in enumerate(f.incidents, 1):
        out += ["", f"## Incident {n}", "", *_timeline(inc), "",
                f"- Start: {_bound(inc.start)}.",
                f"- End: {_bound(inc.end)}.",
                f"- Good scrapes inside (a flap that did not hold): {inc.good_scrapes_inside}."]
        out += [_meanwhile(r) for r in pm.related if r.incident == n]
    out += ["", "## How sure", "",
            "Each time is bounded by two scrape stamps: the outage began after the last good "
            "scrape and by the first failed one, and ended after the last failed scrape and "
            "by the first good one. Prometheus stamps a scrape when it begins, so the moment "
            "a bound encloses can trail its later side by up to one scrape's duration. An "
            "alert is dated by the rule evaluation that first stored it firing.",
            "", "## Evidence", "",
            f"- `up`: {ev.up_samples} samples in {ev.up_series} series.",
            f"- `ALERTS` firing for the node: {ev.alert_series} series.",
            "- Process start time: " + (
                "not exposed by this engine." if ev.process_start_metric is None else
                f"{code(ev.process_start_metric)}, {ev.process_start_samples} samples."),
            ]
    out += [f"- No sample at all from {utc(g.after)} to {utc(g.by)} ({_s(g.by - g.after)}): "
            "monitoring saw nothing there." for g in f.gaps]
    out += [f"- Missing: {inline(m)}." for m in ev.missing]
    out += ["- Not read here: the clients' side (no ledger). Docker's events, the "
            "container's state and log are in each incident's run directory."]
    return "\n".join(out) + "\n"
