"""Once collection shows a test uses the harness: mark the session as using faultkit,
sweep the journal, set up the live status line.

Contract:

- :func:`pytest_collection_modifyitems` deselects the ``soak`` scenarios unless a soak
  duration is given (``--soak-s``).
- :func:`pytest_collection_finish` (trylast) does nothing unless a collected test uses
  faultkit (:func:`faultkit.plugin.state.uses_faultkit`); then the session is marked as
  using it, :func:`sweep_left_faults` runs before any test does, and (not with
  ``--collect-only``) the live line is started between tests
  (:func:`faultkit.plugin.terminal.start_live`).
- :func:`sweep_left_faults` reverts what a killed harness left applied, with the CLI's
  policy (:func:`faultkit.sweep.sweep`) — never with ``--collect-only`` or ``--dry-run``.

Light: the sweep is imported when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from faultkit.plugin.state import (
    LIVE_KEY,
    SOAKS_DESELECTED_KEY,
    USED_KEY,
    inventory_of,
    items_use_faultkit,
    settings_of,
)
from faultkit.plugin.terminal import start_live

if TYPE_CHECKING:
    from faultkit.inventory import Inventory


#: the marker of scenarios that run only for a given ``--soak-s``
SOAK_MARK = "soak"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``--soak-s`` (or ``$FAULTKIT_SOAK_S``, ini ``faultkit_soak_s``) the scenarios
    marked ``soak`` are deselected — pytest counts them "deselected", and the header says
    why — so ``pytest scenarios`` stays short; ``faultkit gate`` always gives a duration."""
    soaks = [item for item in items if item.get_closest_marker(SOAK_MARK) is not None]
    if not soaks or settings_of(config).soak_s is not None:
        return
    config.hook.pytest_deselected(items=soaks)
    items[:] = [item for item in items if item.get_closest_marker(SOAK_MARK) is None]
    config.stash[SOAKS_DESELECTED_KEY] = len(soaks)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Once collection shows that a test uses the harness: the session uses faultkit, the
    journal is swept before that test runs (:func:`sweep_left_faults`), and the live status
    line is set up (between tests, as it must be: :func:`faultkit.plugin.terminal.start_live`)."""
    if not items_use_faultkit(session.items):
        return
    session.config.stash[USED_KEY] = True
    sweep_left_faults(session.config)
    if not session.config.option.collectonly:
        line = start_live(session.config, settings_of(session.config).live)
        if line is not None:
            session.config.stash[LIVE_KEY] = line


def sweep_left_faults(config: pytest.Config) -> None:
    """Revert whatever a killed harness left applied before any scenario runs (not with
    ``--collect-only`` or ``--dry-run``).

    The sweep's policy is the CLI's (:func:`faultkit.sweep.sweep`): a ``shell`` undo step
    runs only when the session's inventory has it as a serving config's ``rollback:``, and
    records older than an hour are listed, not replayed (``faultkit sweep --force`` does).
    """
    if config.option.collectonly or settings_of(config).dry_run:
        return
    try:
        from faultkit.sweep import sweep
    except ImportError:
        return
    try:
        inventory: Inventory | None = inventory_of(config)
    except pytest.UsageError:
        inventory = None  # reported at collection; meanwhile no shell step is vouched for
    lines = sweep(inventory=inventory, helpers=True)
    writer = config.get_terminal_writer()
    for line in lines:
        writer.line(f"faultkit sweep (faults a previous harness left applied): {line}")
