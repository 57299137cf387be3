"""`docker kill` of a container its restart policy is bringing back: Docker answers 409 "is
restarting"; faultkit waits for it (bounded) instead of failing the fault at once."""

from __future__ import annotations

from types import SimpleNamespace

import docker.errors
import pytest
import requests

import faultkit.docker.host as docker_module
from faultkit.docker.host import DockerHost
from faultkit.errors import DockerError


def _api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("kill", response=response, explanation=explanation)


RESTARTING = ("Cannot kill container: n1: Container abc is restarting, wait until the "
              "container is running")


class _Api:
    def __init__(self, errors: list[docker.errors.APIError]) -> None:
        self.errors = errors
        self.calls = 0

    def kill(self, name: str, signal: str) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


def _host(api: _Api) -> DockerHost:
    host = DockerHost("unix:///nonexistent.sock")
    host._client = SimpleNamespace(api=api)
    return host


def test_kill_waits_while_the_container_is_restarting() -> None:
    api = _Api([_api_error(409, RESTARTING), _api_error(409, RESTARTING)])
    _host(api).docker_kill("n1")
    assert api.calls == 3


def test_kill_gives_up_after_the_bound_saying_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker_module, "RESTARTING_WAIT_S", 0.6)
    api = _Api([_api_error(409, RESTARTING) for _ in range(100)])
    with pytest.raises(DockerError, match=r"still restarting after 0\.6 s") as raised:
        _host(api).docker_kill("n1")
    assert raised.value.transient and 2 <= api.calls <= 5


@pytest.mark.parametrize(("status", "text"), [(409, "Container abc is paused"),
                                              (400, "bad signal")])
def test_other_refusals_are_raised_at_once(status: int, text: str) -> None:
    api = _Api([_api_error(status, text)])
    with pytest.raises(DockerError, match=text) as raised:
        _host(api).docker_kill("n1")
    assert api.calls == 1 and not raised.value.transient


def test_restarting_is_transient_for_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo steps retry transient Docker errors (faultkit.faults.undo): a 409 "restarting"
    met by an unpause or a start is one."""
    host = DockerHost("unix:///nonexistent.sock")
    with pytest.raises(DockerError) as raised, host._mapped("n1"):
        raise _api_error(409, RESTARTING)
    assert raised.value.transient
