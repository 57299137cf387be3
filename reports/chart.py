"""``timeline.png``: what users saw around the fault, then how long they waited, then one
Prometheus series.

- Top: the node's requests per second, **stacked by outcome** (ok / failed / shed by the
  client, error class ``shed_client``), binned by each request's **arrival**
  (``t_scheduled``, else ``t_invoke``): the user-visible impact.
- For a gateway run (its requests name the upstream that answered,
  :mod:`reports.upstreams`): the users' requests per second by that upstream, the
  gateway's own errors apart, and where Prometheus has them the gateway's own attempts
  and failed attempts per second on each upstream (LiteLLM's
  ``litellm_deployment_*_total`` by ``model_id``; retries included).
- Middle: per-request E2E latency against arrival, coloured by outcome.
- Bottom (when captured): the first Prometheus series with a finite sample.

Every panel shades the fault window and marks detection, the page and recovery; a
restart's recovery phases (:mod:`reports.phases`) run as a bar along the top panel. The x axis is
seconds from the moment the fault took effect. Synthetic ``probe`` records and neighbour
nodes' requests are left out. Headless: matplotlib's Agg backend through the object API
(no pyplot state), so it is safe in threads and on machines without a display.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from faultkit.model.records import RequestRecord
from faultkit.rundir import replaced_whole
from reports.load import RunData, finite_points
from reports.phases import Phase, recovery_phases
from reports.text import redact
from reports.upstreams import GATEWAY_OWN, gateway_users, per_upstream_per_second
from slo.capture import PrometheusCapture

#: outcome → colour of the stacked impact bars, bottom to top
IMPACT_COLOURS = {"ok": "#2ca02c", "failed": "#d62728", "shed": "#9467bd"}
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


def _series(prometheus: PrometheusCapture) -> tuple[str, list[tuple[float, float]]] | None:
    """The first captured series with at least one finite sample: (name, points)."""
    for s in prometheus.series:
        pts = finite_points(s.values)
        if pts:
            return s.name, pts
    return None


def _label(text: object, max_len: int = 60) -> str:
    """Untrusted text for a chart label: redacted, printable ASCII only (no missing glyphs)."""
    s = redact(str(text)).encode("ascii", "replace").decode("ascii")
    s = "".join(ch if ch.isprintable() else "?" for ch in s)
    return s.replace("$", "\\$")[:max_len]  # "$" would start mathtext


def arrival(r: RequestRecord) -> float:
    """When the user arrived (:attr:`RequestRecord.arrival`)."""
    return r.arrival


def outcome(r: RequestRecord) -> str:
    """``ok``, ``shed`` (never sent: ``shed_client``) or ``failed`` (fail or unknown)."""
    if r.status == "ok":
        return "ok"
    return "shed" if r.error_class == "shed_client" else "failed"


def user_requests(data: RunData) -> list[RequestRecord]:
    """The run node's non-probe requests (all non-probe ones if none name the node)."""
    records = [r for r in data.ledger if r.kind != "probe"]
    node = data.run.node
    mine = [r for r in records if r.node == node]
    return mine or records


def impact_per_second(
    records: Sequence[RequestRecord], t0: float
) -> tuple[list[int], dict[str, list[int]]]:
    """Requests per 1-s bin of arrival (relative to ``t0``), by :func:`outcome`.

    Returns the bins' left edges and, per outcome, one count per bin (zeros included).
    """
    if not records:
        return [], {k: [] for k in IMPACT_COLOURS}
    bins = [math.floor(arrival(r) - t0) for r in records]
    edges = list(range(min(bins), max(bins) + 1))
    counts = {k: [0] * len(edges) for k in IMPACT_COLOURS}
    for r, b in zip(records, bins, strict=True):
        counts[outcome(r)][b - edges[0]] += 1
    return edges, counts


