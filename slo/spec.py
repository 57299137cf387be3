"""SLO specs: what a node is judged against, built from ``faultkit.inventory.SLOSettings``.

Two kinds of objective:

- **Ratio SLOs** evaluated from Prometheus over a window (for rules and the budget
  review): ``availability`` (server error ratio), ``ttft`` and ``itl`` (bucket-ratio form:
  the fraction of observations above the threshold bucket, *not* ``histogram_quantile``,
  which interpolates). Their PromQL gives the **error ratio** over a window written
  ``$window``; ``objective`` is the good fraction (0.99 → budget 0.01).
- **Run objectives** judged from one measurement: detection time, recovery time, max
  lost requests, client-side error ratio and TTFT (see ``slo.checks``).

Per-node overrides come from ``Inventory.slo_for(node)`` (inventory defaults merged with
the node's ``slo:`` mapping).

SLI weighting: **occurrences** (good events / valid events over the window, as OpenSLO
*Occurrences* and Pyrra), not Sloth's time-average of 5-minute ratios. Where an engine has
no request counters (llama.cpp) availability falls back to the fraction of successful
scrapes (``avg_over_time(up[…])``), a *time-based* SLI — ``weighting`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from faultkit.inventory import Node, SLOSettings
from slo.profiles import NodeQueries

Weighting = Literal["occurrences", "time"]


@dataclass(frozen=True, slots=True)
class RatioSLO:
    """A good/valid objective over a window, expressed as an error-ratio PromQL template."""

    name: str  # "availability" | "ttft" | "itl"
    node: str
    objective: float  # good fraction, e.g. 0.99
    error_ratio_template: str  # PromQL with "$window" for the range, e.g. "5m"
    description: str
    weighting: Weighting = "occurrences"
    note: str = ""

    @property
    def budget(self) -> float:
        """Error budget as a fraction of valid events (1 − objective)."""
        return 1.0 - self.objective

    def error_ratio(self, window: str) -> str:
        """PromQL for the error ratio over ``window`` (a Prometheus duration, e.g. "1h")."""
        return self.error_ratio_template.replace("$window", window)


def ratio_slos(node: Node, settings: SLOSettings) -> list[RatioSLO]:
    """The node's Prometheus-evaluable SLOs (empty when the node is not scraped)."""
    q = NodeQueries.for_node(node)
    if q is None:
        return []
    p = q.profile
    out: list[RatioSLO] = []
    w = "$window"
    if p.requests_total is not None and p.errors_total is not None:
        errors, total = q.rate(p.errors_total, w), q.rate(p.requests_total, w)
        out.append(
            RatioSLO(
                "availability", node.name, settings.availability,
                f"({errors} or vector(0)) / {total}",
                f"{settings.availability:.2%} of requests answered without a server error",
            )
        )
    else:
        out.append(
            RatioSLO(
                "availability", node.name, settings.availability,
                f"1 - avg(avg_over_time({q.up()}[{w}]))",
                f"{settings.availability:.2%} of scrapes succeed (node up)",
                weighting="time",
                note=f"{p.engine} exposes no request counters: availability is the "
                "fraction of successful scrapes (time-based), not of requests",
            )
        )
    ttft = q.bucket_ratio_bad(p.ttft_hist, settings.ttft_s, w)
    if ttft is not None:
        out.append(
            RatioSLO(
                "ttft", node.name, settings.ttft_target, ttft,
                f"{settings.ttft_target:.0%} of requests get a first token within "
                f"{settings.ttft_s:g} s",
            )
        )
    itl = q.bucket_ratio_bad(p.itl_hist, settings.itl_s, w)
    if itl is not None:
        out.append(
            RatioSLO(
                "itl", node.name, settings.itl_target, itl,
                f"{settings.itl_target:.0%} of inter-token gaps within {settings.itl_s:g} s",
            )
        )
    return out

