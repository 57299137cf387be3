"""faultkit: chaos and reliability test harness for self-hosted LLM inference.

``faultkit`` *acts* on the system (inventory, Docker, faults, load, journal, CLI, pytest
plugin); ``slo`` observes and judges; ``reports`` tells; ``testbed`` is the local lab.
"""

from faultkit.errors import FaultkitError, InventoryError
from faultkit.inventory import (
    FAULT_KINDS,
    Inventory,
    Node,
    ServingConfig,
    SLOSettings,
    load_inventory,
)
from faultkit.records import Event, RequestRecord
from faultkit.rundir import RunDir

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
