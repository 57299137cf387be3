"""The faultkit pytest plugin: options, markers, inventory and node fixtures, run directories.

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
erased before pytest writes the test's result (:mod:`faultkit.plugin.live`,
:mod:`faultkit.plugin.terminal`; ``--faultkit-live=auto|on|off``).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from faultkit.plugin.live import LiveStatus
from faultkit.plugin.settings import LIVE_MODES, Settings, resolve_settings
from faultkit.plugin.status import (
    DryRunPlan,
    accepted_lines,
    attach,
    inconclusive_lines,
    record_verdict,
    verdict_status,
)
from faultkit.plugin.terminal import LiveLine, start_live

if TYPE_CHECKING:
    from faultkit.errors import InventoryError
    from faultkit.inventory import Inventory, Node
    from faultkit.load.profile import LoadProfile
    from faultkit.plugin.experiment import Experiment

__all__ = ["DryRunPlan", "Experiment", "LiveStatus", "Settings"]

_SETTINGS_KEY = pytest.StashKey[Settings]()
_INVENTORY_KEY = pytest.StashKey["Inventory | InventoryError"]()
_USED_KEY = pytest.StashKey[bool]()
_LIVE_KEY = pytest.StashKey[LiveLine]()

#: fixtures that mean a test uses the harness
FAULTKIT_FIXTURES = frozenset({"experiment", "node", "faultkit_live"})
#: command-line options that mean the session uses faultkit
_USE_OPTIONS = ("inventory", "node", "serving_config")


def __getattr__(name: str) -> Any:
    """``faultkit.plugin.Experiment``, imported on first use (it pulls in the harness)."""
    if name == "Experiment":
        from faultkit.plugin.experiment import Experiment

        return Experiment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("faultkit", "faultkit fault scenarios")
    options = (
        ("--inventory", "inventory", "inventory YAML (default: the testbed's)"),
        ("--node", "node", "only these nodes (comma-separated names)"),
        ("--prometheus-url", "prometheus_url", "override the inventory's Prometheus URL"),
        ("--runs-dir", "runs_dir", "where run directories go (default: runs)"),
        (
            "--load-profile",
            "load_profile",
            'background load, e.g. "concurrency=4,output_tokens=32"',
        ),
        (
            "--serving-config",
            "serving_config",
            "run against this serving config: rolled onto the (single) --node for the session, "
            "then rolled back",
        ),
    )
    for flag, name, help_text in options:
        group.addoption(flag, dest=f"faultkit_{name}", default=None, help=help_text)
        parser.addini(f"faultkit_{name}", help=help_text, default=None)
    group.addoption(
        "--dry-run",
        dest="faultkit_dry_run",
        action="store_true",
        default=None,
        help="print each scenario's fault plan and act on nothing",
    )
    parser.addini("faultkit_dry_run", type="bool", default=False, help="dry run (see --dry-run)")
    live_help = (
        "a running scenario's live status line (phase, elapsed, requests, node, alerts): "
        "auto = on a terminal (not CI, not -s, not log_cli, not an xdist worker), "
        "on = whatever the output, off = never (default: auto)"
    )
    group.addoption(
        "--faultkit-live", dest="faultkit_live", default=None, choices=LIVE_MODES, help=live_help
    )
    parser.addini("faultkit_live", help=live_help, default=None)
    parser.addini(
        "faultkit",
        type="bool",
        default=False,
        help="this rootdir's tests use faultkit: show its report header from the start "
        "(otherwise the plugin stays idle until a test uses the experiment or node fixture "
        "or a fault marker)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs a Docker engine and the testbed")
    config.addinivalue_line(
        "markers",
        "fault(kind): the fault this scenario injects; nodes whose allowlist omits it are not run",
    )
    config.addinivalue_line("markers", "gate: part of the pre-promotion gate (`faultkit gate`)")
    config.addinivalue_line("markers", "slow: takes more than a minute")
    config.addinivalue_line(
        "markers",
        "exclusive: acts on or loads several nodes at once: never run beside another "
        "scenario (see faultkit.lanes)",
    )
    config.addinivalue_line(
        "markers", "per_docker_host: run once per Docker host (its first node), not per node"
    )
    config.addinivalue_line(
        "markers",
        "node_kind(kind): only nodes of this kind (engine, gateway), e.g. a scenario that "
        "judges a gateway while it breaks one of its upstreams",
    )
    config.addinivalue_line(
        "markers",
        "load_profile(text): background load for this scenario, e.g. 'rate=50,duration_s=20'",
    )
    config.stash[_USED_KEY] = used_by_configuration(config)


# --------------------------------------------------------------------------- is faultkit used?


def used_by_configuration(config: pytest.Config) -> bool:
    """The rootdir's ini sets ``faultkit = true``, or ``--inventory``, ``--node`` or
    ``--serving-config`` is on the command line."""
    if config.getini("faultkit"):
        return True
    return any(config.getoption(f"faultkit_{name}", None) is not None for name in _USE_OPTIONS)


def uses_faultkit(item: pytest.Item) -> bool:
    """``item`` requests the ``experiment``, ``node`` or ``faultkit_live`` fixture, or
    carries a ``fault`` marker."""
    fixtures = getattr(item, "fixturenames", ())
    return bool(FAULTKIT_FIXTURES.intersection(fixtures)) or (
        item.get_closest_marker("fault") is not None
    )


def _items_use_faultkit(items: Iterable[pytest.Item]) -> bool:
    return any(uses_faultkit(item) for item in items)


def is_used(config: pytest.Config) -> bool:
    """Whether this session uses faultkit (as far as is known yet: before collection ends,
    only its configuration can say)."""
    return config.stash.get(_USED_KEY, False)


# --------------------------------------------------------------------------- settings, inventory


def settings_of(config: pytest.Config) -> Settings:
    """The session's settings (resolved once, on first use)."""
    if _SETTINGS_KEY not in config.stash:
        config.stash[_SETTINGS_KEY] = resolve_settings(config, os.environ)
    return config.stash[_SETTINGS_KEY]


