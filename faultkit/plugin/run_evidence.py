"""What a run records about its node besides the ledger and the measurement.

:class:`RunEvidence` is a base of :class:`~faultkit.plugin.experiment.Experiment`; its
methods read the experiment's fields (declared here for the type checker only).

Contract:

- ``_write_run_info(**changes)`` writes ``run.json`` (a :class:`~faultkit.rundir.RunInfo`):
  the scenario, node, engine, serving config and its hash, load profile, harness version,
  Prometheus, SLOs and ``t_start`` the first time, then ``changes`` (typed fields) over
  what is there.
- ``_container_state()`` / ``_log_tail()`` — the node's container state and the last 80
  lines of its log for ``container.json``, every secret the inventory knows redacted
  (``_redact``); ``None`` / ``""`` for a node without a container, the error (redacted)
  when Docker cannot say.
- ``_record_container_events(t_end)`` puts Docker's own container events over the run on
  the timeline (:mod:`faultkit.plugin.evidence`): the node's, and the faulted node's when
  the fault was injected elsewhere; Docker being unreadable is logged, never fatal.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from faultkit.clockread import ClockReading
from faultkit.docker import docker_host
from faultkit.errors import FaultkitError
from faultkit.inventory import Inventory, Node, SLOSettings, config_hash
from faultkit.load import LoadProfile
from faultkit.plugin.evidence import container_events
from faultkit.records import Event
from faultkit.rundir import RunDir, RunInfo

#: the logger the experiment has always written to (this code was part of its module)
log = logging.getLogger("faultkit.plugin.experiment")


class RunEvidence:
    """run.json, container.json's parts and Docker's events, for an experiment."""

    if TYPE_CHECKING:  # the experiment's (faultkit.plugin.experiment.Experiment)
        scenario: str
        case: str | None
        node: Node
        inventory: Inventory
        run: RunDir
        load_profile: LoadProfile
        fault_node: Node | None
        t_start: float

        @property
        def slo(self) -> SLOSettings: ...

        def emit(self, event: Event) -> None: ...

    def _record_container_events(self, t_end: float) -> None:
        """Put Docker's own container events for the run on the timeline (see ``evidence``):
        the node's, and the faulted node's when the fault was injected elsewhere."""
        for node in (self.node, self.fault_node):
            if node is None or node.docker is None:
                continue
            try:
                events = docker_host(node.docker.host).events(
                    node.docker.container, self.t_start, t_end
                )
            except FaultkitError as exc:
                log.warning("could not read Docker events of %s: %s", node.name, exc)
                continue
            for event in container_events(events, node.name):
                self.emit(event)

    def _container_state(self) -> dict[str, Any] | None:
        """The container's state for ``container.json``, secrets redacted (see ``_redact``)."""
        if self.node.docker is None:
            return None
        try:
            state = docker_host(self.node.docker.host).state(self.node.docker.container)
            return dict(self._redact(state.to_json()))
        except FaultkitError as exc:
            return {"error": self._redact(str(exc))}

    def _docker_clock(self) -> ClockReading | None:
        """The node's Docker host's clock against this machine's; None when it cannot be
        read (the container check reports an engine that does not answer)."""
        if self.node.docker is None:
            return None
        try:
            return docker_host(self.node.docker.host).clock_reading()
        except FaultkitError as exc:
            log.warning("could not read the clock of %s: %s", self.node.docker.host, exc)
            return None

    def _log_tail(self) -> str:
        """The container log's last 80 lines written since the run began, secrets
        redacted: engines print their arguments at start-up (vLLM's ``args:
        Namespace(api_key=...)``), and a line from before the run is not this run's
        evidence (a diagnosis quotes it)."""
        if self.node.docker is None:
            return ""
        try:
            tail = docker_host(self.node.docker.host).logs(
                self.node.docker.container, tail=80, since=self.t_start)
            return str(self._redact(tail))
        except FaultkitError as exc:
            return f"(logs unavailable: {self._redact(str(exc))})"

    def _redact(self, data: Any) -> Any:
        """``data`` with secrets redacted, the inventory's known secret values included
        (every node's API key, secret-named serving-config env values)."""
        from reports.text import known_secrets, redact_data

        return redact_data(data, known_secrets(self.inventory))

    def _write_run_info(self, **changes: Any) -> None:
        """Write ``run.json``: what ran, where, with which settings, the first time; then
        ``changes`` (typed :class:`~faultkit.rundir.RunInfo` fields) over what is there."""
        info = self.run.info()
        if not info.captured:
            config = (
                self.inventory.serving_configs.get(self.node.serving_config)
                if self.node.serving_config
                else None
            )
            info = RunInfo().updated(
                scenario=self.scenario,
                case=self.case,
                node=self.node.name,
                engine=self.node.engine,
                serving_config=self.node.serving_config,
                node_config_hash=config_hash(config),
                load_profile=dataclasses.asdict(self.load_profile),
                harness_version=harness_version(),
                prometheus_url=self.inventory.prometheus.url,
                scrape_interval_s=self.inventory.prometheus.scrape_interval_s,
                slo=self.slo.model_dump(),
                t_start=self.t_start,
            )
        self.run.write_info(info.updated(**changes))


def harness_version() -> str:
    """The installed faultkit's version (``unknown`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("faultkit")
    except PackageNotFoundError:
        return "unknown"
