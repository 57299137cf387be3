"""What pytest shows of faultkit: the report header, dry-run skips, verdict statuses and
the terminal summary.

Contract:

- The header (inventory, nodes, Prometheus, runs directory, ``DRY RUN``) is shown by
  :func:`pytest_report_header` when the configuration says the session uses faultkit,
  else by :func:`pytest_report_collectionfinish` once a collected test does (not with
  ``-q`` or ``--no-header``); an invalid inventory shows as ``(INVALID)``.
- :func:`pytest_runtest_call` turns a :class:`~faultkit.experiment.outcomes.DryRunPlan` into a
  skip whose reason is the plan.
- :func:`pytest_runtest_makereport` stamps the call report with the experiment's verdict
  and :func:`pytest_report_teststatus` gives INCONCLUSIVE (a failure) and ACCEPTED (a
  pass) their own status (the pure pieces are :mod:`faultkit.plugin.status`).
- :func:`pytest_terminal_summary` lists INCONCLUSIVE and ACCEPTED tests and the incident
  reports written.

Light: pytest and the standard library at import time.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from typing import Any

import pytest

from faultkit.experiment.outcomes import DryRunPlan
from faultkit.plugin.nodes import selected_nodes
from faultkit.plugin.state import (
    SOAKS_DESELECTED_KEY,
    inventory_of,
    is_used,
    items_use_faultkit,
    settings_of,
)
from faultkit.plugin.status import (
    accepted_lines,
    inconclusive_lines,
    record_verdict,
    verdict_status,
)


def header_lines(config: pytest.Config) -> list[str]:
    """The report header: inventory, nodes, Prometheus, runs directory (and DRY RUN)."""
    settings = settings_of(config)
    try:
        inventory = inventory_of(config)
    except pytest.UsageError:
        return [f"faultkit: inventory {settings.inventory} (INVALID)"]
    nodes = ", ".join(n.name for n in selected_nodes(config, inventory))
    prom = settings.prometheus_url or inventory.prometheus.url
    return [
        f"faultkit: inventory {settings.inventory} ({settings.inventory_source})",
        f"faultkit: nodes {nodes}; Prometheus {prom}; runs in {settings.runs_dir}"
        + ("; DRY RUN" if settings.dry_run else ""),
    ]


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The inventory, nodes, Prometheus and runs directory, when the configuration says the
    session uses faultkit (else at the end of collection, if a test turns out to)."""
    return header_lines(config) if is_used(config) else []


def pytest_report_collectionfinish(
    config: pytest.Config, items: Sequence[pytest.Item]
) -> list[str]:
    """The report header, late: the configuration did not say faultkit is used, a test does;
    and how many soak scenarios were deselected for want of ``--soak-s``."""
    if config.option.no_header:
        return []
    lines: list[str] = []
    if not is_used(config) and items_use_faultkit(items) and config.option.verbose >= 0:
        lines = header_lines(config)
    soaks = config.stash.get(SOAKS_DESELECTED_KEY, 0)
    if soaks:
        lines.append(f"faultkit: {soaks} soak scenario{'s' * (soaks != 1)} deselected "
                     "(give --soak-s SECONDS to run them; faultkit gate does)")
    return lines


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    try:
        return (yield)
    except DryRunPlan as plan:
        pytest.skip(f"dry run: {plan}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Stamp the call report with the experiment's verdict (``faultkit_verdict``); an
    INCONCLUSIVE verdict makes it a failure whose message says what evidence was missing."""
    report = yield
    record_verdict(item, report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport) -> tuple[str, str, str] | None:
    """INCONCLUSIVE tests get their own status (counted as failures all the same);
    ACCEPTED ones are shown as such (counted as passes)."""
    return verdict_status(report)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    inconclusive = terminalreporter.getreports("inconclusive")
    if inconclusive:
        terminalreporter.section("faultkit: INCONCLUSIVE (counted as failures)", yellow=True)
        for line in inconclusive_lines(inconclusive):
            terminalreporter.line(line)
    accepted = accepted_lines(terminalreporter.getreports("passed"))
    if accepted:
        terminalreporter.section("faultkit: ACCEPTED (known findings, counted as passes)")
        for line in accepted:
            terminalreporter.line(line)
    # faultkit_report is added at fixture teardown, so it is on the teardown reports
    # (category ""), not on the call reports
    reports = [
        value
        for category in terminalreporter.stats.values()
        for report in category
        for key, value in getattr(report, "user_properties", ())
        if key == "faultkit_report"
    ]
    if reports:
        terminalreporter.section("faultkit incident reports")
        for path in sorted(set(reports)):
            terminalreporter.line(str(path))
