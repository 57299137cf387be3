"""One gate of the known-good config, run once per session with planted secrets.

The gate of ``sim-vllm-good`` is the most expensive thing the e2e tests do after the
catalogue (rollout, steady state of both configs, the gate scenarios, rollback: about
4 minutes), run once after the catalogue (``conftest.suite_run``). Three
questions are asked of it: did it PASS although the node ran *another* config before it
(``test_scenario_verdicts``), did it put that other config back, and did any planted secret
reach a file or the output (``test_planted_secrets``). One run answers all three, so CI
pays for one.

Before the gate the node is rolled onto ``sim-vllm-good-util85`` (a second known-good
config) and promoted there, as an operator's earlier promotion would leave it; the copy of
the testbed inventory says so (``serving_config``). After the gate the node is rolled back
onto the testbed's own ``sim-vllm-good``, whatever happened.

In the copy ``sim-vllm-good``'s env also carries an ``HF_TOKEN`` and the node gets an
``api_key_env`` whose variable holds a key (sent as ``Authorization: Bearer`` with every
request). Neither changes how the simnode serves.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import REPO, run_cli

NODE = "sim-vllm"
CONFIG = "sim-vllm-good"
#: what the node runs when the gate starts: another known-good config
RUNNING_BEFORE = "sim-vllm-good-util85"
KEY_VARIABLE = "FAULTKIT_PLANTED_API_KEY"

#: the gate measures each config's steady state for 10 s, not the default 30 s: the phase
#: runs and is judged the same way, and CI keeps its time budget
GATE_STEADY_S = "10"


@dataclass(frozen=True)
class PlantedGate:
    result: subprocess.CompletedProcess[str]
    gate_dir: Path
    started: float  # epoch seconds, a second before the gate began
    planted: tuple[tuple[str, str], ...]  # (what, value) of each planted secret
    #: the node's serving-config label right after the gate (read from Docker)
    config_after: str | None

    @property
    def gate_json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.gate_dir / "gate.json").read_text())
        return data

    @property
    def gate_md(self) -> str:
        return (self.gate_dir / "gate.md").read_text()


def _inventory_with_secrets(path: Path, env_secret: str) -> None:
    inventory = yaml.safe_load((REPO / "testbed" / "inventory.yaml").read_text())
    config = inventory["serving_configs"][CONFIG]
    config["env"] = {**config.get("env", {}), "HF_TOKEN": env_secret}
    for node in inventory["nodes"]:
        if node["name"] == NODE:
            node["api_key_env"] = KEY_VARIABLE
            node["serving_config"] = RUNNING_BEFORE
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))


def roll_node_to(inventory_path: Path, config: str) -> None:
    """Put ``config`` on the node for good, with faultkit's own rollout (promoted)."""
    from faultkit.faults import make_fault
    from faultkit.faults.rollout import Rollout
    from faultkit.inventory import load_inventory

    async def roll() -> None:
        inventory = load_inventory(inventory_path)
        fault = make_fault("rollout", inventory.node(NODE), inventory=inventory, config=config)
        assert isinstance(fault, Rollout)
        await fault.inject()
        fault.promote()  # raises when the config did not become ready
        await fault.revert()

    asyncio.run(roll())


def config_label() -> str | None:
    """The serving config the node's container says it runs (its Docker label)."""
    from faultkit.constants import LABEL_SERVING_CONFIG
    from faultkit.docker.host import DockerHost
    from faultkit.inventory import load_inventory

    node = load_inventory(REPO / "testbed" / "inventory.yaml").node(NODE)
    assert node.docker is not None
    return DockerHost(node.docker.host).state(node.docker.container).labels.get(
        LABEL_SERVING_CONFIG)


def run_planted_gate(workdir: Path) -> PlantedGate:
    """Gate ``sim-vllm-good`` on the lab, the node running ``sim-vllm-good-util85``, with a
    planted HF_TOKEN and API key; the node is back on ``sim-vllm-good`` afterwards."""
    env_secret = f"hf-planted-{secrets.token_hex(12)}"
    api_key = f"key-planted-{secrets.token_hex(12)}"
    inventory = workdir / "inventory.yaml"
    _inventory_with_secrets(inventory, env_secret)
    roll_node_to(REPO / "testbed" / "inventory.yaml", RUNNING_BEFORE)
    try:
        assert config_label() == RUNNING_BEFORE, "the node is not on the config before the gate"
        started = time.time() - 1
        # the key is in the gate's environment only, never in this process's
        result = run_cli(
            "gate", "--inventory", str(inventory), "--node", NODE, "--config", CONFIG,
            "--out", str(workdir / "gates"), "--steady-s", GATE_STEADY_S, timeout=1800,
            env={**os.environ, KEY_VARIABLE: api_key},
        )
        config_after = config_label()
    finally:
        roll_node_to(REPO / "testbed" / "inventory.yaml", CONFIG)
    gates = sorted((workdir / "gates").glob(f"gate-*-{NODE}-{CONFIG}"))
    assert gates, result.stdout[-3000:] + result.stderr[-2000:]
    return PlantedGate(
        result, gates[-1], started, (("HF_TOKEN", env_secret), ("API key", api_key)),
        config_after,
    )
