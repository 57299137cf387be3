"""Alerts carried over into a run: the node's alerts that were already active before the
fault took effect (docs/definitions.md, "Detection").

What such an alert shows held before the fault — the last run's errors still inside a
``rate()`` window, a node already down — so neither its firing (:mod:`slo.detection`) nor
the page it sends (:mod:`slo.paging`) is this fault's. Pure functions over the observer's
timeline events; times are epoch seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from faultkit.model.events import EventKind
from faultkit.model.records import Event

__all__ = ["CarriedOver", "carried_over_alerts"]


@dataclass(frozen=True, slots=True)
class CarriedOver:
    """An alert of the node whose condition held before the fault: the instance Prometheus
    made active at ``active_at`` (before ``t_effect``), active until ``until``."""

    name: str
    active_at: float
    until: float = math.inf

    def holds(self, name: object, t: float) -> bool:
        """Whether an alert named ``name`` at ``t`` is still this instance."""
        return name == self.name and self.active_at <= t < self.until

    def instance(self, event: Event) -> bool:
        """Whether ``event`` (pending, firing) is this instance."""
        return (event.data.get("alertname") == self.name
                and event.data.get("activeAt") == self.active_at)


def carried_over_alerts(timeline: Sequence[Event], node: str, t_from: float,
                        t_acting: float | None) -> list[CarriedOver]:
    """The node's alerts that were already active (pending or firing) before the fault:
    Prometheus made them active before ``t_from``, and the observer saw them before the
    harness acted (``t_acting``). Without an act (a postmortem: its ``t_effect`` is
    already the earliest evidence) nothing is carried over.

    What such an alert shows held before the fault — the last run's errors still inside a
    ``rate()`` window, a node already down — so neither its firing nor the page it sends
    is this fault's detection (docs/definitions.md, "Detection"). An instance Prometheus
    made active a little before ``t_from`` but first shown after the harness acted is the
    evaluation under way at the fault: it is this fault's.
    """
    if t_acting is None:
        return []
    first_seen: dict[tuple[str, float], float] = {}
    for e in timeline:
        active_at = e.data.get("activeAt")
        if (e.source == "observer" and e.node == node
                and e.kind in (EventKind.ALERT_PENDING, EventKind.ALERT_FIRING)
                and isinstance(active_at, int | float) and active_at < t_from):
            key = (str(e.data.get("alertname")), float(active_at))
            first_seen[key] = min(first_seen.get(key, e.t), e.t)
    out = []
    for (name, active_at), seen in first_seen.items():
        if seen >= t_acting:
            continue
        until = min((e.t for e in timeline if e.source == "observer" and e.node == node
                     and e.kind == EventKind.ALERT_RESOLVED and e.t >= seen
                     and e.data.get("alertname") == name), default=math.inf)
        out.append(CarriedOver(name, active_at, until))
    return out
