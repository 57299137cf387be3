"""slo against a REAL Prometheus (Debian's /usr/bin/prometheus) scraping a node we control.

No Docker: the "node" is a tiny aiohttp server on loopback speaking vLLM's metric names
(`http_requests_total`, `vllm:num_requests_running`, `process_start_time_seconds`),
a `/health` endpoint and `/v1/completions`. The test switches it off at a known moment
while a small load runs and back on later (a restart: its counters start again from 0),
then checks measurement against the truth:

- detection (alert firing) equals the first firing sample Prometheus stored for
  `ALERTS{alertname="FaultkitNodeDown"}` within ±0.5 s; `up == 0` equals the first 0 scrape;
  the probe signal is within 0.5 s of the switch-off;
- recovery is within ±0.5 s of the switch-on (probe every 0.25 s, a request every 50 ms);
- lost requests are exactly the requests invoked while the node was off;
- the server-side count survives the counter reset.

Skipped cleanly when Prometheus is not installed.
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import requests
from aiohttp import web
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.inventory import Inventory, parse_inventory
from faultkit.model.records import Event, RequestRecord
from slo.budget import parse_window
from slo.capture import capture, cross_check
from slo.measure import measure
from slo.observer import Observer
from slo.prom import Prometheus
from slo.rules import render_rules
from slo.traffic import HISTORY_STEP, window_traffic

PROMETHEUS = Path("/usr/bin/prometheus")
pytestmark = pytest.mark.skipif(not PROMETHEUS.exists(), reason="needs /usr/bin/prometheus")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Lab:
    inventory: Inventory
    inventory_path: Path
    prom_url: str
    node_port: int


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("prom")
    node_port, prom_port = free_port(), free_port()
    inv_text = f"""
prometheus:
  url: "http://127.0.0.1:{prom_port}"
  scrape_interval_s: 1
  slo_evaluation_interval_s: 1  # the truth comparison below reads the SLO rules too
slo: {{recovery_hold_s: 3, availability: 0.99}}
nodes:
  - name: fake
    engine: vllm
    base_url: "http://127.0.0.1:{node_port}"
    model: m
    prometheus: {{job: fake}}
"""
    inventory_path = tmp / "inventory.yaml"
    inventory_path.write_text(inv_text)
    inventory = parse_inventory(inv_text, source=str(inventory_path))
    (tmp / "rules.yml").write_text(render_rules(inventory))
    (tmp / "prometheus.yml").write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],
        "scrape_configs": [{"job_name": "fake",
                            "static_configs": [{"targets": [f"127.0.0.1:{node_port}"]}]}],
    }))
    proc = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={tmp / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{prom_port}",
         "--web.enable-lifecycle"],
        stdout=subprocess.DEVNULL, stderr=(tmp / "prometheus.log").open("w"),
    )
    url = f"http://127.0.0.1:{prom_port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(url + "/-/ready", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("Prometheus did not start: " + (tmp / "prometheus.log").read_text())
            time.sleep(0.2)
        yield Lab(inventory, inventory_path, url, node_port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class FakeNode:
    """A switchable vLLM-like server; each start is a new 'process' (counters from 0)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.runner: web.AppRunner | None = None
        self.served = 0
        self.started_at = 0.0
        #: the prompt of every request this node answered, over all its starts: the node's
        #: own record of who was served (the truth the lost count is compared with)
        self.answered: set[str] = set()

    async def _completions(self, request: web.Request) -> web.Response:
        self.served += 1
        self.answered.add(str((await request.json()).get("prompt")))
        return web.json_response({"choices": [{"text": "hi", "finish_reason": "stop"}]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _metrics(self, request: web.Request) -> web.Response:
        lines = [
            "# TYPE http_requests_total counter",
            f'http_requests_total{{handler="/v1/completions",method="POST",status="2xx"}} '
            f"{self.served}",
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="m"} 0',
            "# TYPE process_start_time_seconds gauge",
            f"process_start_time_seconds {self.started_at}",
        ]
        return web.Response(text="\n".join(lines) + "\n")

    async def start(self) -> None:
        self.served, self.started_at = 0, time.time()
        app = web.Application()
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


@dataclass
class Load:
    """One request every ``every_s``, each on a fresh connection; a RequestRecord per request."""

    url: str
    every_s: float = 0.05
    records: list[RequestRecord] = field(default_factory=list)

    async def one(self, session: aiohttp.ClientSession, i: int) -> None:
        t0 = time.time()
        status, cls, http = "ok", None, None
        try:
            async with session.post(self.url, json={"prompt": str(i)}) as response:
                http = response.status
                await response.read()
                if response.status != 200:
                    status, cls = "fail", "http_5xx"
        except aiohttp.ClientConnectorError as exc:
            status = "fail"
            cls = "refused" if exc.os_error.errno == errno.ECONNREFUSED else "other"
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            status, cls = "fail", "reset"
        except TimeoutError:
            status, cls = "fail", "timeout_total"
        self.records.append(RequestRecord(id=str(i), node="fake", kind="completion",
                                          t_invoke=t0, status=status,  # type: ignore[arg-type]
                                          t_end=time.time(), http_status=http, error_class=cls))

    async def run(self, stop: asyncio.Event) -> None:
        connector = aiohttp.TCPConnector(force_close=True)
        timeout = aiohttp.ClientTimeout(total=2)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            tasks, i = [], 0
            while not stop.is_set():
                tasks.append(asyncio.create_task(self.one(session, i)))
                i += 1
                await asyncio.sleep(self.every_s)
            await asyncio.gather(*tasks)


class Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, obj: Event) -> None:
        self.events.append(obj)


