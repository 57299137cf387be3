"""Container data: what a node's container is (:class:`ContainerSpec`) and how it is now
(:class:`ContainerState`), parsed from ``docker inspect`` output. Pure data, no Docker calls.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from faultkit.model.timestamps import parse_rfc3339

#: A Python exception line as a traceback ends with it (``ValueError: max_model_len ...``).
_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b:?\s")
#: Words engines use when they give up (llama.cpp: ``error: failed to open``, ``exiting``).
_GIVING_UP = re.compile(r"\b(?:error|fatal|failed|exiting|abort(?:ed|ing)?)\b", re.IGNORECASE)
#: The longest last word kept: a line, not a dump.
LAST_WORDS_MAX = 300


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """Everything needed to (re)create a node container; ports map container port → host port."""

    name: str
    image: str
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    memory: str | int | None = None
    shm_size: str | int | None = None  # /dev/shm size; None = Docker's default (64 MiB)
    cpu_shares: int | None = None  # relative CPU weight; None = Docker's default (1024)
    restart_policy: str = "on-failure"
    restart_max_retries: int = 0
    ports: dict[int, int] = field(default_factory=dict)
    bind_ip: str = "127.0.0.1"
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    network: str | None = None
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContainerState:
    """A snapshot of one container, times as Unix epoch seconds (None if never)."""

    id: str
    name: str
    status: str  # created | running | paused | restarting | exited | dead
    running: bool
    paused: bool
    restarting: bool
    exit_code: int | None
    oom_killed: bool
    restart_count: int
    started_at: float | None
    finished_at: float | None
    pid: int | None
    image: str
    restart_policy: str
    memory_limit: int | None
    labels: dict[str, str] = field(default_factory=dict)
    networks: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:

        return asdict(self)


def state_from_attrs(attrs: Mapping[str, Any]) -> ContainerState:
    """Build a :class:`ContainerState` from ``docker inspect`` output."""
    st = attrs.get("State", {})
    host = attrs.get("HostConfig", {})
    config = attrs.get("Config", {})
    memory = host.get("Memory") or None
    return ContainerState(
        id=attrs.get("Id", "")[:12],
        name=attrs.get("Name", "").lstrip("/"),
        status=st.get("Status", "unknown"),
        running=bool(st.get("Running")),
        paused=bool(st.get("Paused")),
        restarting=bool(st.get("Restarting")),
        exit_code=st.get("ExitCode"),
        oom_killed=bool(st.get("OOMKilled")),
        restart_count=int(attrs.get("RestartCount", 0)),
        started_at=parse_rfc3339(st.get("StartedAt")),
        finished_at=parse_rfc3339(st.get("FinishedAt")),
        pid=st.get("Pid") or None,
        image=config.get("Image", ""),
        restart_policy=(host.get("RestartPolicy") or {}).get("Name") or "no",
        memory_limit=memory,
        labels=dict(config.get("Labels") or {}),
        networks=tuple((attrs.get("NetworkSettings", {}).get("Networks") or {}).keys()),
    )


def _spec_from_attrs(attrs: Mapping[str, Any]) -> ContainerSpec:
    config = attrs.get("Config", {})
    host = attrs.get("HostConfig", {})
    ports: dict[int, int] = {}
    bind_ip = "127.0.0.1"
    for key, bindings in (host.get("PortBindings") or {}).items():
        if not bindings or not key.endswith("/tcp"):
            continue
        ports[int(key.split("/")[0])] = int(bindings[0].get("HostPort") or 0)
        bind_ip = bindings[0].get("HostIp") or bind_ip
    volumes: dict[str, dict[str, str]] = {}
    for bind in host.get("Binds") or []:
        src, _, rest = bind.partition(":")
        dst, _, mode = rest.partition(":")
        volumes[src] = {"bind": dst, "mode": mode or "rw"}
    env = dict(item.partition("=")[::2] for item in (config.get("Env") or []))
    networks = list((attrs.get("NetworkSettings", {}).get("Networks") or {}).keys())
    policy = host.get("RestartPolicy") or {}
    return ContainerSpec(
        name=attrs.get("Name", "").lstrip("/"),
        image=config.get("Image", ""),
        command=tuple(config.get("Cmd") or ()),
        env=env,
        memory=host.get("Memory") or None,
        shm_size=host.get("ShmSize") or None,
        cpu_shares=host.get("CpuShares") or None,
        restart_policy=policy.get("Name") or "no",
        restart_max_retries=int(policy.get("MaximumRetryCount") or 0),
        ports=ports,
        bind_ip=bind_ip,
        volumes=volumes,
        network=networks[0] if networks else None,
        labels=dict(config.get("Labels") or {}),
    )


def spec_to_json(spec: ContainerSpec) -> dict[str, Any]:
    """A :class:`ContainerSpec` as JSON-safe data (for the fault journal)."""

    data = asdict(spec)
    data["command"] = list(spec.command)
    data["ports"] = {str(k): v for k, v in spec.ports.items()}
    return data


def spec_from_json(data: Mapping[str, Any]) -> ContainerSpec:
    values = dict(data)
    values["command"] = tuple(values.get("command") or ())
    values["ports"] = {int(k): int(v) for k, v in (values.get("ports") or {}).items()}
    return ContainerSpec(**values)


def last_words(log: str) -> str | None:
    """The line of a container's log that says why its engine stopped: the last exception
    line of a traceback, else the last line with an error word, else the last line; ``None``
    for an empty log. Cut to :data:`LAST_WORDS_MAX` characters. Not redacted: a caller that
    writes it anywhere redacts it first (engines print their arguments, secrets included)."""

    lines = [line.strip() for line in log.splitlines() if line.strip()]
    if not lines:
        return None
    for pattern in (_EXCEPTION_LINE, _GIVING_UP):
        hits = [line for line in lines if pattern.search(line)]
        if hits:
            return hits[-1][:LAST_WORDS_MAX]
    return lines[-1][:LAST_WORDS_MAX]