def _draw_impact(ax: Axes, records: Sequence[RequestRecord], t0: float) -> None:
    edges, counts = impact_per_second(records, t0)
    bottom = [0] * len(edges)
    for name, colour in IMPACT_COLOURS.items():
        values = counts[name]
        if any(values):
            ax.bar(edges, values, width=1.0, align="edge", bottom=bottom, color=colour,
                   label=f"{name} ({sum(values)})", linewidth=0, zorder=2)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    if not edges:
        ax.text(0.5, 0.5, "no requests recorded", transform=ax.transAxes, ha="center")
    ax.set_ylabel("users' requests / s\nby arrival", fontsize=8)
    ax.set_ylim(top=max(bottom, default=1) * 1.5 + 0.5)  # headroom for the legend


def _draw_latency(ax: Axes, records: Sequence[RequestRecord], t0: float) -> None:
    """Scatter E2E latency (send → end) against arrival, by error class."""
    groups: dict[str, tuple[list[float], list[float]]] = {}
    for r in records:
        if r.error_class == "shed_client":
            continue  # never sent: no latency
        name = "ok" if r.status == "ok" else (r.error_class or r.status)
        xs, ys = groups.setdefault(name, ([], []))
        xs.append(arrival(r) - t0)
        ys.append(r.t_end - r.t_invoke)
    for name in sorted(groups, key=lambda o: (o != "ok", o)):
        xs, ys = groups[name]
        ax.scatter(xs, ys, s=10, color=_COLOURS.get(name, "#000000"), alpha=0.8,
                   label=f"{_label(name, 30)} ({len(xs)})",
                   marker="o" if name == "ok" else "x")
    ax.set_ylabel("E2E latency (s)", fontsize=8)
    top = max(max((y for _, ys in groups.values() for y in ys), default=1.0), 0.1)
    ax.set_ylim(bottom=-0.04 * top, top=top * 1.45)  # headroom so the legend hides no point


#: line colours of the per-upstream panel, in upstream order; the gateway's own errors red
_UPSTREAM_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf")


#: the gateway's own per-upstream series (slo.profiles: ``upstream_*_rate``) and their style
_GATEWAY_SIDE = {"upstream_attempts_rate": ("--", "attempts"),
                 "upstream_failures_rate": (":", "failed attempts")}


def _draw_upstreams(
    ax: Axes, records: Sequence[RequestRecord], t0: float, prometheus: PrometheusCapture
) -> None:
    """Users' requests per second by the upstream that answered them (step lines), and,
    where Prometheus has them, the gateway's own attempts and failed attempts per second
    on each upstream (dashed, dotted: retries included, which no user answer shows)."""
    edges, counts = per_upstream_per_second(records, t0)
    top = 1.0
    colours: dict[str, str] = {}
    for i, (name, values) in enumerate(counts.items()):
        colour = "#d62728" if name == GATEWAY_OWN else _UPSTREAM_COLOURS[i % 6]
        colours[name] = colour
        ax.step(edges, values, where="post", color=colour, linewidth=1.4,
                label=f"{_label(name, 34)} ({sum(values)})", zorder=2)
        top = max(top, *values)
    for s in prometheus.series:
        if s.name not in _GATEWAY_SIDE:
            continue
        style, what = _GATEWAY_SIDE[s.name]
        pts = finite_points(s.values)
        upstream = str(s.labels.get("model_id", "?"))
        if not pts or max(v for _, v in pts) <= 0:
            continue
        colour = colours.setdefault(upstream, _UPSTREAM_COLOURS[len(colours) % 6])
        ax.plot([t - t0 for t, _ in pts], [v for _, v in pts], color=colour, linestyle=style,
                linewidth=1.0, drawstyle="steps-post", zorder=2,
                label=f"{_label(upstream, 20)} {what}/s (gateway)")
        top = max(top, *(v for _, v in pts))
    ax.set_ylabel("requests / s\nby upstream", fontsize=8)
    ax.set_ylim(bottom=0, top=top * 1.5 + 0.5)


