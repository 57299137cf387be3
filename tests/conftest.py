"""Fixtures shared by the integration and end-to-end tests: the real testbed, up once."""

from __future__ import annotations

import os

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


#: set by ``bash run.sh tests``, which brings the testbed up before its test processes start
#: (docs/ci.md): a process started beside another must not bring it up again — that would
#: wait for the readiness of a node the other's fault has just taken down, or restart it
LAB_IS_UP_ENV = "FAULTKIT_TESTS_TESTBED_IS_UP"


@pytest.fixture(scope="session")
def lab() -> Lab:
    """The local lab, up and scraped (idempotent: reuses what is already running)."""
    lab = Lab(progress=lambda message: print(f"[testbed] {message}"))
    if os.environ.get(LAB_IS_UP_ENV) != "1":
        lab.up()
    return lab


@pytest.fixture(scope="session")
def lab_inventory(lab: Lab) -> Inventory:
    return lab.inventory
