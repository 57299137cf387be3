"""Key figures of an incident, each carrying the file and field it came from.

Every figure is either a value read from the run directory (``source`` names the file and
field) or, when ``derived`` is true, an arithmetic expression over such values whose
inputs are written out in ``value`` (``"12 / 300 = 4 %"``), so a reader can check it.
Nothing here estimates or fills in: a missing input gives "not captured".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reports.load import RunData

NOT_CAPTURED = "not captured"


@dataclass(frozen=True, slots=True)
class Figure:
    label: str
    value: str
    source: str
    derived: bool = False


def num(value: float | int, digits: int = 1) -> str:
    """Format a number the way reports show it: ints as is, floats to ``digits`` decimals."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pct(fraction: float) -> str:
    """A fraction as a percentage with three significant figures (``0.0123`` → ``1.23 %``)."""
    return f"{fraction * 100:.3g} %"


def _slo(data: RunData) -> dict[str, Any]:
    slo = data.run.get("slo")
    return slo if isinstance(slo, dict) else {}


def budget_figure(data: RunData) -> Figure:
    """SLO error budget spent = lost / ((1 − availability) × requests expected in the window).

    The requests expected in the SLO window come from run.json ``slo_window_requests``
    (written by whoever knows the node's traffic, e.g. from Prometheus). Without it the
    budget cannot be computed honestly, and the figure shows the share of this scenario's
    own requests that were lost instead, saying so.
    """
    m = data.measurement
    label = "SLO budget spent"
    if m is None:
        return Figure(label, NOT_CAPTURED, "measurement.json missing")
    slo = _slo(data)
    availability = slo.get("availability")
    expected = data.run.get("slo_window_requests")
    if (
        isinstance(availability, int | float)
        and 0 < availability < 1
        and isinstance(expected, int | float)
        and expected > 0
    ):
        budget = (1 - availability) * expected
        return Figure(
            label,
            f"{m.lost_total} / ((1 − {availability}) × {num(expected)}) = "
            f"{pct(m.lost_total / budget)}",
            "measurement.json lost_total; run.json slo.availability, slo_window_requests",
            derived=True,
        )
    if m.requests_total > 0:
        return Figure(
            "Share of this scenario's requests lost",
            f"{m.lost_total} / {m.requests_total} = {pct(m.lost_total / m.requests_total)}",
            "measurement.json lost_total, requests_total (SLO budget not computable: the "
            "requests expected in the SLO window are not recorded in run.json)",
            derived=True,
        )
    return Figure(label, "not computable (no requests recorded)", "measurement.json")


def key_figures(data: RunData) -> list[Figure]:
    """The header's key figures, in display order."""
    m = data.measurement
    figs: list[Figure] = []
    if m is None:
        return [Figure("Measurement", NOT_CAPTURED, "measurement.json missing or unreadable")]
    if m.detection_s is not None:
        detail = f" ({m.detect_detail})" if m.detect_detail else ""
        figs.append(
            Figure(
                "Detection time",
                f"{num(m.detection_s, 2)} s via {m.detect_signal}{detail}",
                "measurement.json detection_s, detect_signal, detect_detail",
            )
        )
    else:
        figs.append(
            Figure(
                "Detection time",
                "not detected within the observation window",
                "measurement.json t_detect = null",
            )
        )
    by_signal = {k: v for k, v in m.detection_by_signal_s.items() if isinstance(v, int | float)}
    if by_signal:
        figs.append(
            Figure(
                "Detection by signal",
                ", ".join(f"{k} {num(v, 2)} s" for k, v in sorted(by_signal.items())),
                "measurement.json detection_by_signal_s",
            )
        )
    if m.recovery_s is not None:
        figs.append(
            Figure(
                "Recovery time (from injection)",
                f"{num(m.recovery_s, 2)} s",
                "measurement.json recovery_s",
            )
        )
    else:
        figs.append(
            Figure(
                "Recovery time (from injection)",
                "not recovered by the end of the observation window",
                "measurement.json t_recovered = null",
            )
        )
    if m.recovery_after_revert_s is not None:
        figs.append(
            Figure(
                "Recovery time (from revert)",
                f"{num(m.recovery_after_revert_s, 2)} s",
                "measurement.json recovery_after_revert_s",
            )
        )
    elif m.t_revert is None:
        figs.append(
            Figure(
                "Recovery time (from revert)",
                "fault not reverted",
                "measurement.json t_revert = null",
            )
        )
    else:
        figs.append(
            Figure(
                "Recovery time (from revert)",
                "not recovered",
                "measurement.json recovery_after_revert_s = null",
            )
        )
    by_class = ", ".join(f"{k} {v}" for k, v in sorted(m.lost_by_class.items())) or "none"
    figs.append(
        Figure(
            "Lost requests",
            f"{m.lost_total} ({by_class})",
            "measurement.json lost_total, lost_by_class",
        )
    )
    figs.append(
        Figure(
            "Clean rejections (counted in lost)",
            str(m.clean_rejections),
            "measurement.json clean_rejections",
        )
    )
    figs.append(
        Figure(
            "In flight at injection",
            str(m.in_flight_at_effect),
            "measurement.json in_flight_at_effect",
        )
    )
    figs.append(
        Figure("Requests in the run", str(m.requests_total), "measurement.json requests_total")
    )
    figs.append(budget_figure(data))
    return figs
