"""A postmortem's page (:func:`faultkit.postmortem.pages.read_paging`): the route read from
Alertmanager now, marked as history, and each notification the pager kept that names the
node — or, when the pager does not answer, an event saying so; nothing without an
Alertmanager in the inventory. Against loopback fakes of Alertmanager's ``/api/v2/status``
and the pager's ``/notifications`` (the shapes ``slo.alertmanager`` and ``faultkit.pager``
read)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from faultkit.inventory import parse_inventory
from faultkit.model.events import EventKind
from faultkit.postmortem.pages import read_paging
from tests.unit.json_server import JsonServer

ROUTE = "route: {receiver: pager, group_wait: 2s, group_interval: 1m}\nreceivers: [{name: pager}]\n"
FIRING = {"receiver": "pager", "groupKey": "g", "status": "firing", "alerts": [
    {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": "n"}}]}
OTHER = {"receiver": "pager", "groupKey": "h", "status": "firing", "alerts": [
    {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": "m"}}]}


class Fakes:
    """Alertmanager and the pager on one loopback port; ``asked`` holds each pager query."""

    def __init__(self) -> None:
        self.notifications = [{"t_received": 105.0, "payload": FIRING},
                              {"t_received": 106.0, "payload": OTHER}]
        self.asked: list[dict[str, list[str]]] = []
        self.server = JsonServer(self.route)
        self.url = self.server.url

    def route(self, path: str, query: dict[str, list[str]]) -> Any:
        if path == "/api/v2/status":
            return {"config": {"original": ROUTE}}
        if path == "/notifications":
            self.asked.append(query)
            return self.notifications
        return None


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    served = Fakes()
    with served.server:
        yield served


def _inventory(alertmanager: str) -> Any:
    return parse_inventory(f"""
{alertmanager}
nodes: [{{name: n, engine: vllm, base_url: "http://127.0.0.1:9", model: m, prometheus: {{job: n}}}}]
""")


def test_the_route_and_the_pages_naming_the_node(fakes: Fakes) -> None:
    inv = _inventory(f"alertmanager: {{url: '{fakes.url}', pager_url: '{fakes.url}'}}")
    events = read_paging(inv, inv.node("n"), 100.0, 200.0)
    route, page = events
    assert route.kind == EventKind.AM_ROUTE and route.t == 100.0
    assert route.data["from_history"] is True and route.data["pager"] is True
    assert route.data["group_wait_s"] == 2.0 and route.data["url"] == fakes.url
    assert (page.kind, page.t, page.node, page.data["status"]) == (
        EventKind.PAGED, 105.0, "n", "firing")
    [asked] = fakes.asked
    assert float(asked["since"][0]) == 100.0 and float(asked["until"][0]) == 200.0


def test_a_pager_that_does_not_answer_is_an_event_not_a_failure(fakes: Fakes) -> None:
    inv = _inventory(f"alertmanager: {{url: '{fakes.url}', pager_url: 'http://127.0.0.1:9'}}")
    route, down = read_paging(inv, inv.node("n"), 100.0, 200.0)
    assert route.kind == EventKind.AM_ROUTE
    assert down.kind == EventKind.PAGER_DOWN and down.t == 200.0 and down.data["detail"]


def test_no_pager_the_route_only_and_no_alertmanager_nothing(fakes: Fakes) -> None:
    inv = _inventory(f"alertmanager: {{url: '{fakes.url}'}}")
    [route] = read_paging(inv, inv.node("n"), 100.0, 200.0)
    assert route.data["pager"] is False and fakes.asked == []
    unreachable = _inventory("alertmanager: {url: 'http://127.0.0.1:9'}")
    [route] = read_paging(unreachable, unreachable.node("n"), 100.0, 200.0)
    assert "error" in route.data
    bare = _inventory("")
    assert read_paging(bare, bare.node("n"), 100.0, 200.0) == []
