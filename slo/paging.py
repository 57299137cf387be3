"""Detection to the page: what happened between an alert firing and a person being paged
(docs/definitions.md, "Detection to the page").

An operator is detected-for when they are paged, not when Prometheus fires: Alertmanager's
``group_wait`` and grouping, its silences and inhibitions, sit between the two. From the
timeline — Alertmanager's state of the node's alerts as the observer saw it (``am_alert``),
the root route's timing (``am_route``) and each page the pager received (``paged``) — this
module dates the stages after firing and says, as a finding, when no one was paged and why.
Pure functions; times are epoch seconds, durations count from ``t_effect``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from faultkit.model.events import EventKind
from faultkit.model.records import Event
from slo.carried import carried_over_alerts
from slo.labels import names_node

if TYPE_CHECKING:  # the pager's module serves pages too (aiohttp): not imported to read them
    from faultkit.inventory import Node
    from faultkit.pager import Notification

__all__ = ["Paging", "page_events", "page_of"]

#: beyond a route's wait, what a page may take: Prometheus sending on its next evaluation,
#: Alertmanager's own tick, delivery
ROUTE_SLACK_S = 2.0
#: an alert Alertmanager started before the fault by more than this is an older one's
#: (Prometheus stamps the scrape under way at the fault a little before it)
STARTED_BEFORE_S = 5.0


@dataclass(frozen=True, slots=True)
class Paging:
    """The stages from firing to the page, and what stopped a page that never came.

    - ``received_s``: the node's alert first seen in Alertmanager (active or suppressed);
    - ``page_s``: the first page naming the node reached the pager (``after_firing_s`` from
      the alert firing: group_wait, grouping and delivery);
    - ``suppressed_by``: the silences or inhibiting alerts that held it back;
    - ``finding``: detected, but no one was paged — and why; ``None`` when paged or when
      nothing was detected to page about.
    """

    alertmanager: str
    #: a pager receives this Alertmanager's pages, so a page can be dated
    pager: bool
    route: dict[str, Any] = field(default_factory=dict)
    t_received: float | None = None
    received_s: float | None = None
    t_paged: float | None = None
    page_s: float | None = None
    after_firing_s: float | None = None
    alertname: str | None = None
    receiver: str | None = None
    suppressed_by: list[str] = field(default_factory=list)
    finding: str | None = None

    @property
    def group_wait_s(self) -> float | None:
        value = self.route.get("group_wait_s")
        return float(value) if isinstance(value, int | float) else None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Paging | None:
        if not isinstance(data, Mapping):
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def page_events(notifications: Sequence[Notification], node: Node) -> list[Event]:
    """One ``paged`` event per notification that names ``node`` (its first alert that
    does, :func:`slo.labels.names_node`), at the moment the pager received it, with the
    notification as Alertmanager sent it — what :func:`page_of` reads, for an experiment
    and for a postmortem alike."""
    out: list[Event] = []
    for notification in notifications:
        payload = notification.payload
        alert = next((a for a in payload.get("alerts") or () if isinstance(a, dict)
                      and names_node(a.get("labels") or {}, node)), None)
        if alert is None:
            continue
        out.append(Event(
            t=notification.t_received, source="observer", kind=EventKind.PAGED,
            node=node.name,
            data={"status": alert.get("status"),
                  "alertname": (alert.get("labels") or {}).get("alertname"),
                  "receiver": payload.get("receiver"), "group_key": payload.get("groupKey"),
                  "payload": payload},
        ))
    return out


def _ours(event: Event, node: str, t_effect: float) -> bool:
    started = event.data.get("starts_at")
    return (event.node == node and event.t >= t_effect
            and (not isinstance(started, int | float) or started >= t_effect - STARTED_BEFORE_S))


def page_of(timeline: Sequence[Event], node: str, t_effect: float,
            t_detect: float | None, t_end: float, t_acting: float | None = None
            ) -> Paging | None:
    """The paging stages of ``node``'s fault; ``None`` when no Alertmanager watched it.

    An alert already active before the harness acted (``t_acting``;
    :func:`slo.carried.carried_over_alerts`) pages for what held before the fault:
    neither Alertmanager holding it nor its page is this fault's."""
    route_event = next((e for e in timeline if e.kind == EventKind.AM_ROUTE
                        and e.node == node), None)
    if route_event is None:
        return None
    url = str(route_event.data.get("url", ""))
    pager = bool(route_event.data.get("pager"))
    route = {k: v for k, v in route_event.data.items() if k not in ("url", "pager")}
    carried = carried_over_alerts(timeline, node, t_effect, t_acting)

    def fault_s(e: Event) -> bool:
        return not any(c.holds(e.data.get("alertname"), e.t) for c in carried)

    seen = [e for e in timeline if e.kind == EventKind.AM_ALERT and _ours(e, node, t_effect)
            and fault_s(e)]
    received = next((e for e in seen if e.data.get("state") in ("active", "suppressed")), None)
    suppressed = [e for e in seen if e.data.get("state") == "suppressed"]
    held_by = list(dict.fromkeys(
        [*(str(s) for e in suppressed for s in e.data.get("silenced_by") or ()),
         *(f"inhibited by alert {a}" for e in suppressed for a in e.data.get("inhibited_by")
           or ())]))
    pages = [e for e in timeline if e.kind == EventKind.PAGED and e.node == node
             and e.t >= t_effect and e.data.get("status") == "firing" and fault_s(e)]
    page = pages[0] if pages else None
    paging = Paging(
        alertmanager=url, pager=pager, route=route,
        t_received=received.t if received else None,
        received_s=received.t - t_effect if received else None,
        t_paged=page.t if page else None,
        page_s=page.t - t_effect if page else None,
        after_firing_s=(page.t - t_detect) if page and t_detect is not None else None,
        alertname=str(page.data.get("alertname") if page else
                      received.data.get("alertname") if received else "") or None,
        receiver=str(page.data.get("receiver")) if page else None,
        suppressed_by=held_by,
    )
    if page is not None or t_detect is None:
        return paging
    ours = [e for e in timeline if fault_s(e)]
    return dataclasses.replace(paging, finding=_why_no_page(paging, ours, node,
                                                            t_detect, t_end))


