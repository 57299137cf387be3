"""Measurement against ground truth: kill a simulated node under load and compare what
``slo.measure`` says with what the node itself recorded (its truth file) and Docker saw.

The simulator logs every request it accepted and finished by the client's request id
(``X-Request-Id`` = ledger id) and the moment it was ready again, so recovery time and the
lost-request count can be checked exactly, not just plausibly.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from faultkit._docker import DockerHost
from faultkit.faults import make_fault
from faultkit.inventory import Inventory
from faultkit.load import BackgroundLoad, LoadProfile
from faultkit.records import Event
from slo.measure import measure
from slo.observer import Observer
from slo.prom import Prometheus
from testbed.paths import state_dir

pytestmark = pytest.mark.docker

NODE = "sim-sglang"


class Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, obj: Event) -> None:
        self.events.append(obj)


def truth_since(path: Path, t0: float) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, filter(None, lines)) if e["t"] >= t0]


async def test_kill_measurement_matches_ground_truth(
    lab_inventory: Inventory, tmp_path: Path
) -> None:
    node = lab_inventory.node(NODE)
    assert node.docker is not None
    truth_file = state_dir(f"sim/{NODE}") / "truth.jsonl"
    sink = Sink()
    t0 = time.time()
    profile = LoadProfile(
        rate=25.0,
        concurrency=32,
        input_tokens=16,
        output_tokens=24,
        connect_timeout_s=2.0,
        first_token_timeout_s=10.0,
        total_timeout_s=20.0,
    )
    prom = Prometheus(lab_inventory.prometheus.url)
    async with (
        Observer(node, prom, sink, interval_s=0.25),
        BackgroundLoad(node, profile, ledger_path=tmp_path / "ledger.jsonl") as load,
    ):
        await asyncio.sleep(3)
        async with make_fault("kill", node, inventory=lab_inventory, timeline=sink.write):
            pass  # revert waits until the restart policy brought it back
        await asyncio.sleep(8)
    records = load.records
    m = measure(records, sink.events, NODE, recovery_hold_s=2.0)
    truth = truth_since(truth_file, t0)
    died = [
        e
        for e in DockerHost(node.docker.host).events(node.docker.container, t0, time.time())
        if e.get("Action") == "die"
    ]
    assert died, "Docker saw no death"
    t_die = int(died[0]["timeNano"]) / 1e9
    ready = [e["t"] for e in truth if e["event"] == "ready" and e["t"] > t_die]
    assert ready, f"the simulator never recorded 'ready' after the kill: {truth[-5:]}"

    # detection: the signal came after the death and within one probe/scrape cycle of it
    assert m.t_detect is not None and m.detect_signal is not None
    assert t_die - 0.5 <= m.t_detect <= t_die + 1.5, (m.detect_signal, m.t_detect - t_die)

    # recovery: the first healthy moment is the moment the simulator says it was ready
    assert m.t_recovered is not None
    assert abs(m.t_recovered - ready[0]) <= 0.5, m.t_recovered - ready[0]

    # lost requests, exactly: by DESIGN.md's definition (invoked in [inject, recovered] or in
    # flight at inject, not ok) — and checked against the server's own record: no request
    # it finished is lost, and every request it accepted but never finished is lost
    t_from = min(e.t for e in sink.events if e.kind == "inject_start")
    lost_ids = {
        r.id
        for r in records
        if r.status != "ok"
        and (t_from <= r.t_invoke <= m.t_recovered or r.t_invoke < t_from < r.t_end)
    }
    finished = {e["id"] for e in truth if e["event"] == "request_finished"}
    accepted = {e["id"] for e in truth if e["event"] == "request_accepted"}
    ours = {r.id for r in records if r.t_invoke <= m.t_recovered}
    assert not lost_ids & finished, "a request the server finished was counted lost"
    cut_off = (accepted - finished) & ours
    assert cut_off <= lost_ids, f"cut off by the kill but not counted lost: {cut_off - lost_ids}"
    assert m.lost_total == len(lost_ids)
    assert m.lost_total > 0
    assert sum(m.lost_by_class.values()) == m.lost_total
