"""Docker's own container events as timeline evidence: the one home of this translation,
read by the experiment runner (``faultkit.experiment.node_evidence``) and by
``faultkit postmortem``.

Docker clears ``ExitCode`` when its restart policy restarts a container (and ``OOMKilled``
only when the container is recreated), so ``docker inspect`` after the fact cannot say how
the node died. Docker's event stream can: ``die`` carries the exit code, ``oom`` precedes an
OOM kill, ``start`` follows a restart; a network's ``disconnect``/``connect`` naming the
container dates a partition. These become ``docker_<action>`` events
(:func:`faultkit.model.events.docker_kind`; ``docker_network_disconnect`` for a network's) and,
for each death followed by a start, one ``restart_seen`` event with ``exit_code`` and
``oom_killed``. Times are Docker's own stamps (``timeNano``), epoch seconds on the Docker
host's clock. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from faultkit.model.events import EventKind, docker_kind
from faultkit.model.records import Event, EventSource

__all__ = ["OOM_TO_DIE_S", "container_events", "event_time"]

#: An ``oom`` event this close before a ``die`` means the kernel's OOM killer did it.
OOM_TO_DIE_S = 2.0


def event_time(raw: Mapping[str, Any]) -> float:
    """A raw Docker event's stamp, epoch seconds (``timeNano``, else ``time``)."""
    nano = int(raw.get("timeNano") or 0)
    return nano / 1e9 if nano else float(raw.get("time") or 0)


def container_events(raw_events: Iterable[Mapping[str, Any]], node: str, *,
                     source: EventSource = "harness",
                     extra: Mapping[str, Any] | None = None) -> list[Event]:
    """Timeline events from Docker's raw container events, oldest first, each written with
    ``source`` (the runner: ``harness``) and ``extra`` added to its data (a postmortem
    names where it read them)."""
    out: list[Event] = []
    last_oom: float | None = None
    pending_die: dict[str, Any] | None = None
    more = dict(extra or {})
    for raw in raw_events:
        action = str(raw.get("Action") or raw.get("status") or "")
        if not action or action.startswith(("exec_", "health_status")):
            continue
        attrs = (raw.get("Actor") or {}).get("Attributes") or {}
        data: dict[str, Any] = {"action": action}
        if raw.get("Type") == "network":  # the container cut from / put back on a network
            action = f"network_{action}"
            data["action"] = action
            if attrs.get("name"):
                data["network"] = str(attrs["name"])
        t = event_time(raw)
        if "exitCode" in attrs:
            data["exit_code"] = int(attrs["exitCode"])
        if "signal" in attrs:
            data["signal"] = attrs["signal"]
        if action == "oom":
            last_oom = t
        if action == "die":
            data["oom_killed"] = last_oom is not None and t - last_oom < OOM_TO_DIE_S
            pending_die = data
        out.append(Event(t=t, source=source, kind=docker_kind(action), node=node,
                         data={**data, **more}))
        if action == "start" and pending_die is not None:
            restart = {k: v for k, v in pending_die.items() if k != "action"}
            out.append(Event(t=t, source=source, kind=EventKind.RESTART_SEEN, node=node,
                             data={**restart, **more}))
            pending_die = None
    return out
