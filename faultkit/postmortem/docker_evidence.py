"""What the node's Docker host says about one incident's window, where it is reachable:
Docker's own events of the container (:func:`faultkit.docker.events.container_events`),
its state now (``docker inspect``) and its log lines written inside the window — every
secret the inventory knows redacted, with the redaction the runner uses
(:func:`reports.text.redact_data`).

Docker keeps its events in memory only, and only its last 256 (``docker events --since``
answers from that buffer; a daemon restart empties it): events older than that are not
available, and :attr:`DockerEvidence.notes` says so in a report's words. Nothing here
raises for an unreachable host: the evidence says what could not be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faultkit.docker.events import container_events
from faultkit.docker.host import docker_host
from faultkit.errors import FaultkitError
from faultkit.inventory import Inventory, Node
from faultkit.model.events import EventKind
from faultkit.model.records import Event
from faultkit.model.runfiles import LOG_TAIL_LINES, stamped_lines, startup_lines
from reports.text import known_secrets, redact_data

__all__ = ["DOCKER_EVENTS_KEPT", "DockerEvidence", "read_docker_evidence"]

#: how many events the Docker daemon keeps for ``docker events --since`` (in memory)
DOCKER_EVENTS_KEPT = 256
#: what a timeline event read from Docker names as its origin (``data["from"]``)
FROM_DOCKER = "docker events"


@dataclass(frozen=True, slots=True)
class DockerEvidence:
    """The container's evidence over ``[since, until]`` (epoch seconds).

    ``events`` are timeline events (source ``harness``, as the runner writes Docker's
    events; ``data["from"]`` is ``"docker events"``); ``state`` the container's
    ``docker inspect`` now (``{"error": why}`` when it could not be read, ``None``: the node
    has no container); ``log`` the lines the container wrote inside the window, without
    Docker's timestamps; ``notes`` what was available and what could not be read, one line
    each; ``startup_log`` the first :data:`~faultkit.model.runfiles.STARTUP_LOG_LINES`
    lines it wrote after the last ``start`` of the window, *with* Docker's timestamps (the
    recovery phases are dated from them, as a run's are), empty when it did not start
    again in the window."""

    since: float
    until: float
    events: tuple[Event, ...] = ()
    state: dict[str, Any] | None = None
    log: str | None = None
    notes: tuple[str, ...] = field(default=())
    startup_log: str = ""


def _last_start(events: tuple[Event, ...]) -> float | None:
    """When Docker last started the container in the window (None: it did not)."""
    return max((e.t for e in events if e.kind == EventKind.DOCKER_START), default=None)


def read_docker_evidence(node: Node, inventory: Inventory, since: float, until: float,
                         *, log_since: float | None = None,
                         log_until: float | None = None) -> DockerEvidence:
    """Docker's events, the container's state and its log lines for ``node`` over
    ``[since, until]``, secrets redacted; what could and could not be read is in
    ``notes``. The log is read over ``[log_since, log_until]`` instead where given: from
    before the last good scrape (an engine says why it fails before its scrapes fail: a
    CUDA OOM is logged, then the process exits) to the recovery (what it said as it came
    back, not the requests it served after — a busy engine's request lines would push its
    dying words out of the :data:`~faultkit.model.runfiles.LOG_TAIL_LINES` kept)."""
    if node.docker is None:
        return DockerEvidence(since, until, notes=(
            f"{node.name} has no docker container in the inventory: Docker's events, its "
            "state and its log were not read",))
    secrets = known_secrets(inventory)

    def redact(value: Any) -> Any:
        return redact_data(value, secrets)

    host, container = docker_host(node.docker.host), node.docker.container
    where = f"{container} on {node.docker.host}"
    notes: list[str] = []
    events: tuple[Event, ...] = ()
    try:
        raw = host.events(container, since, until)
        events = tuple(e for e in container_events(raw, node.name,
                                                   extra={"from": FROM_DOCKER})
                       if since <= e.t <= until)
        notes.append(
            f"Docker's events of {where}: {len(events)} in the window; the daemon keeps only "
            f"its last {DOCKER_EVENTS_KEPT} events, in memory (none from before its last "
            "restart): older ones could not be read" if events else
            f"Docker's events of {where}: none in the window — the daemon keeps only its "
            f"last {DOCKER_EVENTS_KEPT} events, in memory, so an older window (or one before "
            "a daemon restart) reads as empty; or nothing happened to the container through "
            "Docker")
    except FaultkitError as exc:
        notes.append(f"Docker's events of {where}: not readable ({redact(str(exc))})")
    state: dict[str, Any] | None
    try:
        state = dict(redact(host.state(container).to_json()))
    except FaultkitError as exc:
        state = {"error": str(redact(str(exc)))}
        notes.append(f"the state of {where}: not readable ({state['error']})")
    log: str | None
    startup = ""
    try:
        first = since if log_since is None else log_since
        last = until if log_until is None else min(until, log_until)
        answer = host.logs(container, tail="all", since=first, timestamps=True)
        lines = stamped_lines(answer, first, last, keep_stamps=False)
        log = str(redact("\n".join(lines[-LOG_TAIL_LINES:])))
        started = _last_start(events)
        if started is not None:
            startup = str(redact(startup_lines(answer, started, until)))
    except FaultkitError as exc:
        log = None
        notes.append(f"the log of {where}: not readable ({redact(str(exc))})")
    return DockerEvidence(since, until, events, state, log, tuple(notes), startup)
