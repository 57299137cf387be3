"""Why a run cannot be judged: the evidence gaps :func:`slo.measure.measure` turns into an
INCONCLUSIVE measurement (docs/definitions.md, "Missing evidence").

- :func:`evidence_gaps` — what the harness noted as missing, the effect's own gaps,
  Prometheus unreachable or restarted (with its span), and :func:`client_gaps`: a client
  that stalled or ran out of resources (a steady-state window's gaps too);
- :func:`sent_late` / :func:`late_gap` — requests the client sent late across an edge of
  the outage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from faultkit.model.events import EventKind
from faultkit.model.records import CLIENT_SIDE, LATE_CLIENT_S, Event, RequestRecord
from faultkit.model.timestamps import utc_clock
from slo.effect import Effect

__all__ = ["CLIENT_STALL", "client_gaps", "evidence_gaps", "harness_stalled", "is_client_stall",
           "late_gap", "sent_late"]

#: how every gap of a stalled load client begins: the client could not vouch for what it
#: saw, for the node or against it (a run INCONCLUSIVE for this says nothing of the node)
CLIENT_STALL = "the load client's event loop stalled"

#: error classes that mean the *client* failed, not the node (shed arrivals are lost to
#: users, but only exhaustion makes the run unjudgeable)
_CLIENT_EXHAUSTION = CLIENT_SIDE - {"shed_client"}


def evidence_gaps(
    timeline: Sequence[Event], requests: Sequence[RequestRecord], node: str, effect: Effect,
    outage: tuple[float, float] | None = None,
) -> list[str]:
    """Why the run cannot be judged (empty: the evidence is complete).

    ``outage`` is the span in which the fault held the node in one state, from its effect
    to its first edge after (the revert or the recovery): a timeout the stalled client
    could not vouch for whose whole life — its user's arrival to the moment the client
    noticed — lies inside it met what its user would have met, so it is no gap."""
    gaps = [str(e.data.get("reason")) for e in timeline
            if e.kind == EventKind.EVIDENCE_GAP and e.node in (None, node)]
    gaps.extend(effect.gaps)
    down = [e for e in timeline if e.kind == EventKind.PROMETHEUS_DOWN and e.node == node]
    if down:
        gaps.append(f"Prometheus was unreachable during the run ({down[0].data.get('detail')})"
                    f"{_prometheus_gap(timeline, node, down[0])}: monitoring could not be "
                    "observed")
    gaps.extend(client_gaps(requests, outage))
    return list(dict.fromkeys(gaps))


def client_gaps(
    requests: Sequence[RequestRecord], outage: tuple[float, float] | None = None,
) -> list[str]:
    """What the load client could not vouch for (empty: nothing): requests that timed out
    while its event loop stalled, and requests it could not send for want of resources
    (shed arrivals are lost users, not a gap). Each makes a run, or a steady-state window,
    INCONCLUSIVE. A stalled timeout whose whole life lies inside ``outage`` (see
    :func:`evidence_gaps`) met what its user would have met: no gap."""
    gaps: list[str] = []
    stalled = [r for r in requests if r.error_class == "client_stalled"
               and not (outage and outage[0] <= r.arrival and r.t_end < outage[1])]
    if stalled:
        gaps.append(f"{CLIENT_STALL}: {len(stalled)} requests timed out "
                    f"while it could not act on time ({stalled[0].error_detail}); the node "
                    "cannot be judged on them")
    exhausted = [r for r in requests if r.error_class in _CLIENT_EXHAUSTION - {"client_stalled"}]
    if exhausted:
        gaps.append(f"the load client ran out of resources ({len(exhausted)} requests "
                    f"{exhausted[0].error_class}: {exhausted[0].error_detail}); the node "
                    "cannot be judged on them")
    return gaps


def is_client_stall(reason: str) -> bool:
    """Whether an evidence gap is the load client's stall (:func:`client_gaps`,
    :func:`late_gap`), not missing evidence of the node."""
    return reason.startswith(CLIENT_STALL)


def harness_stalled(measurement: Mapping[str, Any]) -> bool:
    """Whether an INCONCLUSIVE run's missing evidence is the load client's own stall, read
    from its measurement.json: requests lost to it (``lost_by_class`` ``client_stalled``),
    requests it sent late across an outage edge (``sent_late``), or a missing-evidence
    reason that is its stall (:func:`is_client_stall`). Such a run says nothing of the
    node, for or against, and may be run again (docs/definitions.md)."""
    lost = measurement.get("lost_by_class")
    reasons = measurement.get("inconclusive")
    late = measurement.get("sent_late")
    return ((isinstance(lost, Mapping) and (lost.get("client_stalled") or 0) > 0)
            or (isinstance(late, int | float) and late > 0)
            # a run the node served through counts no loss: its stall is only named
            or (isinstance(reasons, list)
                and any(isinstance(r, str) and is_client_stall(r) for r in reasons)))


def sent_late(
    requests: Sequence[RequestRecord], edges: Sequence[float | None]
) -> list[RequestRecord]:
    """The requests the client sent ``LATE_CLIENT_S`` or more after their user arrived *and*
    across an edge of the outage (an ``edges`` moment — the fault's effect, its revert,
    the recovery — between the arrival and the send): their fate is the node's after the
    edge, the user's was before it, and the moments they stamped cannot date the edge. A
    request sent late on the same side of every edge met what its user would have met
    (a starved harness during an outage still sees the outage), so it is no gap."""
    moments = [m for m in edges if m is not None]
    return [r for r in requests if r.lateness_s >= LATE_CLIENT_S
            and any(r.arrival < m <= r.t_invoke for m in moments)]


def late_gap(late: Sequence[RequestRecord]) -> list[str]:
    """The evidence gap of requests sent late in the judged span (none: no gap)."""
    if not late:
        return []
    worst = max(late, key=lambda r: r.lateness_s)
    return [f"{CLIENT_STALL}: {len(late)} requests were sent "
            f"{LATE_CLIENT_S:g} s or more after their users arrived, across an edge of the "
            f"outage (the latest {worst.lateness_s:.2f} s late, arriving at "
            f"{utc_clock(worst.arrival)}); what their users would have met cannot be told "
            "from what the late sends met, for the node or against it"]


def _prometheus_gap(timeline: Sequence[Event], node: str, down: Event) -> str:
    """The span of the first Prometheus outage, from its last answer (``since``) to the
    next ``prometheus_up`` (or the end of the window), as ``, from … to … (N s)``."""
    since = down.data.get("since")
    if not isinstance(since, int | float):
        return ""
    back = next((e.t for e in timeline if e.kind == EventKind.PROMETHEUS_UP
                 and e.node == node and e.t >= down.t), None)
    if back is None:
        return f", from {utc_clock(since)} to the end of the window"
    return f", from {utc_clock(since)} to {utc_clock(back)} ({back - since:.1f} s)"


# --------------------------------------------------------------------------- measure
