"""Shared by the rules and dashboard tests: a small inventory of every engine kind, and
promtool (Debian's prometheus package), which CI must have."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

#: llama.cpp, both simulator personalities and a node without a Prometheus job
SLO_INVENTORY = """
prometheus: {url: http://127.0.0.1:9}
nodes:
  - {name: llama, engine: llamacpp, base_url: "http://127.0.0.1:1", model: m,
     prometheus: {job: llama}}
  - {name: simv, engine: sim, personality: vllm, base_url: "http://127.0.0.1:2", model: m,
     prometheus: {job: simv, selector: 'model_name="m"'}, slo: {ttft_s: 1.0__WINDOW__}}
  - {name: sg, engine: sim, personality: sglang, base_url: "http://127.0.0.1:3", model: m,
     prometheus: {job: sg}}
  - {name: dark, engine: vllm, base_url: "http://127.0.0.1:4", model: m}
"""


def slo_inventory(window_days: int | None = None) -> str:
    """The inventory text, with a per-node SLO window for ``simv`` when given."""
    window = f", window_days: {window_days}" if window_days is not None else ""
    return SLO_INVENTORY.replace("__WINDOW__", window)


def required_binary(name: str, package: str) -> str:
    """Path of Debian's ``name``. Missing, it fails the test where it must be there (CI,
    where run.sh installs ``package`` and sets FAULTKIT_REQUIRE_PROMTOOL=1: a skipped
    check there would look green) and is skipped, with the reason in pytest's summary,
    elsewhere."""
    path = shutil.which(name) or f"/usr/bin/{name}"
    if Path(path).exists():
        return path
    message = f"{name} not installed (Debian: apt-get install {package})"
    if os.environ.get("CI") or os.environ.get("FAULTKIT_REQUIRE_PROMTOOL") == "1":
        pytest.fail(message + "; it is required here (CI or FAULTKIT_REQUIRE_PROMTOOL=1)")
    pytest.skip(message)


def promtool() -> str:
    """Path of promtool (:func:`required_binary`)."""
    return required_binary("promtool", "prometheus")
