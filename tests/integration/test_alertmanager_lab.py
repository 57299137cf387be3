"""The lab's paging path against REAL processes: Prometheus → Alertmanager → faultkit pager.

No Docker and nothing of the shared lab: a private Prometheus (Debian's binary, the
testbed's own scrape config with its ``alerting:`` block and the rules of
``slo.rules.render_rules``), and :func:`testbed.alertmanager.ensure_alertmanager` starting
Alertmanager and the pager, all on free loopback ports under a temporary
``$FAULTKIT_HOME``. The nodes are small aiohttp servers on loopback (``/metrics`` with
vLLM's names, ``/health``), one per case, switched off at a moment the test records.

- A node switched off pages: the pager receives a ``firing`` notification naming
  ``FaultkitNodeDown`` for that node, ``group_wait`` or more after the switch-off, and no
  later than the bound stated in the test.
- A node silenced through Alertmanager's API v2 before its outage does not page, and
  Alertmanager shows its alert ``suppressed`` by that silence.

Skipped when prometheus, prometheus-alertmanager or amtool is not installed.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiohttp import web

from faultkit.inventory import Inventory, parse_inventory
from faultkit.model.durations import parse_duration
from faultkit.pager import Notification, fetch_notifications
from slo.rules import render_rules
from testbed.alertmanager import GROUP_WAIT, ensure_alertmanager, stop_alertmanager
from testbed.prometheus import scrape_config
from testbed.scratch import free_port
from tests.unit.slo_helpers import required_binary

BINARIES = ("prometheus", "prometheus-alertmanager", "amtool")


@pytest.fixture(autouse=True)
def _binaries() -> None:
    """Debian's binaries, required where CI installs them (never a green skip there)."""
    for name in BINARIES:
        required_binary(name, "prometheus" if name == "prometheus"
                        else "prometheus-alertmanager")

SCRAPE_S = 1.0  # the inventory's scrape_interval_s, which is also the node alerts' evaluation
GROUP_WAIT_S = parse_duration(GROUP_WAIT)
#: The latest a page may arrive after the switch-off: the next scrape fails within one
#: scrape interval, the evaluation that sees it comes within one evaluation interval (each
#: counted twice: a scrape or evaluation that had just begun when the node went away
#: misses it), then Alertmanager holds the new group for group_wait; 3 s of slack for
#: delivery and a busy machine.
PAGE_BOUND_S = GROUP_WAIT_S + 2 * SCRAPE_S + 2 * SCRAPE_S + 3.0


class FakeNode:
    """A node that answers scrapes with vLLM's metric names until :meth:`stop`, served by
    an event loop of its own in a thread (the tests themselves are synchronous)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.started_at = time.time()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._runner: web.AppRunner | None = None
        self._call(self._start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=(
            "# TYPE http_requests_total counter\n"
            'http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 0\n'
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="m"} 0\n'
            "# TYPE process_start_time_seconds gauge\n"
            f"process_start_time_seconds {self.started_at}\n"))

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def stop(self) -> None:
        """Close the listener (scrapes are refused from then on) and the connections."""
        self._call(self._stop())

    def close(self) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


@dataclass
class Lab:
    inventory: Inventory
    home: Path
    prom_url: str
    am_url: str
    pager_url: str
    nodes: dict[str, FakeNode]

    def logs(self) -> str:
        """The tails of Alertmanager's and the pager's logs, for a failure's message."""
        out = []
        for name in ("alertmanager.log", "pager.log"):
            path = self.home / "state" / "alertmanager" / name
            text = path.read_text(errors="replace") if path.exists() else "(none)"
            out.append(f"--- {name}\n" + "\n".join(text.splitlines()[-15:]))
        return "\n".join(out)


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout_s:.0f} s")
        time.sleep(0.1)


