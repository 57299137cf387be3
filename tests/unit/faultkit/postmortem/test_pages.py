"""A postmortem's page (:func:`faultkit.postmortem.pages.read_paging`): the route read from
Alertmanager now, marked as history, and each notification the pager kept that names the
node — or, when the pager does not answer, an event saying so; nothing without an
Alertmanager in the inventory. Against loopback fakes of Alertmanager's ``/api/v2/status``
and the pager's ``/notifications`` (the shapes ``slo.alertmanager`` and ``faultkit.pager``
read)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from faultkit.model.events import EventKind
from faultkit.postmortem.pages import read_paging
from tests.unit.paging_fakes import PagingFakes, inventory_with


@pytest.fixture
def fakes() -> Iterator[PagingFakes]:
    served = PagingFakes()
    with served.server:
        yield served


def test_the_route_and_the_pages_naming_the_node(fakes: PagingFakes) -> None:
    inv = inventory_with(f"alertmanager: {{url: '{fakes.url}', pager_url: '{fakes.url}'}}")
    events = read_paging(inv, inv.node("n"), 100.0, 200.0)
    route, page = events
    assert route.kind == EventKind.AM_ROUTE and route.t == 100.0
    assert route.data["from_history"] is True and route.data["pager"] is True
    assert route.data["group_wait_s"] == 2.0 and route.data["url"] == fakes.url
    assert (page.kind, page.t, page.node, page.data["status"]) == (
        EventKind.PAGED, 105.0, "n", "firing")
    [asked] = fakes.asked
    assert float(asked["since"][0]) == 100.0 and float(asked["until"][0]) == 200.0


def test_a_pager_that_does_not_answer_is_an_event_not_a_failure(fakes: PagingFakes) -> None:
    inv = inventory_with(f"alertmanager: {{url: '{fakes.url}', pager_url: 'http://127.0.0.1:9'}}")
    route, down = read_paging(inv, inv.node("n"), 100.0, 200.0)
    assert route.kind == EventKind.AM_ROUTE
    assert down.kind == EventKind.PAGER_DOWN and down.t == 200.0 and down.data["detail"]


def test_no_pager_the_route_only_and_no_alertmanager_nothing(fakes: PagingFakes) -> None:
    inv = inventory_with(f"alertmanager: {{url: '{fakes.url}'}}")
    [route] = read_paging(inv, inv.node("n"), 100.0, 200.0)
    assert route.data["pager"] is False and fakes.asked == []
    unreachable = inventory_with("alertmanager: {url: 'http://127.0.0.1:9'}")
    [route] = read_paging(unreachable, unreachable.node("n"), 100.0, 200.0)
    assert "error" in route.data
    bare = inventory_with("")
    assert read_paging(bare, bare.node("n"), 100.0, 200.0) == []
