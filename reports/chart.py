"""``timeline.png``: per-request latency over invoke time, coloured by outcome, with the
fault window shaded, detection and recovery marked, and one Prometheus series below.

Headless: uses matplotlib's Agg backend through the object API (no pyplot state), so it is
safe in threads and on machines without a display. The x axis is seconds from injection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from reports.load import RunData, finite_points
from reports.text import redact

_COLOURS = {
    "ok": "#2ca02c",
    "refused": "#d62728",
    "reset": "#9467bd",
    "timeout_connect": "#8c564b",
    "timeout_first_token": "#e377c2",
    "timeout_total": "#7f7f7f",
    "http_4xx": "#bcbd22",
    "http_429": "#17becf",
    "http_5xx": "#ff7f0e",
    "stream_error": "#1f77b4",
    "truncated": "#393b79",
}


def _series(prometheus: dict[str, Any]) -> tuple[str, list[tuple[float, float]]] | None:
    """The first captured series with at least one finite sample: (name, points)."""
    for s in prometheus.get("series") or []:
        if isinstance(s, dict):
            pts = finite_points(s.get("values"))
            if pts:
                return str(s.get("name", "series")), pts
    return None


def _label(text: object, max_len: int = 60) -> str:
    """Untrusted text for a chart label: redacted, printable ASCII only (no missing glyphs)."""
    s = redact(str(text)).encode("ascii", "replace").decode("ascii")
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    return s.replace("$", "\\$")[:max_len]  # "$" would start mathtext


def render_chart(data: RunData, out: Path) -> Path:
    """Draw the chart for ``data`` into ``out`` (PNG) and return ``out``."""
    t0 = data.t0 or 0.0
    series = _series(data.prometheus)
    fig = Figure(figsize=(10, 6.5 if series else 4.5), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2 if series else 1, 1, sharex=True, squeeze=False)
    ax = axes[0][0]
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for r in data.ledger:
        outcome = "ok" if r.status == "ok" else (r.error_class or r.status)
        xs, ys = groups.setdefault(outcome, ([], []))
        xs.append(r.t_invoke - t0)
        ys.append(r.t_end - r.t_invoke)
    for outcome in sorted(groups, key=lambda o: (o != "ok", o)):
        xs, ys = groups[outcome]
        ax.scatter(
            xs,
            ys,
            s=10,
            color=_COLOURS.get(outcome, "#000000"),
            label=f"{_label(outcome, 30)} ({len(xs)})",
            alpha=0.8,
            marker="o" if outcome == "ok" else "x",
        )
    if not groups:
        ax.text(0.5, 0.5, "no requests recorded", transform=ax.transAxes, ha="center")
    ax.set_ylabel("E2E latency (s)")
    ax.set_title(_label(f"{data.run.get('scenario', 'run')} on {data.run.get('node', '?')}", 80))
    m = data.measurement
    for row in axes:
        a = row[0]
        if m is not None:
            end = m.t_revert if m.t_revert is not None else m.t_window_end
            a.axvspan(
                m.t_effect - t0,
                end - t0,
                color="#d62728",
                alpha=0.18,
                label="fault applied" if a is ax else None,
            )
            until = m.t_recovered if m.t_recovered is not None else m.t_window_end
            if until > end:  # impact outlasting the fault (e.g. an instant kill)
                a.axvspan(
                    end - t0,
                    until - t0,
                    color="#d62728",
                    alpha=0.06,
                    label="until recovered" if a is ax else None,
                )
            if m.t_detect is not None:
                a.axvline(
                    m.t_detect - t0,
                    color="#ff7f0e",
                    linestyle="--",
                    label=f"detected ({_label(m.detect_signal, 20)})" if a is ax else None,
                )
            if m.t_recovered is not None:
                a.axvline(
                    m.t_recovered - t0,
                    color="#2ca02c",
                    linestyle="-.",
                    label="recovered" if a is ax else None,
                )
    top = max((y for _, ys in groups.values() for y in ys), default=1.0)
    top = max(top, 0.1)
    ax.set_ylim(bottom=-0.04 * top, top=top * 1.45)  # headroom so the legend hides no point
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=7, ncol=4)
    if series:
        pa = axes[1][0]
        name, pts = series
        pa.plot(
            [t - t0 for t, _ in pts], [v for _, v in pts], color="#1f77b4", drawstyle="steps-post"
        )
        pa.set_ylabel(_label(name, 40), fontsize=8)
    axes[-1][0].set_xlabel("seconds from injection")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
