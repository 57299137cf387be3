"""Detection to the page, read: Alertmanager's root route and the pager's pages as the
timeline events :func:`slo.paging.page_of` reads (docs/slo.md, "Detection to the page").

One reading for the runner (:mod:`faultkit.experiment.pages`, which emits the events as a
run goes) and the postmortem (:mod:`faultkit.postmortem.pages`, which returns them for an
incident it did not watch); each dates the route's event its own way.

- :func:`route_data`: an ``am_route`` event's data — the Alertmanager, whether a pager
  receives its pages, its root route's timing as it runs now;
- :func:`pager_events`: one ``paged`` event per page naming the node, at the moment the
  pager received it, or one ``pager_down`` event (logged too) when the pager did not
  answer.

Nothing here raises: the route's timing is context for the page, and what could not be
read is an event saying so.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from faultkit.errors import PagerUnavailable
from faultkit.model.events import EventKind
from faultkit.model.records import Event, EventSource
from faultkit.pager import fetch_notifications
from slo.paging import page_events

if TYPE_CHECKING:
    from faultkit.inventory import AlertmanagerSettings, Node
    from slo.alertmanager import Alertmanager

__all__ = ["pager_events", "route_data"]

log = logging.getLogger(__name__)


def route_data(settings: AlertmanagerSettings, alertmanager: Alertmanager) -> dict[str, Any]:
    """An ``am_route`` event's data: ``url``, ``pager`` (a pager receives the pages, so a
    page can be dated) and the root route's timing read from ``alertmanager`` now
    (:meth:`~slo.alertmanager.Alertmanager.route_or_error`: ``{"error": why}`` when it
    could not be read)."""
    return {"url": settings.url, "pager": settings.pager_url is not None,
            **alertmanager.route_or_error()}


def pager_events(settings: AlertmanagerSettings, node: Node, t_from: float, t_to: float, *,
                 source: EventSource, t_down: float | None = None) -> list[Event]:
    """The pages of ``node`` the pager received in [``t_from``, ``t_to``] (epoch seconds),
    one ``paged`` event each (:func:`slo.paging.page_events`); none without a pager in
    ``settings``. A pager that does not answer is logged and is one ``pager_down`` event
    (``detail``: why) from ``source``, at ``t_down`` (default: when it did not answer)."""
    if settings.pager_url is None:
        return []
    try:
        notifications = fetch_notifications(settings.pager_url, t_from, t_to)
    except PagerUnavailable as exc:
        log.warning("%s", exc)
        return [Event(time.time() if t_down is None else t_down, source,
                      EventKind.PAGER_DOWN, node.name, {"detail": str(exc)})]
    return page_events(notifications, node)
