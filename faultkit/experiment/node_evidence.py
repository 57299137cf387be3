"""What a run records about its node besides the ledger and the measurement.

:class:`NodeEvidence` reads the node's container through its Docker host, every secret
the inventory knows redacted; :func:`first_run_info` is what ``run.json`` says of a run
before anything happened.

Contract:

- :meth:`NodeEvidence.container_state` / :meth:`NodeEvidence.log_tail` — the container's
  state and the last :data:`~faultkit.model.runfiles.LOG_TAIL_LINES` lines of its log since
  the run began, for ``container.json``; ``None`` / ``""`` for a node without a container,
  the error (redacted) when Docker cannot say.
- :meth:`NodeEvidence.docker_clock` — the Docker host's clock against this machine's, or
  ``None`` (logged) when it cannot be read.
- :func:`container_timeline` — Docker's own container events of the given nodes over the
  run, as timeline events (:mod:`faultkit.docker.events`); Docker being
  unreadable is logged, never fatal.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from faultkit.docker.events import container_events
from faultkit.docker.host import docker_host
from faultkit.errors import FaultkitError
from faultkit.inventory import Inventory, Node, config_hash
from faultkit.load import LoadProfile
from faultkit.model.records import Event
from faultkit.model.runfiles import LOG_TAIL_LINES, startup_lines
from faultkit.probes.clockread import ClockReading
from faultkit.rundir import RunInfo

__all__ = ["NodeEvidence", "container_timeline", "first_run_info", "harness_version"]

#: the runner's logger (faultkit.experiment.lifecycle writes to it too)
log = logging.getLogger("faultkit.experiment")


@dataclass(frozen=True)
class NodeEvidence:
    """The container evidence of ``node`` for a run that began at ``since`` (epoch s)."""

    node: Node
    inventory: Inventory
    since: float

    def redact(self, data: Any) -> Any:
        """``data`` with secrets redacted, the inventory's known secret values included
        (every node's API key, secret-named serving-config env values)."""
        from reports.text import known_secrets, redact_data

        return redact_data(data, known_secrets(self.inventory))

    def container_state(self) -> dict[str, Any] | None:
        """The container's state for ``container.json``, secrets redacted."""
        if self.node.docker is None:
            return None
        try:
            state = docker_host(self.node.docker.host).state(self.node.docker.container)
            return dict(self.redact(state.to_json()))
        except FaultkitError as exc:
            return {"error": self.redact(str(exc))}

    def docker_clock(self) -> ClockReading | None:
        """The node's Docker host's clock against this machine's; None when it cannot be
        read (the container check reports an engine that does not answer)."""
        if self.node.docker is None:
            return None
        try:
            return docker_host(self.node.docker.host).clock_reading()
        except FaultkitError as exc:
            log.warning("could not read the clock of %s: %s", self.node.docker.host, exc)
            return None

    def log_tail(self) -> str:
        """The container log's last lines written since the run began, secrets redacted:
        engines print their arguments at start-up (vLLM's ``args: Namespace(api_key=...)``),
        and a line from before the run is not this run's evidence (a diagnosis quotes it)."""
        if self.node.docker is None:
            return ""
        try:
            tail = docker_host(self.node.docker.host).logs(
                self.node.docker.container, tail=LOG_TAIL_LINES, since=self.since)
            return str(self.redact(tail))
        except FaultkitError as exc:
            return f"(logs unavailable: {self.redact(str(exc))})"


    def startup_log(self) -> str:
        """The first :data:`~faultkit.model.runfiles.STARTUP_LOG_LINES` lines the container
        wrote since its last start, when it started during the run, each with Docker's own
        timestamp (RFC 3339, UTC), secrets redacted; empty otherwise
        (:func:`~faultkit.model.runfiles.startup_lines`). The recovery phases of a
        restarted engine (weights loaded, engine ready) are dated from them, and a tail
        would have lost them under load behind per-request lines."""
        if self.node.docker is None:
            return ""
        host = docker_host(self.node.docker.host)
        try:
            started = host.state(self.node.docker.container).started_at
            if started is None or started < self.since:
                return ""
            answer = host.logs(self.node.docker.container, tail="all", since=started,
                               timestamps=True)
            return str(self.redact(startup_lines(answer, started)))
        except FaultkitError as exc:
            return f"(logs unavailable: {self.redact(str(exc))})"


def container_timeline(nodes: Iterable[Node | None], since: float, until: float) -> list[Event]:
    """Docker's own container events of each node (``None``s and nodes without a container
    skipped) between ``since`` and ``until``, as timeline events, node by node."""
    out: list[Event] = []
    for node in nodes:
        if node is None or node.docker is None:
            continue
        try:
            events = docker_host(node.docker.host).events(node.docker.container, since, until)
        except FaultkitError as exc:
            log.warning("could not read Docker events of %s: %s", node.name, exc)
            continue
        out.extend(container_events(events, node.name))
    return out


def first_run_info(
    *,
    scenario: str,
    case: str | None,
    node: Node,
    inventory: Inventory,
    load_profile: LoadProfile,
    t_start: float,
) -> RunInfo:
    """``run.json`` before the run: what ran, where, with which settings."""
    config = inventory.serving_configs.get(node.serving_config) if node.serving_config else None
    return RunInfo().updated(
        scenario=scenario,
        case=case,
        node=node.name,
        engine=node.engine,
        serving_config=node.serving_config,
        node_config_hash=config_hash(config),
        load_profile=dataclasses.asdict(load_profile),
        harness_version=harness_version(),
        prometheus_url=inventory.prometheus.url,
        scrape_interval_s=inventory.prometheus.scrape_interval_s,
        slo=inventory.slo_for(node).model_dump(),
        t_start=t_start,
    )


def harness_version() -> str:
    """The installed faultkit's version (``unknown`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("faultkit")
    except PackageNotFoundError:
        return "unknown"
