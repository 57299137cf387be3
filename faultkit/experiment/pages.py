"""Detection to the page: the run's Alertmanager and pager, when the inventory names them
(docs/slo.md, "Detection to the page").

:func:`watch_alertmanager` gives the observer its Alertmanager and notes the root route's
timing as the run starts (``am_route``); :func:`collect_pages` puts each page the pager
received during the run that names the node on the timeline (``paged``, at its arrival).
:func:`slo.paging.page_of` reads both. Neither ever fails a run: paging is judged only
where an objective asks for it, and missing evidence says so there.
"""

from __future__ import annotations

import logging

from faultkit.errors import PagerUnavailable
from faultkit.experiment.state import ExperimentState
from faultkit.model.events import EventKind
from faultkit.pager import fetch_notifications
from slo.alertmanager import Alertmanager
from slo.paging import page_events

__all__ = ["collect_pages", "watch_alertmanager"]

log = logging.getLogger(__name__)


def watch_alertmanager(state: ExperimentState) -> Alertmanager | None:
    """The inventory's Alertmanager for the observer (``None``: none named), its root
    route's timing noted on the timeline — or why it could not be read."""
    settings = state.inventory.alertmanager
    if settings is None:
        return None
    alertmanager = Alertmanager(settings.url)
    state.note(EventKind.AM_ROUTE, url=settings.url, pager=settings.pager_url is not None,
               **alertmanager.route_or_error())
    return alertmanager


def collect_pages(state: ExperimentState, t_from: float, t_to: float) -> None:
    """Each page the pager received in [``t_from``, ``t_to``] naming the node, on the
    timeline at the moment it arrived (one ``paged`` event per notification, with the
    notification as Alertmanager sent it)."""
    settings = state.inventory.alertmanager
    if settings is None or settings.pager_url is None:
        return
    try:
        notifications = fetch_notifications(settings.pager_url, t_from, t_to)
    except PagerUnavailable as exc:
        log.warning("%s", exc)
        state.note(EventKind.PAGER_DOWN, detail=str(exc))
        return
    for event in page_events(notifications, state.node):
        state.emit(event)
