"""A fake fault backend for unit tests: a dict "world" and an undo op that restores keys in it;
and a fake Docker engine behind a real :class:`~faultkit.docker.host.DockerHost` (its SDK client
replaced), for a real fault, its undo steps and the experiment around it."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

import docker.errors
import requests

from faultkit.docker.host import DockerHost, docker_host
from faultkit.faults import undo as undo  # re-exported: test_journal reads the registry here
from faultkit.faults.base import Fault
from faultkit.faults.params import ParamSpec
from faultkit.inventory import Node

#: the fake system the fake fault breaks: key → value; "ok" means healthy
WORLD: dict[str, str] = {}


@undo.op("fake_restore")
def _fake_restore(step: Mapping[str, Any]) -> str:
    key = str(step["key"])
    if WORLD.get(key) == step["value"]:
        return f"{key} already {step['value']}"
    WORLD[key] = str(step["value"])
    return f"restored {key}"


class FakeFault(Fault):
    """Sets WORLD[key] = 'broken'; optionally fails halfway through apply."""

    kind: ClassVar[str] = "pause"  # reuse a real kind so the allowlist logic applies
    PARAMS: ClassVar[ParamSpec] = {"key": (str, "a"), "fail_apply": (bool, False)}
    acts_on_container: ClassVar[bool] = False  # it acts on WORLD, never on a container

    async def _prepare(self) -> list[dict[str, Any]]:
        key = self.params["key"]
        return [{"op": "fake_restore", "key": key, "value": WORLD.get(key, "ok")}]

    async def _apply(self) -> None:
        WORLD[self.params["key"]] = "broken"
        if self.params["fail_apply"]:
            raise RuntimeError("apply failed halfway")


def node(name: str = "n1", **kw: Any) -> Node:
    values: dict[str, Any] = {
        "name": name, "engine": "sim", "personality": "vllm",
        "base_url": "http://127.0.0.1:9", "model": "m", "faults": ["*"],
    }
    values.update(kw)
    return Node(**values)


# --------------------------------------------------------------------------- a fake engine


def api_error(status: int, explanation: str) -> docker.errors.APIError:
    """What docker's SDK raises for an HTTP ``status`` answer saying ``explanation``."""
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(f"{status} error", response=response,
                                  explanation=explanation)


class FakeDockerAPI:
    """The slice of docker's low-level API that ``pause``, its undo and the experiment use:
    one running container ``name`` publishing ``port`` on 127.0.0.1. ``pause`` raises
    ``pause_error`` for its first ``pause_failures`` calls, then pauses; every call is
    recorded in ``calls``."""

    def __init__(self, name: str, port: int, *, pause_failures: int = 0,
                 pause_error: BaseException | None = None) -> None:
        self.name = name
        self.port = port
        self.pause_failures = pause_failures
        self.pause_error = pause_error or api_error(500, "server error")
        self.paused = False
        self.calls: list[str] = []

    def inspect_container(self, name: str) -> dict[str, Any]:
        self.calls.append("inspect")
        ports = {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(self.port)}]}
        return {"Id": "f" * 64, "Name": f"/{name}", "RestartCount": 0,
                "State": {"Status": "paused" if self.paused else "running", "Running": True,
                          "Paused": self.paused, "Pid": 4242, "ExitCode": 0,
                          "StartedAt": "2025-01-01T00:00:00Z"},
                "Config": {"Image": "img", "Labels": {}, "Env": []},
                "HostConfig": {"NetworkMode": "bridge", "PortBindings": ports},
                "NetworkSettings": {"Ports": ports, "Networks": {}}}

    def pause(self, name: str) -> None:
        self.calls.append("pause")
        if self.calls.count("pause") <= self.pause_failures:
            raise self.pause_error
        self.paused = True

    def unpause(self, name: str) -> None:
        self.calls.append("unpause")
        self.paused = False

    def logs(self, name: str, **kw: Any) -> bytes:
        return b""


class FakeDockerClient:
    """docker's ``DockerClient`` as far as a :class:`DockerHost` reaches it."""

    def __init__(self, api: FakeDockerAPI) -> None:
        self.api = api

    def info(self) -> dict[str, Any]:
        return {"SystemTime": datetime.fromtimestamp(time.time(), UTC).isoformat()}

    def events(self, **kw: Any) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        return None


def fake_engine(url: str, api: FakeDockerAPI) -> DockerHost:
    """Make ``docker_host(url)`` — the one every fault, undo step and experiment of this
    process reaches the engine at ``url`` through — answer from ``api``. Use a URL of the
    test's own (its ``tmp_path``): the host is shared for the rest of the process."""
    host = docker_host(url)
    host._client = FakeDockerClient(api)
    return host