def inventory_of(config: pytest.Config) -> Inventory:
    """The session's inventory (loaded once); a bad file is a usage error, never a pass."""
    from faultkit.errors import InventoryError
    from faultkit.inventory import load_inventory

    if _INVENTORY_KEY not in config.stash:
        settings = settings_of(config)
        try:
            inventory: Inventory | InventoryError = load_inventory(settings.inventory)
        except InventoryError as exc:
            inventory = exc
        config.stash[_INVENTORY_KEY] = inventory
    loaded = config.stash[_INVENTORY_KEY]
    if isinstance(loaded, InventoryError):
        raise pytest.UsageError(
            f"faultkit inventory ({settings_of(config).inventory_source}):\n{loaded}"
        )
    return loaded


def _header_lines(config: pytest.Config) -> list[str]:
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
    return _header_lines(config) if is_used(config) else []


def pytest_report_collectionfinish(
    config: pytest.Config, items: Sequence[pytest.Item]
) -> list[str]:
    """The report header, late: the configuration did not say faultkit is used, a test does."""
    if is_used(config) or not _items_use_faultkit(items):
        return []
    if config.option.verbose < 0 or config.option.no_header:
        return []
    return _header_lines(config)


def selected_nodes(config: pytest.Config, inventory: Inventory) -> list[Node]:
    wanted = settings_of(config).nodes
    if not wanted:
        return list(inventory.nodes)
    unknown = [n for n in wanted if n not in inventory.node_names]
    if unknown:
        raise pytest.UsageError(
            f"--node names {', '.join(unknown)}, not in {inventory.source} "
            f"(nodes: {', '.join(inventory.node_names)})"
        )
    return [n for n in inventory.nodes if n.name in wanted]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "node" not in metafunc.fixturenames:
        return
    inventory = _with_candidate(metafunc.config, inventory_of(metafunc.config))
    marker = metafunc.definition.get_closest_marker("fault")
    kind = marker.args[0] if marker and marker.args else None
    nodes = [
        n for n in selected_nodes(metafunc.config, inventory) if kind is None or n.allows(kind)
    ]
    node_kind = metafunc.definition.get_closest_marker("node_kind")
    if node_kind is not None:
        nodes = [n for n in nodes if n.kind in node_kind.args]
    only = metafunc.definition.get_closest_marker("nodes")
    if only is not None:
        nodes = [n for n in nodes if n.name in only.args]
    if "candidate_config" in metafunc.fixturenames:
        pairs = [(n, c) for n in nodes for c in n.candidate_configs if c != n.serving_config]
        metafunc.parametrize(
            ("node", "candidate_config"), pairs, ids=[f"{n.name}:{c}" for n, c in pairs]
        )
        return
    if metafunc.definition.get_closest_marker("per_docker_host") is not None:
        seen: set[str] = set()
        per_host = []
        for n in nodes:
            host = n.docker.host if n.docker else n.name
            if host not in seen:
                seen.add(host)
                per_host.append(n)
        nodes = per_host
    metafunc.parametrize("node", nodes, ids=[n.name for n in nodes])


def _with_candidate(config: pytest.Config, inventory: Inventory) -> Inventory:
    """With --serving-config, the selected node is described as running the candidate."""
    name = settings_of(config).serving_config
    if not name:
        return inventory
    nodes = selected_nodes(config, inventory)
    if len(nodes) != 1:
        raise pytest.UsageError("--serving-config needs exactly one node: add --node NAME")
    if name not in inventory.serving_configs:
        raise pytest.UsageError(
            f"--serving-config {name!r} is not in {inventory.source} "
            f"(have: {', '.join(sorted(inventory.serving_configs))})"
        )
    target = nodes[0]
    swapped = [
        n.model_copy(update={"serving_config": name}) if n.name == target.name else n
        for n in inventory.nodes
    ]
    return inventory.model_copy(update={"nodes": swapped})