async def wait_for(predicate: Callable[[], bool], within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not await asyncio.to_thread(predicate):
        if time.monotonic() > deadline:
            pytest.fail("condition not met in time")
        await asyncio.sleep(0.2)


async def test_outage_measured_against_truth(lab: Lab) -> None:
    node_cfg = lab.inventory.nodes[0]
    node = FakeNode(lab.node_port)
    prom = Prometheus(lab.prom_url)
    await node.start()
    try:
        # Prometheus scrapes the node and has no NodeDown alert left from start-up
        await wait_for(lambda: prom.query_value('up{job="fake"}') == 1.0
                       and not [a for a in prom.alerts() if a.name == "FaultkitNodeDown"])
        groups = prom.rules()
        assert groups, "the generated rules file was not loaded"
        assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups

        sink, stop = Sink(), asyncio.Event()
        load = Load(f"http://127.0.0.1:{lab.node_port}/v1/completions")
        t_start = time.time()
        async with Observer(node_cfg, prom, sink, interval_s=0.25):
            load_task = asyncio.create_task(load.run(stop))
            await asyncio.sleep(3)
            sink.write(Event(time.time(), "fault", "inject_start", "fake"))
            t_off = time.time()
            await node.stop()
            t_closed = time.time()
            sink.write(Event(t_closed, "fault", "inject_end", "fake"))
            await asyncio.sleep(4.5)
            sink.write(Event(time.time(), "fault", "revert_start", "fake"))
            await node.start()
            t_on = time.time()
            sink.write(Event(t_on, "fault", "revert_end", "fake"))
            await asyncio.sleep(5)
            stop.set()
            await load_task
        await asyncio.sleep(1.5)  # one more scrape after the load stopped
        t_end = time.time()

        timeline = sorted(sink.events, key=lambda e: e.t)
        m = measure(load.records, timeline, "fake", recovery_hold_s=3, t_window_end=t_end)

        # --- detection: the alert, as Prometheus itself recorded it
        fired = prom.query_samples('ALERTS{alertname="FaultkitNodeDown",alertstate="firing"}[60s]')
        t_fire_truth = min(t for s in fired for t, _ in s.values if t >= t_off)
        (up_series,) = prom.query_samples('up{job="fake"}[60s]')
        t_up0_truth = min(t for t, v in up_series.values if t >= t_off and v == 0)
        assert m.t_detect is not None and m.t_recovered is not None
        assert m.detection_s is not None
        print(f"detection {m.detection_s:.3f} s ({m.detect_signal}); alert err "
              f"{m.t_detect - t_fire_truth:+.3f} s; by signal {m.detection_by_signal_s}; "
              f"recovery err {m.t_recovered - t_on:+.3f} s; lost {m.lost_total}")
        assert m.detect_signal == "alert"
        assert m.t_detect == pytest.approx(t_fire_truth, abs=0.5)
        assert m.detection_by_signal_s["up"] + m.t_effect == pytest.approx(t_up0_truth, abs=0.5)
        assert 0 <= m.detection_by_signal_s["probe"] + m.t_effect - t_off <= 0.5
        assert 0 < m.detection_s < 3.5  # 1 s scrape + 1 s evaluation + polling

        # --- recovery: the node came back at t_on
        assert m.t_recovered == pytest.approx(t_on, abs=0.5)
        assert m.recovery_after_revert_s == pytest.approx(0.0, abs=0.5)

        # --- lost: exactly the requests the node never answered (its own record). The stop
        # can only have reached a request that was still open when it began and was sent
        # before the node was back; one sent once the listener had closed was refused, while
        # one in flight as stop() closed it may instead have had its connection reset (the
        # client's own record says which)
        unanswered = [r for r in load.records if r.id not in node.answered]
        failed = [r for r in load.records if r.status != "ok"]
        assert len(unanswered) > 50
        assert all(r.t_end >= t_off and r.t_invoke < t_on for r in unanswered)
        assert all(r.error_class == "refused" for r in unanswered if r.t_invoke >= t_closed)
        assert m.lost_total == len(failed) == len(unanswered)
        assert m.lost_by_class == dict(Counter(r.error_class for r in unanswered))
        assert m.clean_rejections == 0

        # --- server-side cross-check survives the restart's counter reset
        check = cross_check(prom, node_cfg, load.records, t_start, t_end)
        served_after_restart = sum(1 for r in load.records if r.status == "ok"
                                   and r.t_invoke >= t_on)
        assert check["server_requests"] > served_after_restart  # both sides of the reset
        # only requests served between the last scrape and the switch-off go unseen
        assert 0 <= check["difference"] <= 25

        # --- the budget's denominator: the requests the server counted over its window,
        # against its own record (less those served between its last scrape and the
        # switch-off, as above; plus increase()'s extrapolation to the window's ends, at
        # most a scrape interval's share at each), over the history Prometheus holds (the
        # node was scraped before the load began; stated to within HISTORY_STEP)
        traffic = window_traffic(prom, node_cfg, "1h", t_end)
        assert traffic.missing is None and traffic.requests is not None
        assert len(node.answered) - 25 <= traffic.requests <= 1.1 * len(node.answered) + 1
        assert traffic.history_s is not None
        assert t_end - traffic.history_s <= t_start + parse_window(HISTORY_STEP)

        # --- captured series for prometheus.json
        captured = capture(prom, node_cfg, t_start, t_end, step=0.5, timeline=timeline)
        names = {s.name for s in captured.series}
        assert {"up", "requests_rate", "restarts", "alerts"} <= names
        assert any(a["alertname"] == "FaultkitNodeDown" and a["state"] == "firing"
                   for a in captured.alerts)
        written = json.loads(json.dumps(captured.to_json()))  # what prometheus.json holds
        assert type(captured).from_json(written) == captured
    finally:
        await node.stop()
        prom.close()


def test_budget_cli_json_and_prometheus_down(lab: Lab, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "budget.json"
    result = runner.invoke(cli, ["budget", "--inventory", str(lab.inventory_path),
                                 "--window", "1h", "--json", str(out),
                                 "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert set(data) >= {"generated_at", "window", "prometheus", "nodes", "chaos_runs"}
    (node,) = data["nodes"]
    assert node["node"] == "fake"
    slo = next(s for s in node["slos"] if s["slo"] == "availability")
    assert set(slo) >= {"slo", "objective", "sli", "budget_total", "budget_spent_fraction",
                        "budget_remaining_fraction", "burn_rates", "thresholds",
                        "alerts_firing_now", "note"}
    assert slo["thresholds"] == {"1h": 14.4, "6h": 6, "1d": 3, "3d": 1}
    assert "fake" in result.output
    assert "availability" in result.output

    dead = runner.invoke(cli, ["budget", "--inventory", str(lab.inventory_path),
                               "--prometheus", f"http://127.0.0.1:{free_port()}"])
    assert dead.exit_code != 0
    assert "Prometheus unreachable" in dead.output
