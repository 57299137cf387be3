"""The faultkit pytest plugin: options, markers, inventory and node fixtures, run directories.

An adapter: the experiment itself (load, fault, observer, measurement, verdict, incident
report) is the runner, :mod:`faultkit.experiment`, which knows nothing of pytest. The
plugin builds one per test, finalizes it at teardown and reports its verdict.

Registered through the ``pytest11`` entry point, so pytest loads it in every project of an
environment where faultkit is installed. It is light on purpose (hypothesis' pattern):
importing it imports pytest and the standard library only — the harness (Docker, aiohttp,
Prometheus, the reports) is imported by the fixtures and hooks that need it, when they
run. And it does nothing unless the session uses faultkit (:func:`used_by_configuration`,
:func:`uses_faultkit`): the rootdir's ini sets ``faultkit = true``, ``--inventory``,
``--node`` or ``--serving-config`` is given, or a collected test requests the
``experiment``, ``node`` or ``faultkit_live`` fixture or carries a ``fault`` marker.
Otherwise no report header, no journal sweep, no inventory loaded.

Settings resolve as marker > command line > ``FAULTKIT_*`` environment > ini > default.

Scenarios ask for ``node`` (parametrised over every inventory node whose allowlist
permits the test's ``@pytest.mark.fault(kind)``, so ids read ``test_kill[sim-vllm]``; with
``@pytest.mark.node_kind("gateway")`` only over the nodes of that kind) and
``experiment`` (load + fault + observer + measurement + incident report for that node).

Before the first test that uses the harness runs, the journal is swept (faults a killed
harness left applied are reverted; :func:`sweep_left_faults`) — never with
``--collect-only`` or ``--dry-run``.

A scenario whose verdict is INCONCLUSIVE (evidence was missing) is reported apart from
FAIL — status ``inconclusive`` / ``I`` / ``INCONCLUSIVE``, JUnit failure message
``INCONCLUSIVE: …`` and property ``faultkit_verdict`` — and still fails the run
(:mod:`faultkit.plugin.status`). A scenario whose failures are all accepted findings of
the node (``accepted_findings`` in the inventory) is ACCEPTED: a pass, shown as ``A`` /
``ACCEPTED`` with property ``faultkit_verdict=ACCEPTED``.

While a scenario runs, a terminal shows its live status on one line under pytest's own —
phase, elapsed time, requests ok/failed in the last second, node readiness, alerts firing —
erased before pytest writes the test's result (:mod:`faultkit.experiment.live`,
:mod:`faultkit.plugin.terminal`; ``--faultkit-live=auto|on|off``).

This module is what pytest registers as the plugin: hooks and fixtures are found by name
on it, so it imports each one from the module that implements it —

- :mod:`faultkit.plugin.options` — command-line options, ini keys, markers;
- :mod:`faultkit.plugin.state` — is faultkit used, the session's settings and inventory;
- :mod:`faultkit.plugin.nodes` — node selection and the ``node`` parametrisation;
- :mod:`faultkit.plugin.fixtures` — the fixtures (``experiment`` and its inputs);
- :mod:`faultkit.plugin.collection` — the end of collection: journal sweep, live line;
- :mod:`faultkit.plugin.reporting` — header, dry-run skips, verdict statuses, summary.

It also offers the runner's types its fixtures hand out (``Experiment``, imported on first
use; ``LiveStatus``; ``DryRunPlan``); their home is :mod:`faultkit.experiment`.
"""


from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Each hook and fixture below is imported under its own name (``name as name``: an explicit
# re-export), since pytest finds them as attributes of this module; so are the names this
# module offers its users.
from faultkit.experiment.live import LiveStatus as LiveStatus
from faultkit.experiment.outcomes import DryRunPlan as DryRunPlan
from faultkit.plugin.collection import (
    pytest_collection_finish as pytest_collection_finish,
)
from faultkit.plugin.collection import (
    pytest_collection_modifyitems as pytest_collection_modifyitems,
)
from faultkit.plugin.collection import sweep_left_faults as sweep_left_faults
from faultkit.plugin.fixtures import candidate_serving_config as candidate_serving_config
from faultkit.plugin.fixtures import experiment as experiment
from faultkit.plugin.fixtures import (
    faultkit_current_context_limit as faultkit_current_context_limit,
)
from faultkit.plugin.fixtures import faultkit_inventory as faultkit_inventory
from faultkit.plugin.fixtures import faultkit_live as faultkit_live
from faultkit.plugin.fixtures import faultkit_settings as faultkit_settings
from faultkit.plugin.fixtures import faultkit_soak_s as faultkit_soak_s
from faultkit.plugin.fixtures import load_profile as load_profile
from faultkit.plugin.fixtures import runs_dir as runs_dir
from faultkit.plugin.nodes import pytest_generate_tests as pytest_generate_tests
from faultkit.plugin.nodes import selected_nodes as selected_nodes
from faultkit.plugin.options import pytest_addoption as pytest_addoption
from faultkit.plugin.options import pytest_configure as pytest_configure
from faultkit.plugin.reporting import (
    pytest_report_collectionfinish as pytest_report_collectionfinish,
)
from faultkit.plugin.reporting import pytest_report_header as pytest_report_header
from faultkit.plugin.reporting import pytest_report_teststatus as pytest_report_teststatus
from faultkit.plugin.reporting import pytest_runtest_call as pytest_runtest_call
from faultkit.plugin.reporting import pytest_runtest_makereport as pytest_runtest_makereport
from faultkit.plugin.reporting import pytest_terminal_summary as pytest_terminal_summary
from faultkit.plugin.settings import LIVE_MODES as LIVE_MODES
from faultkit.plugin.settings import Settings as Settings
from faultkit.plugin.settings import resolve_settings as resolve_settings
from faultkit.plugin.state import FAULTKIT_FIXTURES as FAULTKIT_FIXTURES
from faultkit.plugin.state import inventory_of as inventory_of
from faultkit.plugin.state import is_used as is_used
from faultkit.plugin.state import settings_of as settings_of
from faultkit.plugin.state import used_by_configuration as used_by_configuration
from faultkit.plugin.state import uses_faultkit as uses_faultkit
from faultkit.plugin.status import accepted_lines as accepted_lines
from faultkit.plugin.status import attach as attach
from faultkit.plugin.status import inconclusive_lines as inconclusive_lines
from faultkit.plugin.status import record_verdict as record_verdict
from faultkit.plugin.status import verdict_status as verdict_status
from faultkit.plugin.terminal import LiveLine as LiveLine
from faultkit.plugin.terminal import start_live as start_live

if TYPE_CHECKING:
    from faultkit.experiment import Experiment

__all__ = ["DryRunPlan", "Experiment", "LiveStatus", "Settings"]


def __getattr__(name: str) -> Any:
    """``faultkit.plugin.Experiment``, imported on first use (it pulls in the harness)."""
    if name == "Experiment":
        from faultkit.experiment import Experiment

        return Experiment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
