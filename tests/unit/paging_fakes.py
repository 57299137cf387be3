"""Alertmanager and the pager for the paging-evidence tests: loopback fakes of
Alertmanager's ``/api/v2/status`` and the pager's ``/notifications`` on one port (the shapes
``slo.alertmanager`` and ``faultkit.pager`` read), and an inventory naming them."""

from __future__ import annotations

from typing import Any

from faultkit.inventory import Inventory, parse_inventory
from tests.unit.json_server import JsonServer

ROUTE = "route: {receiver: pager, group_wait: 2s, group_interval: 1m}\nreceivers: [{name: pager}]\n"
FIRING = {"receiver": "pager", "groupKey": "g", "status": "firing", "alerts": [
    {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": "n"}}]}
OTHER = {"receiver": "pager", "groupKey": "h", "status": "firing", "alerts": [
    {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": "m"}}]}
#: nothing listens there
CLOSED = "http://127.0.0.1:9"


class PagingFakes:
    """Alertmanager and the pager on one loopback port: the pager received a page naming
    node ``n`` at 105 and one naming ``m`` at 106; ``asked`` holds each pager query."""

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


def inventory_with(alertmanager: str) -> Inventory:
    """An inventory of node ``n`` (vLLM, job ``n``) with the ``alertmanager:`` line given
    (empty: none)."""
    return parse_inventory(f"""
{alertmanager}
nodes: [{{name: n, engine: vllm, base_url: "http://127.0.0.1:9", model: m, prometheus: {{job: n}}}}]
""")