def query(prom_url: str, expr: str) -> list[dict[str, Any]]:
    data = httpx.get(f"{prom_url}/api/v1/query", params={"query": expr}, timeout=5).json()
    result: list[dict[str, Any]] = data["data"]["result"]
    return result


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("am-lab")
    prom_port, am_port, pager_port = free_port(), free_port(), free_port()
    ports = {"paged": free_port(), "silenced": free_port()}
    nodes_yaml = "".join(f"""
  - name: {name}
    engine: vllm
    base_url: "http://127.0.0.1:{port}"
    model: m
    prometheus: {{job: {name}}}
""" for name, port in ports.items())
    text = f"""
prometheus: {{url: "http://127.0.0.1:{prom_port}", scrape_interval_s: {SCRAPE_S:g}}}
alertmanager:
  url: "http://127.0.0.1:{am_port}"
  pager_url: "http://127.0.0.1:{pager_port}"
nodes:{nodes_yaml}"""
    inventory = parse_inventory(text, source=str(tmp / "inventory.yaml"))
    prom_dir = tmp / "prometheus"
    prom_dir.mkdir()
    (prom_dir / "prometheus.yml").write_text(
        yaml.safe_dump(scrape_config(inventory), sort_keys=False))
    (prom_dir / "rules.yml").write_text(render_rules(inventory))
    home = tmp / "home"
    nodes: dict[str, FakeNode] = {}
    proc: subprocess.Popen[bytes] | None = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAULTKIT_HOME", str(home))
        try:
            for name, port in ports.items():
                nodes[name] = FakeNode(port)
            progress: list[str] = []
            assert ensure_alertmanager(inventory, progress.append) == f"http://127.0.0.1:{am_port}"
            assert [line.split(" on ")[0] for line in progress] == [
                "starting the pager", "starting Alertmanager"]
            prom_log = (prom_dir / "prometheus.log").open("wb")
            proc = subprocess.Popen(
                ["prometheus", f"--config.file={prom_dir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={prom_dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                stdout=subprocess.DEVNULL, stderr=prom_log, stdin=subprocess.DEVNULL)
            prom_log.close()
            prom_url = f"http://127.0.0.1:{prom_port}"
            lab = Lab(inventory, home, prom_url, f"http://127.0.0.1:{am_port}",
                      f"http://127.0.0.1:{pager_port}", nodes)

            def scraped_and_wired() -> bool:
                try:
                    up = query(prom_url, "up == 1")
                    ams = httpx.get(f"{prom_url}/api/v1/alertmanagers", timeout=2).json()
                except (httpx.HTTPError, ValueError):
                    return False
                active = ams["data"]["activeAlertmanagers"]
                return ({r["metric"]["job"] for r in up} == set(ports)
                        and [a["url"] for a in active] == [f"{lab.am_url}/api/v2/alerts"])

            wait_for("Prometheus scraping both nodes and sending to the Alertmanager",
                     scraped_and_wired, 30)
            yield lab
        finally:
            stopped = stop_alertmanager()
            if proc is not None:
                proc.terminate()
                proc.wait(10)
            for node in nodes.values():
                node.close()
    assert sorted(stopped) == ["Alertmanager", "the pager"]


def pages_for(lab: Lab, node: str, since: float) -> list[Notification]:
    """The firing notifications received since ``since`` whose alerts name ``node``."""
    return [n for n in fetch_notifications(lab.pager_url, since, time.time() + 60)
            if n.status == "firing" and node in n.label_values("node")]


def test_a_node_that_stops_pages_after_group_wait(lab: Lab) -> None:
    t_stopped = time.time()  # taken before the listener closes: the outage's first moment
    lab.nodes["paged"].stop()
    deadline = t_stopped + PAGE_BOUND_S + 5  # look a little past the bound, to report it
    pages: list[Notification] = []
    while not pages and time.time() < deadline:
        pages = pages_for(lab, "paged", t_stopped)
        time.sleep(0.1)
    assert pages, f"no page for node 'paged' within {deadline - t_stopped:.0f} s\n{lab.logs()}"
    page = pages[0]
    down = [a for a in page.alerts if a["labels"].get("alertname") == "FaultkitNodeDown"]
    assert down, f"the first page is not FaultkitNodeDown: {page.payload}"
    assert down[0]["labels"]["node"] == "paged" and down[0]["status"] == "firing"
    assert page.receiver == "faultkit-pager"
    assert page.payload["groupLabels"] == {"alertname": "FaultkitNodeDown", "node": "paged"}
    delay = page.t_received - t_stopped
    print(f"\npage delay: t_received - t_stopped = {delay:.3f} s "
          f"(group_wait {GROUP_WAIT_S:g} s, bound {PAGE_BOUND_S:g} s)")
    assert GROUP_WAIT_S <= delay <= PAGE_BOUND_S, (delay, lab.logs())


def test_a_silenced_node_does_not_page_and_its_alert_is_suppressed(lab: Lab) -> None:
    now = datetime.now(UTC)
    silence = {
        "matchers": [{"name": "node", "value": "silenced", "isRegex": False,
                      "isEqual": True}],
        "startsAt": now.isoformat(timespec="milliseconds"),
        "endsAt": (now + timedelta(minutes=10)).isoformat(timespec="milliseconds"),
        "createdBy": "faultkit tests",
        "comment": "test_alertmanager_lab: a planned outage must not page",
    }
    response = httpx.post(f"{lab.am_url}/api/v2/silences", json=silence, timeout=5)
    assert response.status_code == 200, response.text
    silence_id = response.json()["silenceID"]
    t_stopped = time.time()
    lab.nodes["silenced"].stop()
    watch_until = t_stopped + GROUP_WAIT_S + 8

    def down_alert() -> dict[str, Any] | None:
        alerts = httpx.get(f"{lab.am_url}/api/v2/alerts", timeout=5).json()
        return next((a for a in alerts if a["labels"].get("node") == "silenced"
                     and a["labels"].get("alertname") == "FaultkitNodeDown"), None)

    while time.time() < watch_until:  # a page would be due group_wait after the alert
        assert pages_for(lab, "silenced", t_stopped) == [], lab.logs()
        time.sleep(0.25)
    assert pages_for(lab, "silenced", t_stopped) == [], lab.logs()
    alert = down_alert()
    assert alert is not None, f"Alertmanager never received the alert\n{lab.logs()}"
    assert alert["status"]["state"] == "suppressed", alert
    assert alert["status"]["silencedBy"] == [silence_id], alert
