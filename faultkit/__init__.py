"""faultkit: chaos and reliability test harness for self-hosted LLM inference.

``faultkit`` *acts* on the system (inventory, Docker, faults, load, journal, CLI, pytest
plugin); ``slo`` observes and judges; ``reports`` tells; ``testbed`` is the local lab.

The names below are the public API a user writing a scenario of their own imports (with
the checks from ``slo``): the experiment runner (``Experiment``, ``NotJudgeable``), the
inventory's types, load profiles, the records, the timeline's event kinds and the run
directory. They are imported on first use: ``import faultkit`` (which every
``faultkit.*`` import runs, the pytest plugin's included) stays free of pydantic and YAML.
``tests/unit/faultkit/test_public_api.py`` pins the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faultkit.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from faultkit.errors import FaultkitError, InventoryError
    from faultkit.experiment.experiment import Experiment
    from faultkit.experiment.outcomes import NotJudgeable
    from faultkit.inventory import (
        Inventory,
        Node,
        ServingConfig,
        SLOSettings,
        load_inventory,
    )
    from faultkit.load.profile import LoadProfile
    from faultkit.model.events import EventKind
    from faultkit.model.kinds import FAULT_KINDS
    from faultkit.model.records import Event, RequestRecord
    from faultkit.rundir import RunDir

#: name → the module it comes from
_EXPORTS: dict[str, str] = {
    "FAULT_KINDS": "faultkit.model.kinds",
    "Event": "faultkit.model.records",
    "EventKind": "faultkit.model.events",
    "Experiment": "faultkit.experiment.experiment",
    "FaultkitError": "faultkit.errors",
    "Inventory": "faultkit.inventory",
    "InventoryError": "faultkit.errors",
    "LoadProfile": "faultkit.load.profile",
    "Node": "faultkit.inventory",
    "NotJudgeable": "faultkit.experiment.outcomes",
    "RequestRecord": "faultkit.model.records",
    "RunDir": "faultkit.rundir",
    "SLOSettings": "faultkit.inventory",
    "ServingConfig": "faultkit.inventory",
    "load_inventory": "faultkit.inventory",
}

__all__ = [
    "FAULT_KINDS",
    "Event",
    "EventKind",
    "Experiment",
    "FaultkitError",
    "Inventory",
    "InventoryError",
    "LoadProfile",
    "Node",
    "NotJudgeable",
    "RequestRecord",
    "RunDir",
    "SLOSettings",
    "ServingConfig",
    "load_inventory",
]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
