"""Planted secrets: a serving config's secret env value and a node's API key appear in no file
faultkit writes.

The testbed inventory, copied, gains a candidate config for sim-vllm whose env carries a
``HF_TOKEN`` and gives the node an ``api_key_env`` whose variable holds a key (sent as
``Authorization: Bearer`` with every request). Then, as a user would, a gate of the
candidate: rollout, steady state, the gate scenarios (a kill among them), rollback.
Every file written under the gate directory and under ``$FAULTKIT_HOME`` since
the start (journal, logs), and everything printed, is searched for both values.

The journal may hold a *previous* container's env (see ``faultkit.faults.rollout``: a
restore must not depend on anything else); the candidate's secret is never a previous
container's here, and the rollback leaves no record behind.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest
import yaml

from faultkit.constants import faultkit_home
from testbed.lab import Lab
from tests.e2e.conftest import REPO, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

NODE = "sim-vllm"
CANDIDATE = "sim-vllm-planted-secret"
KEY_VARIABLE = "FAULTKIT_PLANTED_API_KEY"


def _inventory_with_secrets(path: Path, env_secret: str) -> None:
    inventory = yaml.safe_load((REPO / "testbed" / "inventory.yaml").read_text())
    configs = inventory["serving_configs"]
    candidate = dict(configs["sim-vllm-good"])
    candidate["description"] = "sim-vllm-good with a planted HF_TOKEN (secret test)"
    candidate["env"] = {**candidate.get("env", {}), "HF_TOKEN": env_secret}
    configs[CANDIDATE] = candidate
    for node in inventory["nodes"]:
        if node["name"] == NODE:
            node["api_key_env"] = KEY_VARIABLE
            node["candidate_configs"] = [*node.get("candidate_configs", []), CANDIDATE]
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))


#: $FAULTKIT_HOME's build caches: large, and written only by the testbed's one-time builds
_CACHES = ("rootfs", "models", "vllm-venv", "litellm-venv")


def _files_written(roots: list[Path], since: float) -> list[Path]:
    found = []
    for root in roots:
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in _CACHES and not d.startswith("llama-server")]
            for name in names:
                path = Path(dirpath) / name
                try:
                    if path.is_file() and not path.is_symlink() and path.stat().st_mtime >= since:
                        found.append(path)
                except OSError:
                    continue
    return found


def test_planted_secrets_are_in_no_file_faultkit_writes(lab: Lab, tmp_path: Path) -> None:
    env_secret = f"hf-planted-{secrets.token_hex(12)}"
    api_key = f"key-planted-{secrets.token_hex(12)}"
    inventory = tmp_path / "inventory.yaml"
    _inventory_with_secrets(inventory, env_secret)
    start = time.time() - 1

    os.environ[KEY_VARIABLE] = api_key  # run_cli passes the environment on
    try:
        gate = run_cli("gate", "--inventory", str(inventory), "--node", NODE, "--config",
                       CANDIDATE, "--out", str(tmp_path / "gates"), "--steady-s", "5",
                       timeout=600)
    finally:
        del os.environ[KEY_VARIABLE]
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]

    written = _files_written([tmp_path / "gates", faultkit_home()], start)
    assert any(p.name == "incident.md" and "-kill-" in str(p) for p in written), (
        "the gate's kill scenario wrote no report")
    assert any(p.name == "gate.md" for p in written), "the gate wrote no gate.md"
    planted = (("HF_TOKEN", env_secret), ("API key", api_key))
    hits = [
        f"{path}: {name}"
        for path in written
        for name, value in planted
        if value.encode() in path.read_bytes()
    ]
    printed = gate.stdout + gate.stderr
    hits += [f"printed: {name}" for name, value in planted if value in printed]
    assert not hits, f"{len(hits)} file(s) hold a planted secret:\n" + "\n".join(hits)