def _why_no_page(paging: Paging, timeline: Sequence[Event], node: str, t_detect: float,
                 t_end: float) -> str:
    """Detected, but no page: the first reason the evidence shows (``timeline``: the
    fault's own, without the alerts carried over into the run)."""
    mine = [e for e in timeline if e.node == node and e.source == "observer"
            and e.t >= t_detect - STARTED_BEFORE_S]
    if not any(e.kind == EventKind.ALERT_FIRING for e in mine):
        pending = next((e for e in mine if e.kind == EventKind.ALERT_PENDING), None)
        if pending is not None:
            for_s = pending.data.get("for_s")
            for_text = f" ({for_s:g} s)" if isinstance(for_s, int | float) else ""
            return (f"no alert fired, so no one was paged: {pending.data.get('alertname')} "
                    f"went pending, but what it watched ended before its for:{for_text} "
                    "elapsed")
        return "no alert fired, so no one was paged (detection rests on up == 0 alone)"
    if paging.suppressed_by:
        return ("detected, but no one was paged: Alertmanager suppressed the alert "
                f"({'; '.join(paging.suppressed_by)})")
    down = next((e for e in timeline if e.kind == EventKind.ALERTMANAGER_DOWN
                 and e.node == node and e.t <= t_end), None)
    # a postmortem reads the pager's history, not Alertmanager's state as it was: that
    # Alertmanager never held the alert cannot be told from it
    if paging.t_received is None and not paging.route.get("from_history"):
        if down is not None:
            return ("detected, but no one was paged: Alertmanager did not answer "
                    f"({down.data.get('detail')})")
        return ("detected, but Alertmanager never held the alert: check that Prometheus "
                "sends to it (alerting.alertmanagers in prometheus.yml)")
    pager_down = next((e for e in timeline if e.kind == EventKind.PAGER_DOWN
                       and e.node == node), None)
    if pager_down is not None:
        held_it = ("" if paging.t_received is None else
                   f"Alertmanager held the alert ({paging.t_received - t_detect:+.1f} s from "
                   "firing), but ")
        return (f"{held_it}the pager did not answer ({pager_down.data.get('detail')}): "
                "whether a page went out cannot be told")
    if not paging.pager:
        holds_it = ("" if paging.t_received is None else
                    "Alertmanager holds the alert (active), but ")
        return (f"{holds_it}no pager receives its pages: when the page went out cannot be told "
                "(alertmanager.pager_url)")
    wait = paging.group_wait_s
    interval = paging.route.get("group_interval_s")
    waited = t_end - t_detect
    # the resolution of the alert that fired, after it fired: an earlier alert resolving
    # just before the fault (a previous run's) is not this one's
    fired = next(e for e in mine if e.kind == EventKind.ALERT_FIRING)
    name = fired.data.get("alertname")
    resolved = next((e for e in mine if e.kind == EventKind.ALERT_RESOLVED and e.t >= t_detect
                     and (name is None or e.data.get("alertname") == name)), None)
    held = max((x for x in (wait, interval) if isinstance(x, int | float)), default=None)
    if resolved is not None and held is not None and resolved.t < t_detect + held:
        timing = ", ".join(f"{name} {value:g} s" for name, value in
                           (("group_wait", wait), ("group_interval", interval))
                           if isinstance(value, int | float))
        return (f"no page: the alert resolved {resolved.t - t_detect:.1f} s after it fired, "
                f"before Alertmanager's route sent it ({timing}): an alert shorter than the "
                "route's wait pages no one")
    if wait is not None and waited < wait:
        return (f"no page within the window: it ended {waited:.1f} s after the alert fired, "
                f"inside the route's group_wait ({wait:g} s)")
    if isinstance(interval, int | float) and waited < interval + ROUTE_SLACK_S:
        return (f"no page within the window: it ended {waited:.1f} s after the alert fired; "
                "an alert joining a group Alertmanager already holds (the same alert paged "
                f"shortly before) waits for the group's next group_interval ({interval:g} s)")
    return (f"detected, but no page reached the pager within the window ({waited:.1f} s "
            "after the alert fired): check the route's receiver and the pager")
