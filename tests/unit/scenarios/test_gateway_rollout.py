"""A gateway's rollout without a lab: LiteLLM's /health answer read as upstream health,
the rollout's readiness of a gateway candidate (it must reach every upstream that is ready
on its own), the lab's one config file per gateway serving config, and the scenario's
rollout check (a candidate that serves without upstream evidence is INCONCLUSIVE)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from aiohttp import web

from faultkit.inventory import load_inventory, parse_inventory
from faultkit.model.records import Event
from faultkit.probes.health import parse_upstream_health, upstream_health
from slo.types import Measurement
from testbed import litellm_node
from testbed.errors import TestbedError
from testbed.lab_nodes import LAB_GATEWAY_CONFIGS, gateway_variants, lab_mounts
from testbed.paths import INVENTORY

scenario = importlib.import_module("scenarios.test_gateway_rollout")

#: LiteLLM 1.108.7's /health with one deployment unreachable (shape as served on the lab)
HEALTH = {
    "healthy_endpoints": [
        {"api_base": "http://faultkit-llama:8080/v1", "model": "openai/tiny-llama",
         "model_id": "llama"},
    ],
    "unhealthy_endpoints": [
        {"api_base": "http://faultkit-sim-sglang:30001/v1", "model": "openai/sim-llama-8b",
         "model_id": "sim-sglang",
         "error": "litellm.APIConnectionError: Connection error.\nstack trace: ..."},
    ],
    "healthy_count": 1,
    "unhealthy_count": 1,
}


def test_litellms_health_answer_names_reached_and_unreached_upstreams() -> None:
    seen = parse_upstream_health(HEALTH)
    assert seen.checked and seen.healthy == ("llama",)
    assert seen.unhealthy == (("sim-sglang", "litellm.APIConnectionError: Connection error."),)
    assert seen.to_json()["unhealthy"] == {"sim-sglang": seen.unhealthy[0][1]}
    assert not parse_upstream_health({"status": "healthy"}).checked  # readiness, not /health
    assert not parse_upstream_health("Internal Server Error").checked
    by_base = parse_upstream_health({"unhealthy_endpoints": [{"api_base": "http://x/v1"}]})
    assert by_base.unhealthy == (("http://x/v1", ""),)


class FakeGateway:
    """A LiteLLM-shaped gateway on loopback: ``health`` is what /health answers (a body,
    or a status code)."""

    def __init__(self) -> None:
        self.health: Any = HEALTH
        self.url = ""


async def _answer(request: web.Request) -> web.StreamResponse:
    what = request.app[FAKE].health
    if isinstance(what, int):
        return web.Response(status=what, text="Internal Server Error")
    return web.json_response(what)


FAKE = web.AppKey("fake", FakeGateway)


async def _ready(_request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "healthy"})


@pytest.fixture
async def fake_gateway() -> AsyncIterator[FakeGateway]:
    fake = FakeGateway()
    app = web.Application()
    app[FAKE] = fake
    app.router.add_get("/health", _answer)
    app.router.add_get("/health/readiness", _ready)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield fake
    await runner.cleanup()


def _inventory(gateway_url: str, sglang_url: str) -> Any:
    return parse_inventory(f"""
nodes:
  - {{name: llama, engine: llamacpp, base_url: "http://127.0.0.1:9", model: m}}
  - {{name: sim-sglang, engine: sglang, base_url: "{sglang_url}", model: m,
     health_path: /health/readiness}}
  - {{name: gw, kind: gateway, engine: litellm, base_url: "{gateway_url}", model: chat,
     health_path: /health/readiness, upstreams: [llama, sim-sglang],
     docker: {{container: fk-gw}}, faults: ["*"]}}
