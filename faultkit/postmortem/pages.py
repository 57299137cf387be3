"""Detection to the page for an incident faultkit did not watch: the pager's history.

Alertmanager keeps no history of the alerts it held; the pager (``faultkit pager``, the
receiver the inventory's ``alertmanager.pager_url`` names) keeps every notification it
received. :func:`read_paging` returns the events :func:`slo.paging.page_of` reads, as an
experiment's observer would have put them on its timeline:

- ``am_route`` at the window's start: the root route's timing (``group_wait``, …) as
  Alertmanager runs it *now* — the postmortem cannot read the configuration it ran then —
  marked ``from_history`` (so no finding rests on Alertmanager's state at the time);
- one ``paged`` event per notification naming the node, at the moment the pager received
  it, or ``pager_down`` when the pager did not answer.

Nothing here fails a postmortem: without an Alertmanager in the inventory there are no
events (the report says no Alertmanager was named), and what could not be read is an
event saying so.
"""

from __future__ import annotations

import time

from faultkit.inventory import Inventory, Node
from faultkit.model.events import EventKind
from faultkit.model.records import Event
from slo.alertmanager import Alertmanager
from slo.pager_events import pager_events, route_data

__all__ = ["read_paging"]


def read_paging(inventory: Inventory, node: Node, t_from: float, t_to: float) -> list[Event]:
    """The route and the pages of ``node`` in [``t_from``, ``t_to``] (module docstring)."""
    settings = inventory.alertmanager
    if settings is None:
        return []
    alertmanager = Alertmanager(settings.url)
    try:
        route = route_data(settings, alertmanager)
    finally:
        alertmanager.close()
    return [Event(t_from, "observer", EventKind.AM_ROUTE, node.name,
                  {**route, "from_history": True, "read_at": time.time()}),
            *pager_events(settings, node, t_from, t_to, source="observer", t_down=t_to)]