def _mark_fault(axes: Sequence[Axes], data: RunData, t0: float) -> None:
    """Shade the fault window (and the impact after it) and mark detection and recovery."""
    m = data.measurement
    if m is None:
        return
    for a in axes:
        first = a is axes[0]
        end = m.t_revert if m.t_revert is not None else m.t_window_end
        a.axvspan(m.t_effect - t0, end - t0, color="#d62728", alpha=0.12, zorder=0,
                  label="fault applied" if first else None)
        until = m.t_recovered if m.t_recovered is not None else m.t_window_end
        if until > end:  # impact outlasting the fault (e.g. an instant kill)
            a.axvspan(end - t0, until - t0, color="#d62728", alpha=0.05, zorder=0,
                      label="until recovered" if first else None)
        if m.t_detect is not None:
            a.axvline(m.t_detect - t0, color="#ff7f0e", linestyle="--", zorder=3,
                      label=f"detected ({_label(m.detect_signal, 20)})" if first else None)
        if m.paging is not None and m.paging.t_paged is not None:
            a.axvline(m.paging.t_paged - t0, color="#9467bd", linestyle=":", zorder=3,
                      label="paged" if first else None)
        if m.t_recovered is not None:
            a.axvline(m.t_recovered - t0, color="#1a6b1a", linestyle="-.", zorder=3,
                      label="recovered" if first else None)


#: the recovery phases' colours, in order (a restart has at most six phases)
_PHASE_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8")


def _draw_phases(ax: Axes, phases: Sequence[Phase], t0: float) -> None:
    """The recovery's phases as one bar on their own thin panel, each named where it is
    wide enough to hold its name."""
    span = max(p.t_end for p in phases) - min(p.t_start for p in phases)
    for i, phase in enumerate(phases):
        ax.broken_barh([(phase.t_start - t0, phase.duration_s)], (0.15, 0.7),
                       color=_PHASE_COLOURS[i % len(_PHASE_COLOURS)], alpha=0.8, zorder=4)
        if span > 0 and phase.duration_s / span >= 0.12:
            ax.text(phase.t_start - t0 + phase.duration_s / 2, 0.5,
                    _label(phase.name.removeprefix("until "), 28), ha="center",
                    va="center", fontsize=7, zorder=5)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_ylabel("recovery\nphases", fontsize=8)


def render_chart(data: RunData, out: Path) -> Path:
    """Draw the chart for ``data`` into ``out`` (PNG) and return ``out``."""
    t0 = data.t0 or 0.0
    series = _series(data.prometheus)
    if series is not None and series[0] in _GATEWAY_SIDE:
        series = None  # drawn in the per-upstream panel
    records = user_requests(data)
    behind = gateway_users(data)
    phases = recovery_phases(data)
    heights = [*([0.22] if phases else []), 1.0, *([0.9] if behind else []), 1.2,
               *([0.7] if series else [])]
    fig = Figure(figsize=(10, 7.0 + (1.3 if behind else 0.0) + (1.5 if series else 0.0)
                          + (0.5 if phases else 0.0)), dpi=100)
    FigureCanvasAgg(fig)
    axes = [row[0] for row in fig.subplots(
        len(heights), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights}
    )]
    phase_ax = axes.pop(0) if phases else None
    _draw_impact(axes[0], records, t0)
    if behind:
        _draw_upstreams(axes[1], behind, t0, data.prometheus)
    latency_ax = axes[2 if behind else 1]
    _draw_latency(latency_ax, records, t0)
    title = _label(f"{data.run.get('scenario', 'run')} on {data.run.get('node', '?')}", 80)
    (phase_ax or axes[0]).set_title(title)
    _mark_fault(axes, data, t0)
    if phase_ax is not None:
        _draw_phases(phase_ax, phases, t0)
    for ax in axes[:3 if behind else 2]:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=7, ncol=4)
    if series:
        name, pts = series
        axes[-1].plot([t - t0 for t, _ in pts], [v for _, v in pts], color="#1f77b4",
                      drawstyle="steps-post")
        axes[-1].set_ylabel(_label(name, 40), fontsize=8)
    axes[-1].set_xlabel("seconds from the fault taking effect")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    with replaced_whole(out) as tmp:  # a kill mid-write leaves no torn chart
        fig.savefig(tmp, format="png")
    return out