""")


async def test_upstream_health_asks_the_gateway_and_never_raises(
    fake_gateway: FakeGateway,
) -> None:
    inv = _inventory(fake_gateway.url, fake_gateway.url)
    async with httpx.AsyncClient() as http:
        seen = await upstream_health(inv.node("gw"), http)
        assert seen.checked and [n for n, _ in seen.unhealthy] == ["sim-sglang"]
        fake_gateway.health = 500  # e.g. a master key set and not sent
        seen = await upstream_health(inv.node("gw"), http)
        assert not seen.checked and seen.detail.startswith("HTTP 500")
        assert not (await upstream_health(inv.node("llama"), http)).checked  # not a gateway
        down = _inventory("http://127.0.0.1:9", fake_gateway.url)
        assert not (await upstream_health(down.node("gw"), http)).checked


async def _reachable(inv: Any, health: Any, fake: FakeGateway) -> tuple[Any, dict[str, Any]]:
    from faultkit.faults.rollout import Rollout

    fake.health = health
    rollout = Rollout.__new__(Rollout)  # only what _upstreams_reachable reads
    rollout.node, rollout.inventory, rollout.result = inv.node("gw"), inv, {}
    last = {"why": "not ready"}
    async with httpx.AsyncClient() as http:
        outcome = await rollout._upstreams_reachable(http, last)
    return outcome, rollout.result


async def test_a_gateway_candidate_that_cannot_reach_a_ready_upstream_has_failed(
    fake_gateway: FakeGateway,
) -> None:
    # sim-sglang answers its own health (the fake's /health/readiness): the config is wrong
    inv = _inventory(fake_gateway.url, fake_gateway.url)
    outcome, result = await _reachable(inv, HEALTH, fake_gateway)
    assert isinstance(outcome, str) and "cannot reach upstream sim-sglang" in outcome
    assert "Connection error" in outcome and result["upstream_check"]["checked"] is True
    # the same answer while sim-sglang itself is down: keep waiting, not the config's fault
    down = _inventory(fake_gateway.url, "http://127.0.0.1:9")
    outcome, _ = await _reachable(down, HEALTH, fake_gateway)
    assert outcome is False
    # every upstream reached: ready; no usable answer: ready, the gap kept for the verdict
    healthy = {**HEALTH, "unhealthy_endpoints": [], "unhealthy_count": 0}
    assert (await _reachable(inv, healthy, fake_gateway))[0] is True
    outcome, result = await _reachable(inv, 500, fake_gateway)
    assert outcome is True and result["upstream_check"]["checked"] is False


async def test_a_restored_gateway_is_ready_once_it_reaches_its_upstreams(
    fake_gateway: FakeGateway,
) -> None:
    """A rollback's gateway is ready as a candidate is: readiness, then every upstream
    reached (until then its first users meet a proxy with no upstream connection open).
    It waits while /health names one unreached, and stops at the deadline."""
    import asyncio
    import time

    from faultkit.faults.rollout import Rollout

    inv = _inventory(fake_gateway.url, fake_gateway.url)
    rollout = Rollout.__new__(Rollout)  # only what _wait_restored_upstreams reads
    rollout.node = inv.node("gw")
    healthy = {**HEALTH, "unhealthy_endpoints": [], "unhealthy_count": 0}

    async def heal_after(seconds: float) -> None:
        await asyncio.sleep(seconds)
        fake_gateway.health = healthy

    t0 = time.monotonic()
    healer = asyncio.create_task(heal_after(1.2))
    await rollout._wait_restored_upstreams(t0 + 10.0)
    waited = time.monotonic() - t0
    await healer
    assert 1.2 <= waited < 10.0, waited  # returned once healed, not before, not at the deadline
    fake_gateway.health = HEALTH  # never healed: it gives up at the deadline
    t0 = time.monotonic()
    await rollout._wait_restored_upstreams(t0 + 1.0)
    assert 1.0 <= time.monotonic() - t0 < 5.0


def _m() -> Measurement:
    return Measurement(node="gw", t_effect=1.0, t_revert=None, t_window_end=2.0)


def test_the_rollout_check_passes_a_rollback_and_a_checked_candidate_only() -> None:
    def judged(result: dict[str, Any]) -> Any:
        (fn,) = scenario.rollout_outcome("gateway-x", result).fns
        return fn(_m())

    rolled = judged({"rolled_back": True, "t_failed_detected": 5.0, "t_restored": 9.0,
                     "failed_reason": "the gateway cannot reach upstream sim-sglang"})
    assert rolled.passed and "rolled back" in rolled.observed
    # dated from the fault's effect, never as raw epoch seconds
    assert "detected +4.0 s after it took effect" in rolled.observed
    assert "serving again 4.0 s later" in rolled.observed
    assert not judged({"rolled_back": True, "t_failed_detected": 5.0}).passed  # not restored
    served = judged({"rolled_back": False, "ready": True,
                     "upstream_check": {"checked": True, "healthy": ["llama", "sim-vllm"]}})
    assert served.passed and "reaches llama, sim-vllm" in served.observed
    unknown = judged({"rolled_back": False, "ready": True,
                      "upstream_check": {"checked": False, "detail": "HTTP 500"}})
    assert not unknown.passed and unknown.inconclusive
    assert not judged({}).passed


def test_the_lab_writes_one_proxy_config_per_gateway_serving_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path))
    monkeypatch.setattr(litellm_node, "ensure_litellm_env", lambda _p: tmp_path / "litellm-venv")
    inventory = load_inventory(INVENTORY)
    gateway = inventory.node("gateway")
    assert set(gateway.candidate_configs) <= set(LAB_GATEWAY_CONFIGS)
    lab_mounts(gateway, lambda _m: None, inventory)
    files = {p.name: yaml.safe_load(p.read_text())
             for p in litellm_node.config_dir("gateway").glob("*.yaml")}
    assert set(files) == {"config.yaml", "gateway-bad-upstream.yaml", "gateway-no-retries.yaml"}

    def bases(name: str) -> dict[str, str]:
        return {d["model_info"]["id"]: d["litellm_params"]["api_base"]
                for d in files[name]["model_list"]}

    good = bases("config.yaml")
    assert bases("gateway-no-retries.yaml") == good
    assert bases("gateway-bad-upstream.yaml") == {
        **good, "sim-sglang": "http://faultkit-sim-sglang:30001/v1"}
    assert files["config.yaml"]["router_settings"]["num_retries"] == 2
    assert files["gateway-bad-upstream.yaml"]["router_settings"]["num_retries"] == 2
    assert files["gateway-no-retries.yaml"]["router_settings"]["num_retries"] == 0
    # every gateway serving config's command reads the file written for it
    for name in [gateway.serving_config, *gateway.candidate_configs]:
        command = inventory.serving_config(name or "").command
        assert litellm_node.config_file_of(command) in files


def test_a_gateway_config_the_lab_cannot_write_or_a_command_without_its_file_is_refused() -> None:
    inventory = load_inventory(INVENTORY)
    odd = inventory.node("gateway").model_copy(update={"candidate_configs": ["llama-good"]})
    with pytest.raises(TestbedError, match="not one the lab can write"):
        gateway_variants(inventory, odd)
    with pytest.raises(TestbedError, match="must name its --config"):
        litellm_node.config_file_of(["python", "-m", "litellm"])
    with pytest.raises(TestbedError, match="must be a file in /etc/litellm/"):
        litellm_node.config_file_of(["x", "--config", "/tmp/config.yaml"])


def test_the_gateway_rollout_event_is_a_plain_timeline_event() -> None:
    # what the scenario notes is JSON as written (Event.data), no object
    event = Event(t=1.0, source="harness", kind="gateway_rollout", node="gw",
                  data={"config": "gateway-no-retries", "rolled_back": False})
    assert event.data["config"] == "gateway-no-retries"
