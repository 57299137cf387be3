"""The plugin's command-line options, ini keys and markers.

Contract:

- :func:`pytest_addoption` adds the ``faultkit`` option group: ``--inventory``,
  ``--node``, ``--prometheus-url``, ``--runs-dir``, ``--load-profile``,
  ``--serving-config``, ``--soak-s``, ``--current-context-limit`` (each with a
  ``faultkit_*`` ini key of the same name),
  ``--dry-run`` and ``--faultkit-live`` (ini ``faultkit_dry_run``, ``faultkit_live``),
  and the ``faultkit`` ini flag (this rootdir's tests use faultkit). How they resolve
  against the environment is :mod:`faultkit.plugin.settings`.
- :func:`pytest_configure` registers the markers (``docker``, ``fault``, ``gate``,
  ``slow``, ``soak``, ``exclusive``, ``host_wide``, ``per_docker_host``, ``node_kind``,
  ``load_profile``) and
  records whether the configuration alone says the session uses faultkit
  (:func:`faultkit.plugin.state.used_by_configuration`).

Light: pytest and the standard library at import time.
"""

from __future__ import annotations

import pytest

from faultkit.plugin.settings import LIVE_MODES
from faultkit.plugin.state import USED_KEY, used_by_configuration


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
        (
            "--soak-s",
            "soak_s",
            "run the soak scenarios (marked soak: test_soak) for this long, e.g. 60 or 10m "
            "(without it they are deselected; faultkit gate gives it)",
        ),
        (
            "--current-context-limit",
            "current_context_limit",
            "TOKENS: the context limit per request of the config the node served before this "
            "candidate; test_limits also sends a prompt at it when it is above the candidate's "
            "own limit, which must be answered in full",
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
        "markers", "soak: runs for --soak-s seconds; deselected unless --soak-s is given"
    )
    config.addinivalue_line(
        "markers",
        "exclusive: acts on or loads several nodes at once: never run beside another "
        "scenario (see faultkit.lanes)",
    )
    config.addinivalue_line(
        "markers",
        "host_wide: an exclusive scenario that acts on every node of one Docker host and loads "
        "only the node under test: a lane holding all of that host's nodes may run it "
        "(see faultkit.lanes)",
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
    config.stash[USED_KEY] = used_by_configuration(config)
    check_soak_duration(config)
    check_current_context_limit(config)


def check_soak_duration(config: pytest.Config) -> None:
    """A bad ``--soak-s`` (or ``$FAULTKIT_SOAK_S``, ini) is one usage error at start-up, not
    an error per collected module later (parsing a duration is light)."""
    import os

    from faultkit.plugin.settings import soak_seconds

    soak_seconds(config, os.environ)


def check_current_context_limit(config: pytest.Config) -> None:
    """A bad ``--current-context-limit`` (or ``$FAULTKIT_CURRENT_CONTEXT_LIMIT``, ini) is
    one usage error at start-up, as a bad ``--soak-s`` is."""
    import os

    from faultkit.plugin.settings import current_context_limit

    current_context_limit(config, os.environ)
