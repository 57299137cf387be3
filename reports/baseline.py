"""The gate's "Scenarios against the current config" table for gate.md, from gate.json
``baseline`` (``faultkit.gate.baseline``): per scenario, each figure as
``current → candidate`` (a regression in bold) and the current's run directory; and the
peak throughput (the overload scenario's served rate under its flood), side by side. Cells are
formatted here from the numbers in the file; text is left for the template to escape.
"""

from __future__ import annotations

from typing import Any

from reports.numbers import is_number

__all__ = ["baseline_view", "figure_text"]


def figure_text(figure: str, value: Any) -> str:
    """One scenario figure of the gate's baseline comparison as gate.md and the decision's
    lines show it: seconds to a tenth, lost requests whole, the peak in req/s; a figure
    that has no value was "not reached" (a time) or "not captured" (a count, a rate)."""
    if figure == "lost":
        return str(value) if isinstance(value, int) and not isinstance(value, bool) \
            else "not captured"
    if figure == "peak_rps":
        return f"{value:g} req/s" if is_number(value) else "not captured"
    return f"{value:.1f} s" if is_number(value) else "not reached"


def baseline_view(
    baseline: dict[str, Any] | None, scenarios: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The "against the current config" table: per scenario, each figure as ``current →
    candidate`` (a regression in bold), and the current's run directory; which of the
    current's runs the gate made itself (its peak throughput) and why one it tried to
    make gave nothing."""
    if not baseline:
        return None
    runs: dict[str, Any] = baseline["runs"] if isinstance(baseline.get("runs"), dict) else {}
    regressed = {(r.get("test"), r.get("figure")) for r in baseline.get("regressions") or []
                 if isinstance(r, dict)}

    def cell(test: str, figure: str, current: Any, candidate: Any) -> str:
        text = f"{figure_text(figure, current)} → {figure_text(figure, candidate)}"
        return f"**{text} — regression**" if (test, figure) in regressed else text

    rows = []
    for s in scenarios:
        test = str(s.get("name"))
        base = runs.get(test) if isinstance(runs.get(test), dict) else None
        row: dict[str, Any] = {"test": test, "run": base.get("run_dir") if base else None}
        for figure in ("detection_s", "recovery_s", "lost"):
            row[figure] = (cell(test, figure, base.get(figure), s.get(figure)) if base
                           else "—")
        rows.append(row)
    # the saturation point, where a scenario measured one (the overload's flood)
    peaks = [{"test": str(s.get("name")),
              "cell": cell(str(s.get("name")), "peak_rps", base.get("peak_rps"),
                           s.get("peak_rps"))}
             for s in scenarios
             if isinstance(base := runs.get(str(s.get("name"))), dict)
             and (base.get("peak_rps") is not None or s.get("peak_rps") is not None)]
    tolerances: dict[str, Any] = (baseline["tolerances"]
                                  if isinstance(baseline.get("tolerances"), dict) else {})
    rule = "; ".join(f"{name.removesuffix('_s')} {text}" for name, text in tolerances.items())
    resolution = baseline.get("detection_resolution_s")
    measured_now = [str(t) for t in baseline.get("measured_now") or ()]
    not_measured = baseline.get("not_measured")
    return {"dir": str(baseline.get("dir")), "compared": bool(runs), "rows": rows,
            "measured_now": [{"test": t, "run": (runs.get(t) or {}).get("run_dir")}
                             for t in measured_now],
            "not_measured": ([{"test": str(t), "why": str(why)}
                              for t, why in not_measured.items()]
                             if isinstance(not_measured, dict) else []),
            "peaks": peaks, "rule": f"({rule})" if rule else "",
            "detection_resolution": f"{resolution:g} s" if is_number(resolution) else None}
