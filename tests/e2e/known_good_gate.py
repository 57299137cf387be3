"""One gate of the known-good config, run once per session with planted secrets.

The gate of ``sim-vllm-good`` is the most expensive thing the e2e tests do after the
catalogue (rollout, steady state of both configs, the gate scenarios, rollback: about
2.5 minutes), run once after the catalogue (``conftest.suite_run``). Two
questions are asked of it: did it PASS (``test_scenario_verdicts``), and did any planted
secret reach a file or the output (``test_planted_secrets``). One run answers both, so CI
pays for one.

The testbed inventory is copied; in the copy ``sim-vllm-good``'s env carries an
``HF_TOKEN`` and the node gets an ``api_key_env`` whose variable holds a key (sent as
``Authorization: Bearer`` with every request). Neither changes how the simnode serves.
"""

from __future__ import annotations

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
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))


def run_planted_gate(workdir: Path) -> PlantedGate:
    """Gate ``sim-vllm-good`` on the lab with a planted HF_TOKEN and API key."""
    env_secret = f"hf-planted-{secrets.token_hex(12)}"
    api_key = f"key-planted-{secrets.token_hex(12)}"
    inventory = workdir / "inventory.yaml"
    _inventory_with_secrets(inventory, env_secret)
    started = time.time() - 1
    # the key is in the gate's environment only, never in this process's
    result = run_cli(
        "gate", "--inventory", str(inventory), "--node", NODE, "--config", CONFIG,
        "--out", str(workdir / "gates"), "--steady-s", GATE_STEADY_S, timeout=1800,
        env={**os.environ, KEY_VARIABLE: api_key},
    )
    gates = sorted((workdir / "gates").glob(f"gate-*-{NODE}-{CONFIG}"))
    assert gates, result.stdout[-3000:] + result.stderr[-2000:]
    return PlantedGate(
        result, gates[-1], started, (("HF_TOKEN", env_secret), ("API key", api_key))
    )
