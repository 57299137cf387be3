"""The lab's generation probe (testbed/blackbox.py): one one-token module per engine node,
the config the real exporter accepts, the scrape job that ties each probe to its node — and
the real exporter, asking a real simulator for a token, failing with no answer at all
(status 0) while the simulator's engine core is SIGSTOPped by the test, and passing again
after its SIGCONT."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from faultkit.constants import GENERATE_PROBE_JOB
from faultkit.inventory import load_inventory, parse_inventory
from testbed.blackbox import PROBE_TIMEOUT_S, blackbox_config, module_name, scrape_job
from testbed.paths import INVENTORY
from testbed.procs import start_ready, stop_by_pid_file
from testbed.prometheus import scrape_config
from tests.unit.simnode_helpers import running_node
from tests.unit.slo_helpers import promtool, required_binary

EXPORTER = "prometheus-blackbox-exporter"


@pytest.fixture
def exporter() -> str:
    return required_binary(EXPORTER, EXPORTER)


def test_every_engine_node_of_the_lab_is_asked_for_one_token_and_the_gateway_is_not() -> None:
    inventory = load_inventory(INVENTORY)
    modules: dict[str, Any] = blackbox_config(inventory)["modules"]  # type: ignore[assignment]
    engines = [n for n in inventory.nodes if n.kind == "engine"]
    assert sorted(modules) == sorted(f"generate-{n.name}" for n in engines)
    assert all(n.kind != "engine" for n in inventory.nodes
               if f"generate-{n.name}" not in modules)
    vllm = modules["generate-vllm"]["http"]
    assert vllm["method"] == "POST"
    body = yaml.safe_load(vllm["body"])
    assert body == {"model": inventory.node("vllm").model, "prompt": "ping", "max_tokens": 1}


def test_the_scrape_job_labels_each_probe_with_its_node() -> None:
    inventory = load_inventory(INVENTORY)
    job = scrape_job(inventory)
    assert job is not None and job["job_name"] == GENERATE_PROBE_JOB
    static_configs = job["static_configs"]
    assert isinstance(static_configs, list)
    labels = {t["labels"]["node"]: t["labels"]["__param_module"] for t in static_configs}
    assert labels["sim-vllm"] == "generate-sim-vllm"
    assert "gateway" not in labels
    jobs = [j["job_name"] for j in scrape_config(inventory)["scrape_configs"]]  # type: ignore[attr-defined]
    assert GENERATE_PROBE_JOB in jobs


def test_no_engine_node_no_probe() -> None:
    inventory = parse_inventory("""
nodes:
  - {name: g, engine: litellm, kind: gateway, base_url: "http://127.0.0.1:4000", model: m,
     prometheus: {job: g}, upstreams: [v]}
  - {name: v, engine: vllm, base_url: "http://127.0.0.1:8000", model: m}
""", source="inv.yaml")
    assert scrape_job(inventory) is None
    assert blackbox_config(inventory) == {"modules": {}}


def test_the_exporter_and_promtool_accept_the_configs(exporter: str, tmp_path: Path) -> None:
    inventory = load_inventory(INVENTORY)
    (tmp_path / "blackbox.yml").write_text(yaml.safe_dump(blackbox_config(inventory)))
    checked = subprocess.run([exporter, f"--config.file={tmp_path / 'blackbox.yml'}",
                              "--config.check"], capture_output=True, text=True, timeout=30,
                             check=False)
    assert checked.returncode == 0, checked.stderr
    prometheus = {**scrape_config(inventory), "rule_files": []}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prometheus))
    checked = subprocess.run([promtool(), "check", "config", str(tmp_path / "prometheus.yml")],
                             capture_output=True, text=True, timeout=30, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _probe(url: str, target: str, module: str) -> dict[str, float]:
    text = httpx.get(f"{url}/probe", params={"target": target, "module": module},
                     timeout=PROBE_TIMEOUT_S + 5).text
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
            if line.startswith(("probe_success", "probe_http_status_code"))}


async def test_a_stalled_engine_fails_the_probe_with_no_answer(
        exporter: str, tmp_path: Path) -> None:
    async with running_node(tmp_path, speed=50.0) as sim:
        inventory = parse_inventory(f"""
nodes:
  - {{name: s, engine: sim, personality: vllm, base_url: "{sim.url}", model: sim-model,
     prometheus: {{job: s}}}}
""", source="inv.yaml")
        node = inventory.node("s")
        config = tmp_path / "blackbox.yml"
        config.write_text(yaml.safe_dump(blackbox_config(inventory)))
        url = f"http://127.0.0.1:{_free_port()}"
        pid_file = tmp_path / "blackbox.pid"
        start_ready([exporter, f"--config.file={config}",
                     f"--web.listen-address={url.removeprefix('http://')}"],
                    what="the exporter", url=url, log=tmp_path / "blackbox.log",
                    pid_file=pid_file, timeout_s=20)
        target = f"{sim.url}/v1/completions"
        engine = sim.node.engine
        assert engine is not None and engine.core is not None and engine.core.pid
        try:
            ok = await asyncio.to_thread(_probe, url, target, module_name(node))
            assert ok == {"probe_success": 1.0, "probe_http_status_code": 200.0}
            os.kill(engine.core.pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(0.1)  # the simulated engine steps a beat or two on
                t0 = time.monotonic()
                stalled = await asyncio.to_thread(_probe, url, target, module_name(node))
                waited = time.monotonic() - t0
            finally:
                os.kill(engine.core.pid, signal.SIGCONT)
            # the API accepted the request and never answered: no status, a timeout
            assert stalled == {"probe_success": 0.0, "probe_http_status_code": 0.0}
            assert waited >= PROBE_TIMEOUT_S - 0.5
            await asyncio.sleep(0.2)
            again = await asyncio.to_thread(_probe, url, target, module_name(node))
            assert again["probe_success"] == 1.0
        finally:
            stop_by_pid_file(pid_file, str(config).encode())
