"""The session's faultkit state: whether faultkit is used, its settings and its inventory.

Everything the plugin keeps per session lives in the pytest config's stash under the keys
defined here; the other plugin modules read it through these functions only.

Contract:

- :func:`used_by_configuration` — the configuration alone says faultkit is used (the ini
  sets ``faultkit = true``, or ``--inventory``, ``--node`` or ``--serving-config`` is
  given); :func:`uses_faultkit` — one collected test does (it requests a fixture of
  :data:`FAULTKIT_FIXTURES` or carries a ``fault`` marker); :func:`is_used` — what is known
  so far (set at configure time, turned on once collection shows a test uses faultkit).
- :func:`settings_of` resolves the settings once (marker > command line > ``FAULTKIT_*``
  environment > ini > default, :mod:`faultkit.plugin.settings`).
- :func:`inventory_of` loads the inventory once; a bad file is a :class:`pytest.UsageError`
  each time it is asked for, never a pass.

Light: pytest and the standard library at import time; the inventory is imported when it
is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest

from faultkit.plugin.settings import Settings, resolve_settings
from faultkit.plugin.terminal import LiveLine

if TYPE_CHECKING:
    from faultkit.errors import InventoryError
    from faultkit.inventory import Inventory

SETTINGS_KEY = pytest.StashKey[Settings]()
INVENTORY_KEY = pytest.StashKey["Inventory | InventoryError"]()
USED_KEY = pytest.StashKey[bool]()
LIVE_KEY = pytest.StashKey[LiveLine]()
#: how many ``soak`` scenarios the collection deselected (no ``--soak-s``)
SOAKS_DESELECTED_KEY = pytest.StashKey[int]()

#: fixtures that mean a test uses the harness
FAULTKIT_FIXTURES = frozenset({"experiment", "node", "faultkit_live"})
#: command-line options that mean the session uses faultkit
USE_OPTIONS = ("inventory", "node", "serving_config")


# --------------------------------------------------------------------------- is faultkit used?


def used_by_configuration(config: pytest.Config) -> bool:
    """The rootdir's ini sets ``faultkit = true``, or ``--inventory``, ``--node`` or
    ``--serving-config`` is on the command line."""
    if config.getini("faultkit"):
        return True
    return any(config.getoption(f"faultkit_{name}", None) is not None for name in USE_OPTIONS)


def uses_faultkit(item: pytest.Item) -> bool:
    """``item`` requests the ``experiment``, ``node`` or ``faultkit_live`` fixture, or
    carries a ``fault`` marker."""
    fixtures = getattr(item, "fixturenames", ())
    return bool(FAULTKIT_FIXTURES.intersection(fixtures)) or (
        item.get_closest_marker("fault") is not None
    )


def items_use_faultkit(items: Iterable[pytest.Item]) -> bool:
    """Some item of ``items`` uses faultkit (:func:`uses_faultkit`)."""
    return any(uses_faultkit(item) for item in items)


def is_used(config: pytest.Config) -> bool:
    """Whether this session uses faultkit (as far as is known yet: before collection ends,
    only its configuration can say)."""
    return config.stash.get(USED_KEY, False)


# --------------------------------------------------------------------------- settings, inventory


def settings_of(config: pytest.Config) -> Settings:
    """The session's settings (resolved once, on first use)."""
    if SETTINGS_KEY not in config.stash:
        config.stash[SETTINGS_KEY] = resolve_settings(config, os.environ)
    return config.stash[SETTINGS_KEY]


def inventory_of(config: pytest.Config) -> Inventory:
    """The session's inventory (loaded once); a bad file is a usage error, never a pass."""
    from faultkit.errors import InventoryError
    from faultkit.inventory import load_inventory

    if INVENTORY_KEY not in config.stash:
        settings = settings_of(config)
        try:
            inventory: Inventory | InventoryError = load_inventory(settings.inventory)
        except InventoryError as exc:
            inventory = exc
        config.stash[INVENTORY_KEY] = inventory
    loaded = config.stash[INVENTORY_KEY]
    if isinstance(loaded, InventoryError):
        raise pytest.UsageError(
            f"faultkit inventory ({settings_of(config).inventory_source}):\n{loaded}"
        )
    return loaded
