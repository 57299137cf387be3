"""The lab's gateway node, without Docker or LiteLLM: its inventory entry, its proxy config
(upstreams by container address), its scrape job, ``--skip gateway`` and the start order."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from faultkit.inventory import load_inventory
from testbed import litellm_node
from testbed.lab import SKIPPABLE_NODES, Lab
from testbed.lab_nodes import LAB_GATEWAY_POLICY, container_address, container_port, lab_mounts
from testbed.paths import INVENTORY
from testbed.prometheus import scrape_config


@pytest.fixture
def fk_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FAULTKIT_HOME", str(tmp_path))
    monkeypatch.setattr(litellm_node, "ensure_litellm_env", lambda _p: tmp_path / "litellm-venv")
    return tmp_path


def test_the_gateway_node_routes_to_three_engine_nodes_and_allows_kill_and_rollout() -> None:
    inventory = load_inventory(INVENTORY)
    gateway = inventory.node("gateway")
    assert (gateway.kind, gateway.engine) == ("gateway", "litellm")
    assert gateway.upstreams == ["llama", "sim-vllm", "sim-sglang"]
    # node_restart: only so test_node_restart[llama] (every node on the host) is not refused
    assert gateway.faults == ["kill", "rollout", "node_restart"]
    # gateway-no-retries FAILs by design: gated in a targeted e2e run, not the catalogue
    assert gateway.candidate_configs == ["gateway-good", "gateway-bad-upstream"]
    assert "gateway-no-retries" in inventory.serving_configs
    assert gateway.base_url == "http://127.0.0.1:18004"
    ports = [n.base_url.rsplit(":", 1)[1] for n in inventory.nodes]
    assert len(ports) == len(set(ports)), ports
    assert gateway.docker is not None and gateway.docker.container == "faultkit-gateway"
    config = inventory.serving_config(gateway.serving_config or "")
    assert config.command == litellm_node.proxy_command()
    assert container_port(gateway, config) == litellm_node.CONTAINER_PORT
    assert config.restart == "on-failure"


def test_lab_mounts_write_the_proxy_config_with_container_addresses(fk_home: Path) -> None:
    inventory = load_inventory(INVENTORY)
    volumes, env = lab_mounts(inventory.node("gateway"), lambda _m: None, inventory)
    assert volumes[str(litellm_node.config_dir("gateway"))]["bind"] == "/etc/litellm"
    assert all(v["mode"] == "ro" for v in volumes.values())
    assert "DATABASE_URL" not in env and env["LITELLM_TELEMETRY_DISABLED"] == "true"
    config = yaml.safe_load(litellm_node.config_file("gateway").read_text())
    bases = {d["model_info"]["id"]: d["litellm_params"]["api_base"] for d in config["model_list"]}
    assert bases == {
        "llama": "http://faultkit-llama:8080/v1",
        "sim-vllm": "http://faultkit-sim-vllm:8000/v1",
        "sim-sglang": "http://faultkit-sim-sglang:30000/v1",
    }
    assert {d["model_name"] for d in config["model_list"]} == {"chat"}
    router = config["router_settings"]
    assert (router["num_retries"], router["allowed_fails"], router["cooldown_time"]) == (2, 1, 10)
    assert router["timeout"] == LAB_GATEWAY_POLICY.timeout_s
    assert config["general_settings"]["dangerously_permit_weak_or_unset_master_key"] is True
    assert config["litellm_settings"]["require_auth_for_metrics_endpoint"] is False


def test_container_address_is_the_container_name_and_engine_port() -> None:
    inventory = load_inventory(INVENTORY)
    assert container_address(inventory, inventory.node("sim-sglang")) == (
        "http://faultkit-sim-sglang:30000"
    )


def test_prometheus_scrapes_the_gateway_at_metrics_slash() -> None:
    scrape_configs = scrape_config(load_inventory(INVENTORY))["scrape_configs"]
    assert isinstance(scrape_configs, list)
    jobs = {j["job_name"]: j for j in scrape_configs}
    assert jobs["gateway"]["metrics_path"] == "/metrics/"
    assert jobs["gateway"]["static_configs"][0]["targets"] == ["127.0.0.1:18004"]
    assert jobs["llama"]["metrics_path"] == "/metrics"


def test_the_gateway_can_be_skipped_and_starts_after_its_upstreams() -> None:
    assert "gateway" in SKIPPABLE_NODES
    lab = Lab(INVENTORY, progress=lambda _m: None)
    assert "gateway" not in [n.name for n in lab.lab_nodes(frozenset({"gateway"}))]
    assert lab.lab_nodes()[-1].name == "gateway"


def test_node_restart_on_the_lab_host_is_not_refused_because_of_the_gateway() -> None:
    from faultkit.faults.process import NodeRestart

    inventory = load_inventory(INVENTORY)
    NodeRestart.check_blast_radius(inventory.node("llama"), inventory, {})  # does not raise