@pytest.fixture(scope="session")
def faultkit_settings(request: pytest.FixtureRequest) -> Settings:
    return settings_of(request.config)


@pytest.fixture(scope="session")
def faultkit_inventory(request: pytest.FixtureRequest) -> Inventory:
    inventory = _with_candidate(request.config, inventory_of(request.config))
    override = settings_of(request.config).prometheus_url
    if override:
        inventory = inventory.model_copy(
            update={"prometheus": inventory.prometheus.model_copy(update={"url": override})}
        )
    return inventory


@pytest.fixture(scope="session")
def runs_dir(faultkit_settings: Settings) -> Path:
    path = faultkit_settings.runs_dir
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- experiments


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Once collection shows that a test uses the harness: the session uses faultkit, the
    journal is swept before that test runs (:func:`sweep_left_faults`), and the live status
    line is set up (between tests, as it must be: :func:`faultkit.plugin.terminal.start_live`)."""
    if not _items_use_faultkit(session.items):
        return
    session.config.stash[_USED_KEY] = True
    sweep_left_faults(session.config)
    if not session.config.option.collectonly:
        line = start_live(session.config, settings_of(session.config).live)
        if line is not None:
            session.config.stash[_LIVE_KEY] = line


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
    lines = sweep(inventory=inventory)
    writer = config.get_terminal_writer()
    for line in lines:
        writer.line(f"faultkit sweep (faults a previous harness left applied): {line}")


@pytest.fixture
def load_profile(faultkit_settings: Settings, request: pytest.FixtureRequest) -> LoadProfile:
    """Background load for scenarios: the ``load_profile`` marker, else --load-profile, else
    :data:`~faultkit.load.profile.BACKGROUND_PROFILE` (open loop, 10 req/s)."""
    from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile

    marker = request.node.get_closest_marker("load_profile")
    text = marker.args[0] if marker else faultkit_settings.load_profile
    if text:
        try:
            return LoadProfile.from_string(text)
        except ValueError as exc:
            raise pytest.UsageError(f"load profile {text!r}: {exc}") from exc
    return BACKGROUND_PROFILE


@pytest.fixture
def faultkit_live(request: pytest.FixtureRequest) -> Iterator[LiveStatus]:
    """This test's live status (:class:`~faultkit.plugin.live.LiveStatus`), shown on the
    terminal while the test runs when the session draws live lines. The ``experiment``
    fixture feeds it; a scenario may set a phase of its own (``faultkit_live.phase(…)``)."""
    status = LiveStatus(label=request.node.name.removeprefix("test_"))
    line = request.config.stash.get(_LIVE_KEY, None)
    if line is None:
        yield status
        return
    line.attach(status)
    try:
        yield status
    finally:
        line.detach(status)


@pytest.fixture
def experiment(
    request: pytest.FixtureRequest,
    node: Node,
    faultkit_inventory: Inventory,
    faultkit_settings: Settings,
    runs_dir: Path,
    load_profile: LoadProfile,
    faultkit_live: LiveStatus,
) -> Iterator[Experiment]:
    """An :class:`Experiment` on ``node``; its incident report is rendered at teardown."""
    from faultkit.plugin.experiment import Experiment
    from faultkit.rundir import RunDir

    name = request.node.originalname.removeprefix("test_")
    exp = Experiment(
        scenario=name,
        node=node,
        inventory=faultkit_inventory,
        run=RunDir.create(runs_dir, name, node.name),
        load_profile=load_profile,
        dry_run=faultkit_settings.dry_run,
        case=_case_id(request.node),
        live=faultkit_live,
    )
    request.node.user_properties.append(("faultkit_run_dir", str(exp.run.path)))
    attach(request.node, exp)
    yield exp
    exp.finalize()
    if exp.run.incident_md.exists():
        request.node.user_properties.append(("faultkit_report", str(exp.run.incident_md)))


def _case_id(item: pytest.Item) -> str | None:
    """``llama`` for ``test_bad_input[llama]``; ``None`` for a test without parameters."""
    callspec = getattr(item, "callspec", None)
    return getattr(callspec, "id", None)


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


@pytest.fixture(scope="session", autouse=True)
def _candidate_serving_config(request: pytest.FixtureRequest) -> Iterator[None]:
    """With --serving-config, roll the candidate onto the node for the session (unless it
    already runs it, as under ``faultkit gate``) and roll it back at the end."""
    if not is_used(request.config):
        yield
        return
    settings = settings_of(request.config)
    if not settings.serving_config or settings.dry_run:
        yield
        return
    from faultkit.plugin.candidate import CandidateSession

    inventory = inventory_of(request.config)
    (node,) = selected_nodes(request.config, inventory)
    session = CandidateSession(node, inventory, settings.serving_config)
    session.start()
    try:
        yield
    finally:
        session.stop()
