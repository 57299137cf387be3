"""Which incidents of a postmortem's nodes overlapped: a gateway's outage beside its
upstreams', or any nodes asked about together. Pure.

An incident spans from its start's earlier side (the last good scrape; the first failed
one when the window began inside it) to its end's later side (the first good scrape of the
stretch that held; the window's end while it was still failing): the widest the bounds
allow, so two outages that may have overlapped are named together, and the reader sees
both reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from faultkit.postmortem.model import Incident, Related

__all__ = ["NodeIncidents", "outage_span", "related_incidents"]


@dataclass(frozen=True, slots=True)
class NodeIncidents:
    """One node's incidents in the window and each one's run directory, in order."""

    incidents: Sequence[Incident]
    runs: Sequence[str]
    t_to: float


def outage_span(incident: Incident, t_to: float) -> tuple[float, float]:
    """The widest ``(start, end)`` the incident's bounds allow (module docstring); ``t_to``
    is the window's end."""
    start = incident.start.after if incident.start.after is not None else incident.start.by
    end = _end_by(incident)
    return (start if start is not None else t_to), (t_to if end is None else end)


def _end_by(incident: Incident) -> float | None:
    """The end's later side (the first good scrape of the stretch that held); ``None``
    while the incident was still failing at the window's end."""
    return None if incident.end is None else incident.end.by


def related_incidents(by_node: Mapping[str, NodeIncidents]) -> dict[str, tuple[Related, ...]]:
    """For each node, every other node's incident whose span overlaps one of its own."""
    out: dict[str, tuple[Related, ...]] = {}
    for name, mine in by_node.items():
        found: list[Related] = []
        for i, incident in enumerate(mine.incidents, 1):
            start, end = outage_span(incident, mine.t_to)
            for other_name, theirs in by_node.items():
                if other_name == name:
                    continue
                for j, other in enumerate(theirs.incidents, 1):
                    o_start, o_end = outage_span(other, theirs.t_to)
                    if o_start <= end and start <= o_end:
                        found.append(Related(i, other_name, j, o_start, _end_by(other),
                                             theirs.runs[j - 1] if j <= len(theirs.runs)
                                             else ""))
        out[name] = tuple(found)
    return out
