"""Fixtures shared by the integration and end-to-end tests: the real testbed, up once."""

from __future__ import annotations

import pytest
from hypothesis import settings

from faultkit.inventory import Inventory
from testbed.lab import Lab

# No per-example deadline for property tests: on a shared 2-core machine one example can
# take longer than hypothesis's default 200 ms when the machine is busy (a run beside CI saw
# DeadlineExceeded in test_no_figure_is_ever_negative). How long code takes is a timing
# claim, and those live in bench/, not in tests. Examples stay random.
settings.register_profile("faultkit", deadline=None)
settings.load_profile("faultkit")


@pytest.fixture(scope="session")
def lab() -> Lab:
    """The local lab, up and scraped (idempotent: reuses what is already running)."""
    lab = Lab(progress=lambda message: print(f"[testbed] {message}"))
    lab.up()
    return lab


@pytest.fixture(scope="session")
def lab_inventory(lab: Lab) -> Inventory:
    return lab.inventory
