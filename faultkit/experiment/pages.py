"""Detection to the page: the run's Alertmanager and pager, when the inventory names them
(docs/slo.md, "Detection to the page").

:func:`watch_alertmanager` gives the observer its Alertmanager and notes the root route's
timing as the run starts (``am_route``); :func:`collect_pages` puts each page the pager
received during the run that names the node on the timeline (``paged``, at its arrival).
:func:`slo.paging.page_of` reads both. Neither ever fails a run: paging is judged only
where an objective asks for it, and missing evidence says so there.
"""

from __future__ import annotations

from faultkit.experiment.state import ExperimentState
from faultkit.model.events import EventKind
from slo.alertmanager import Alertmanager
from slo.pager_events import pager_events, route_data

__all__ = ["collect_pages", "watch_alertmanager"]


def watch_alertmanager(state: ExperimentState) -> Alertmanager | None:
    """The inventory's Alertmanager for the observer (``None``: none named), its root
    route's timing noted on the timeline — or why it could not be read."""
    settings = state.inventory.alertmanager
    if settings is None:
        return None
    alertmanager = Alertmanager(settings.url)
    state.note(EventKind.AM_ROUTE, **route_data(settings, alertmanager))
    return alertmanager


def collect_pages(state: ExperimentState, t_from: float, t_to: float) -> None:
    """Each page the pager received in [``t_from``, ``t_to``] naming the node, on the
    timeline at the moment it arrived (one ``paged`` event per notification, with the
    notification as Alertmanager sent it), or a ``pager_down`` note when the pager does
    not answer (:func:`slo.pager_events.pager_events`)."""
    settings = state.inventory.alertmanager
    if settings is None:
        return
    for event in pager_events(settings, state.node, t_from, t_to, source="harness"):
        state.emit(event)
