"""Fixtures shared by the integration and end-to-end tests: the real testbed, up once."""

from __future__ import annotations

import pytest

from faultkit.inventory import Inventory
from testbed.lab import Lab


@pytest.fixture(scope="session")
def lab() -> Lab:
    """The local lab, up and scraped (idempotent: reuses what is already running)."""
    lab = Lab(progress=lambda message: print(f"[testbed] {message}"))
    lab.up()
    return lab


@pytest.fixture(scope="session")
def lab_inventory(lab: Lab) -> Inventory:
    return lab.inventory
