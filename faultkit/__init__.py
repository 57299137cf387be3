"""faultkit: chaos and reliability test harness for self-hosted LLM inference.

``faultkit`` *acts* on the system (inventory, Docker, faults, load, journal, CLI, pytest
plugin); ``slo`` observes and judges; ``reports`` tells; ``testbed`` is the local lab.

The names below are imported on first use: ``import faultkit`` (which every
``faultkit.*`` import runs, the pytest plugin's included) stays free of pydantic and YAML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faultkit.lazy import lazy_names

if TYPE_CHECKING:
    from faultkit.errors import FaultkitError, InventoryError
    from faultkit.inventory import (
        Inventory,
        Node,
        ServingConfig,
        SLOSettings,
        load_inventory,
    )
    from faultkit.kinds import FAULT_KINDS
    from faultkit.records import Event, RequestRecord
    from faultkit.rundir import RunDir

#: name → the module it comes from
_EXPORTS: dict[str, str] = {
    "FAULT_KINDS": "faultkit.kinds",
    "Event": "faultkit.records",
    "FaultkitError": "faultkit.errors",
    "Inventory": "faultkit.inventory",
    "InventoryError": "faultkit.errors",
    "Node": "faultkit.inventory",
    "RequestRecord": "faultkit.records",
    "RunDir": "faultkit.rundir",
    "SLOSettings": "faultkit.inventory",
    "ServingConfig": "faultkit.inventory",
    "load_inventory": "faultkit.inventory",
}

__all__ = [
    "FAULT_KINDS",
    "Event",
    "FaultkitError",
    "Inventory",
    "InventoryError",
    "Node",
    "RequestRecord",
    "RunDir",
    "SLOSettings",
    "ServingConfig",
    "load_inventory",
]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
