"""Where the testbed's files are: its inventory, and its state under ``$FAULTKIT_HOME``
(default ``~/.cache/faultkit``).

:data:`INVENTORY` is the lab's inventory, an ordinary inventory file shipped with the
package; the entry points (the ``faultkit`` CLI and the pytest plugin) default to it
through the ``faultkit.labs`` entry point (``pyproject.toml``), so no module of
``faultkit``, ``slo`` or ``reports`` imports or names the testbed.

Caches (built images' inputs, the llama.cpp wheel, models, the vLLM virtualenv) survive
``testbed down``; per-run state (Prometheus data, sim ground-truth files) lives under
``state/`` and is removed by ``down``.
"""

from __future__ import annotations

from pathlib import Path

from faultkit.constants import faultkit_home

#: The lab's inventory: its nodes, serving configs and Prometheus.
INVENTORY = Path(__file__).resolve().parent / "inventory.yaml"


def home() -> Path:
    """The faultkit home directory (:func:`faultkit.constants.faultkit_home`), created on
    first use."""
    path = faultkit_home()
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
