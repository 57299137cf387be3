"""The exception the ``testbed`` package raises (a :class:`faultkit.errors.FaultkitError`)."""

from __future__ import annotations

from faultkit.errors import FaultkitError


class TestbedError(FaultkitError):
    """The local testbed could not be built or started."""

    __test__ = False  # not a pytest test class, despite the name
