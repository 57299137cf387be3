"""Planted secrets: a serving config's secret env value and a node's API key appear in no file
faultkit writes.

The session's known-good gate (``tests/e2e/known_good_gate.py``) runs with an ``HF_TOKEN``
in ``sim-vllm-good``'s env and an API key for the node, as a user would: rollout, steady
state, the gate scenarios (a kill among them), rollback. Every file written under the gate
directory and under ``$FAULTKIT_HOME`` since its start (journal, logs), and everything
printed, is searched for both values.

The journal may hold a *previous* container's env (see ``faultkit.faults.rollout``: a
restore must not depend on anything else); the planted secret is in the candidate's env
only, never a previous container's here, and the rollback leaves no record behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from faultkit.constants import faultkit_home
from tests.e2e.known_good_gate import PlantedGate

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

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


def test_planted_secrets_are_in_no_file_faultkit_writes(planted_gate: PlantedGate) -> None:
    gate = planted_gate.result
    assert gate.returncode == 0, gate.stdout[-3000:] + gate.stderr[-2000:]

    written = _files_written([planted_gate.gate_dir, faultkit_home()], planted_gate.started)
    assert any(p.name == "incident.md" and "-kill-" in str(p) for p in written), (
        "the gate's kill scenario wrote no report")
    assert any(p.name == "gate.md" for p in written), "the gate wrote no gate.md"
    hits = [
        f"{path}: {name}"
        for path in written
        for name, value in planted_gate.planted
        if value.encode() in path.read_bytes()
    ]
    printed = gate.stdout + gate.stderr
    hits += [f"printed: {name}" for name, value in planted_gate.planted if value in printed]
    assert not hits, f"{len(hits)} file(s) hold a planted secret:\n" + "\n".join(hits)
