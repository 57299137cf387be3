"""Where the testbed keeps its state: ``$FAULTKIT_HOME`` (default ``~/.cache/faultkit``).

Caches (built images' inputs, the llama.cpp wheel, models, the vLLM virtualenv) survive
``testbed down``; per-run state (Prometheus data, sim ground-truth files) lives under
``state/`` and is removed by ``down``.
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The faultkit home directory (created on first use)."""
    path = Path(os.environ.get("FAULTKIT_HOME", "~/.cache/faultkit")).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir(name: str) -> Path:
    """A persistent cache directory, e.g. ``cache_dir("wheels")``."""
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_dir(name: str) -> Path:
    """A per-lab state directory under ``state/``, removed by ``testbed down``."""
    path = home() / "state" / name
    path.mkdir(parents=True, exist_ok=True)
    return path
