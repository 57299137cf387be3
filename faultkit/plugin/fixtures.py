"""The plugin's fixtures: settings, inventory, runs directory, load profile, live status,
the ``experiment`` itself, and the session's candidate serving config.

Contract:

- ``faultkit_settings`` / ``faultkit_inventory`` / ``runs_dir`` (session): the resolved
  settings; the inventory as the scenarios see it (the candidate config on the selected
  node with ``--serving-config``, Prometheus overridden by ``--prometheus-url``); the runs
  directory, created.
- ``faultkit_soak_s``: how long a ``soak`` scenario soaks (the settings' ``soak_s``).
- ``faultkit_current_context_limit``: the context limit per request (tokens) of the config
  the node served before this candidate (the settings' ``current_context_limit``), or None.
- ``load_profile``: the ``load_profile`` marker, else ``--load-profile``, else the
  background profile; a bad profile is a :class:`pytest.UsageError`.
- ``faultkit_live``: the test's :class:`~faultkit.experiment.live.LiveStatus`, attached to the
  session's live line while the test runs (when there is one).
- ``experiment``: an :class:`~faultkit.experiment.Experiment` on ``node`` with a
  fresh run directory; ``faultkit_run_dir`` (and, once rendered at teardown,
  ``faultkit_report``) are added to the test's user properties.
- ``_candidate_serving_config`` (session, autouse): with ``--serving-config`` in a session
  that uses faultkit, the candidate is rolled onto the node for the session and rolled
  back at its end (not under ``--dry-run``).

Light: the harness (the experiment, run directories, load profiles, the candidate
session) is imported when a fixture runs, never at import time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from faultkit.experiment.live import LiveStatus
from faultkit.plugin.nodes import selected_nodes, with_candidate
from faultkit.plugin.settings import Settings
from faultkit.plugin.state import LIVE_KEY, inventory_of, is_used, settings_of
from faultkit.plugin.status import attach

if TYPE_CHECKING:
    from faultkit.experiment import Experiment
    from faultkit.inventory import Inventory, Node
    from faultkit.load.profile import LoadProfile


@pytest.fixture(scope="session")
def faultkit_settings(request: pytest.FixtureRequest) -> Settings:
    return settings_of(request.config)


@pytest.fixture(scope="session")
def faultkit_inventory(request: pytest.FixtureRequest) -> Inventory:
    inventory = with_candidate(request.config, inventory_of(request.config))
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


@pytest.fixture
def faultkit_soak_s(faultkit_settings: Settings) -> float | None:
    """How long a ``soak`` scenario soaks, in seconds (``--soak-s``, ``$FAULTKIT_SOAK_S``,
    ini); ``None`` when none was given, and the ``soak`` scenarios are then deselected."""
    return faultkit_settings.soak_s


@pytest.fixture
def faultkit_current_context_limit(faultkit_settings: Settings) -> int | None:
    """The context limit per request, in tokens, of the config the node served before this
    candidate (``--current-context-limit``, ``$FAULTKIT_CURRENT_CONTEXT_LIMIT``, ini; the
    gate gives it); ``None`` when none was given. ``test_limits`` judges the candidate
    against it (``current_limit_served``)."""
    return faultkit_settings.current_context_limit


@pytest.fixture
def load_profile(
    faultkit_settings: Settings, request: pytest.FixtureRequest, node: Node
) -> LoadProfile:
    """Background load for scenarios: the ``load_profile`` marker, else --load-profile, else
    :data:`~faultkit.load.profile.BACKGROUND_PROFILE` (open loop, 10 req/s) at the node's
    ``background_rate`` when the inventory gives one."""
    import dataclasses

    from faultkit.load.profile import BACKGROUND_PROFILE, LoadProfile

    marker = request.node.get_closest_marker("load_profile")
    text = marker.args[0] if marker else faultkit_settings.load_profile
    if text:
        try:
            # one connection per request unless the profile says otherwise (LoadProfile)
            return LoadProfile.from_string(text, reuse_connections=False)
        except ValueError as exc:
            raise pytest.UsageError(f"load profile {text!r}: {exc}") from exc
    if node.background_rate is not None:
        return dataclasses.replace(BACKGROUND_PROFILE, rate=node.background_rate)
    return BACKGROUND_PROFILE


@pytest.fixture
def faultkit_live(request: pytest.FixtureRequest) -> Iterator[LiveStatus]:
    """This test's live status (:class:`~faultkit.experiment.live.LiveStatus`), shown on the
    terminal while the test runs when the session draws live lines. The ``experiment``
    fixture feeds it; a scenario may set a phase of its own (``faultkit_live.phase(…)``)."""
    status = LiveStatus(label=request.node.name.removeprefix("test_"))
    line = request.config.stash.get(LIVE_KEY, None)
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
    from faultkit.experiment import Experiment
    from faultkit.rundir import RunDir

    name = request.node.originalname.removeprefix("test_")
    try:
        run = RunDir.create(runs_dir, name, node.name)
    except OSError as exc:  # one line, not a traceback: nothing has acted yet
        pytest.fail(f"cannot create a run directory under {runs_dir} ({exc.strerror or exc}); "
                    "nothing was injected", pytrace=False)
    exp = Experiment(
        scenario=name,
        node=node,
        inventory=faultkit_inventory,
        run=run,
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


@pytest.fixture(scope="session", autouse=True, name="_candidate_serving_config")
def candidate_serving_config(request: pytest.FixtureRequest) -> Iterator[None]:
    """With --serving-config, roll the candidate onto the node for the session (unless it
    already runs it, as under ``faultkit gate``) and roll it back at the end."""
    if not is_used(request.config):
        yield
        return
    settings = settings_of(request.config)
    if not settings.serving_config or settings.dry_run:
        yield
        return
    from faultkit.experiment.candidate import CandidateSession

    inventory = inventory_of(request.config)
    (node,) = selected_nodes(request.config, inventory)
    session = CandidateSession(node, inventory, settings.serving_config)
    error = session.start()
    if error is not None:  # rolled back already: the session's scenarios would judge nothing
        pytest.exit(error, returncode=1)
    try:
        yield
    finally:
        session.stop()
