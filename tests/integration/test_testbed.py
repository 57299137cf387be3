"""The testbed is real: a real llama-server streams, real Prometheus scrapes, Docker restarts."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import httpx
import pytest

from faultkit.docker.host import DockerHost
from faultkit.inventory import Inventory, Node
from testbed.lab import Lab

pytestmark = pytest.mark.docker


def _llama(inventory: Inventory) -> Node:
    return inventory.node("llama")


def _query(url: str, promql: str) -> list[dict[str, object]]:
    body = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=5).json()
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def _stream_chat(node: Node, max_tokens: int = 12) -> tuple[list[dict[str, object]], bool]:
    """Stream one chat completion; return the JSON chunks and whether [DONE] arrived."""
    chunks: list[dict[str, object]] = []
    done = False
    payload = {
        "model": node.model,
        "messages": [{"role": "user", "content": "say something"}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    with httpx.stream(
        "POST", f"{node.base_url}/v1/chat/completions", json=payload, timeout=30
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line.removeprefix("data: ")
            if data == "[DONE]":
                done = True
                break
            chunks.append(json.loads(data))
    return chunks, done


def test_llama_streams_a_chat_completion_to_done(lab_inventory: Inventory) -> None:
    chunks, done = _stream_chat(_llama(lab_inventory))
    assert done, "stream ended without [DONE]"
    content = "".join(
        (c["choices"][0].get("delta") or {}).get("content") or ""  # type: ignore[index]
        for c in chunks
        if c.get("choices")
    )
    assert content, "no content chunks"
    assert any(c["choices"] and c["choices"][0].get("finish_reason") for c in chunks)  # type: ignore[index]


def test_prometheus_scrapes_llama_and_its_metrics(lab_inventory: Inventory) -> None:
    url = lab_inventory.prometheus.url
    node = _llama(lab_inventory)
    assert node.prometheus is not None
    _stream_chat(node)  # make sure counters moved
    up = _query(url, f'up{{job="{node.prometheus.job}"}}')
    assert up and up[0]["value"][1] == "1"  # type: ignore[index]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        series = _query(url, f'llamacpp:tokens_predicted_total{{job="{node.prometheus.job}"}}')
        if series and float(series[0]["value"][1]) > 0:  # type: ignore[index]
            break
        time.sleep(0.5)
    else:
        pytest.fail("llamacpp:tokens_predicted_total never rose above 0 in Prometheus")


def test_rules_are_loaded_and_healthy(lab_inventory: Inventory) -> None:
    body = httpx.get(f"{lab_inventory.prometheus.url}/api/v1/rules", timeout=5).json()
    rules = [r for g in body["data"]["groups"] for r in g["rules"]]
    assert any(r["name"] == "FaultkitNodeDown" for r in rules)
    assert all(r["health"] == "ok" for r in rules if "health" in r)


def test_sigkill_of_main_process_is_restarted_by_docker(lab: Lab, lab_inventory: Inventory) -> None:
    import asyncio

    from faultkit.probes.health import wait_ready

    node = _llama(lab_inventory)
    assert node.docker is not None
    host = DockerHost(node.docker.host)
    before = host.state(node.docker.container)
    os.kill(host.host_pid(node.docker.container), signal.SIGKILL)
    deadline = time.monotonic() + 30
    after = before
    while time.monotonic() < deadline:
        after = host.state(node.docker.container)
        if after.restart_count == before.restart_count + 1 and after.running:
            break
        time.sleep(0.2)
    assert after.restart_count == before.restart_count + 1, after
    asyncio.run(wait_ready(node, timeout_s=30))
    _, done = _stream_chat(node)
    assert done
    # Prometheus sees it too: a scrape begun after it was ready again succeeds. This also
    # leaves the lab as the next test expects it (a scrape during the restart reads 'down').
    lab.wait_scraped([node], after=time.time())


def test_status_reports_ready_and_scraped(lab: Lab) -> None:
    rows = {r.name: r for r in lab.status()}
    for name in ("llama", "gateway"):
        assert rows[name].ready == "ready", rows[name]
        assert rows[name].target == "up", rows[name]
        assert rows[name].state == "running", rows[name]


def test_the_gateway_routes_to_its_three_upstreams_by_container_name(
    lab_inventory: Inventory,
) -> None:
    """faultkit-gateway (LiteLLM) reaches llama, sim-vllm and sim-sglang on faultkit-lab;
    x-litellm-model-id names the upstream node that answered."""
    gateway = lab_inventory.node("gateway")
    seen: set[str] = set()
    for _ in range(30):
        r = httpx.post(
            f"{gateway.base_url}/v1/chat/completions",
            json={"model": gateway.model, "max_tokens": 4,
                  "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert r.status_code == 200, r.text[:300]
        seen.add(r.headers["x-litellm-model-id"])
        if seen == set(gateway.upstreams):
            break
    assert seen == set(gateway.upstreams), seen
    assert httpx.get(f"{gateway.base_url}/health/liveliness", timeout=5).status_code == 200


def test_the_gateway_runs_with_its_configs_cpu_weight(lab_inventory: Inventory) -> None:
    """Docker's own record of the gateway container carries the serving config's
    ``cpu_shares`` (the lab's CI plan rests on it: docs/ci.md), and ``spec_of`` — what a
    rollout copies — reads it back."""
    gateway = lab_inventory.node("gateway")
    assert gateway.docker is not None and gateway.serving_config is not None
    wanted = lab_inventory.serving_config(gateway.serving_config).cpu_shares
    assert wanted is not None, "the lab's gateway config sets no cpu_shares"
    host = DockerHost(gateway.docker.host)
    assert host.inspect(gateway.docker.container)["HostConfig"]["CpuShares"] == wanted
    assert host.spec_of(gateway.docker.container).cpu_shares == wanted


def test_prometheus_scrapes_the_gateways_litellm_metrics(lab_inventory: Inventory) -> None:
    url = lab_inventory.prometheus.url
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        series = _query(url, 'litellm_proxy_total_requests_metric_total{job="gateway"}')
        if series:
            break
        time.sleep(0.5)
    else:
        pytest.fail("no litellm_proxy_total_requests_metric_total for job gateway")
    assert _query(url, 'up{job="gateway"}')[0]["value"][1] == "1"  # type: ignore[index]


def test_the_gateway_follows_an_upstream_that_came_back_on_another_address(
    lab: Lab, lab_inventory: Inventory
) -> None:
    """sim-vllm leaves the lab network, a stand-in HTTP server takes its address, sim-vllm
    joins again on another (as after a restart or a partition while other containers
    start): the gateway must send users to sim-vllm's new address, none to the stand-in.
    LiteLLM keeps an upstream's address 300 s by default (aiohttp's DNS cache): with the catalogue's
    lanes side by side, a vLLM container took sim-vllm's old address and answered the
    gateway's users 404 (docs/gateway.md, "An upstream's new address"). gateway-good
    resolves afresh (AIOHTTP_TTL_DNS_CACHE=0). Evidence: sim-vllm's own request counter,
    not LiteLLM's word."""
    import docker as docker_sdk

    from faultkit.constants import LABEL_OWNER
    from testbed.lab import LAB_NETWORK

    gateway, upstream = lab_inventory.node("gateway"), lab_inventory.node("sim-vllm")
    assert upstream.docker is not None
    client = docker_sdk.from_env()
    container = client.containers.get(upstream.docker.container)
    network = client.networks.get(LAB_NETWORK)

    def address() -> str:
        container.reload()
        return str(container.attrs["NetworkSettings"]["Networks"][LAB_NETWORK]["IPAddress"])

    def served() -> float:
        text = httpx.get(f"{upstream.base_url}/metrics", timeout=5).text
        return sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("vllm:request_success_total"))

    def users(count: int) -> None:
        for _ in range(count):
            r = httpx.post(f"{gateway.base_url}/v1/chat/completions", timeout=60,
                           json={"model": gateway.model, "max_tokens": 3,
                                 "messages": [{"role": "user", "content": "hi"}]})
            assert r.status_code == 200, r.text[:300]

    before = served()
    users(12)  # the gateway has looked sim-vllm's address up, and used it
    assert served() > before, "sim-vllm got no user before its move: nothing to test"
    old = address()
    network.disconnect(container)
    stand_ins: list[Any] = []
    try:
        # Docker gives a new container the lowest free address: stand-in HTTP servers on
        # port 8000 take them until one holds sim-vllm's, which then joins on another
        for i in range(8):
            stand_in = client.containers.run(
                "faultkit/base:bookworm", ["python3", "-m", "http.server", "8000"],
                detach=True, name=f"faultkit-test-stand-in-{i}",
                labels={LABEL_OWNER: "tests"}, network=LAB_NETWORK)
            stand_ins.append(stand_in)
            stand_in.reload()
            if stand_in.attrs["NetworkSettings"]["Networks"][LAB_NETWORK]["IPAddress"] == old:
                break
        else:
            pytest.fail(f"no stand-in got sim-vllm's address {old} in 8 tries")
        network.connect(container)
        assert address() != old
        lab.wait_scraped([upstream], after=time.time())
        time.sleep(11)  # past the gateway's 10 s cooldown, had an attempt failed meanwhile
        before = served()
        users(30)
        reached = served() - before
        stand_in_log = stand_ins[-1].logs().decode(errors="replace")
    finally:
        for stand_in in stand_ins:
            stand_in.remove(force=True)
    assert reached >= 3, (f"sim-vllm served {reached:g} of 30 users after moving from {old} "
                          f"to {address()}; the stand-in on its old address saw: "
                          f"{stand_in_log[-400:]}")
    assert "POST" not in stand_in_log, stand_in_log[-400:]
