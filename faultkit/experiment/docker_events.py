"""Docker's own container events as timeline evidence.

Docker clears ``ExitCode`` when its restart policy restarts a container (and ``OOMKilled``
only when the container is recreated), so ``docker inspect`` after a run cannot say how the
node died. Docker's event stream can: ``die`` carries the exit code, ``oom`` precedes an
OOM kill, ``start`` follows a restart; a network's ``disconnect``/``connect`` naming the
container dates a partition. These become ``docker_<action>`` events
(:func:`faultkit.model.events.docker_kind`; ``docker_network_disconnect`` for a network's) and,
for each death followed by a start, one ``restart_seen`` event with ``exit_code`` and
``oom_killed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from faultkit.model.events import EventKind, docker_kind
from faultkit.model.records import Event

#: An ``oom`` event this close before a ``die`` means the kernel's OOM killer did it.
OOM_TO_DIE_S = 2.0


def _time(raw: Mapping[str, Any]) -> float:
    nano = int(raw.get("timeNano") or 0)
    return nano / 1e9 if nano else float(raw.get("time") or 0)


def container_events(raw_events: Iterable[Mapping[str, Any]], node: str) -> list[Event]:
    """Timeline events (source ``harness``) from Docker's raw container events, oldest first."""
    out: list[Event] = []
    last_oom: float | None = None
    pending_die: dict[str, Any] | None = None
    for raw in raw_events:
        action = str(raw.get("Action") or raw.get("status") or "")
        if not action or action.startswith(("exec_", "health_status")):
            continue
        if raw.get("Type") == "network":  # the container cut from / put back on a network
            action = f"network_{action}"
        t = _time(raw)
        attrs = (raw.get("Actor") or {}).get("Attributes") or {}
        data: dict[str, Any] = {"action": action}
        if "exitCode" in attrs:
            data["exit_code"] = int(attrs["exitCode"])
        if "signal" in attrs:
            data["signal"] = attrs["signal"]
        if action == "oom":
            last_oom = t
        if action == "die":
            data["oom_killed"] = last_oom is not None and t - last_oom < OOM_TO_DIE_S
            pending_die = data
        out.append(Event(t=t, source="harness", kind=docker_kind(action), node=node, data=data))
        if action == "start" and pending_die is not None:
            restart = {k: v for k, v in pending_die.items() if k != "action"}
            out.append(
                Event(t=t, source="harness", kind=EventKind.RESTART_SEEN, node=node, data=restart)
            )
            pending_die = None
    return out
