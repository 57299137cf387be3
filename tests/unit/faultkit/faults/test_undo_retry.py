"""Undo steps are retried while Docker fails transiently (5xx, unreachable, timeouts), each
failure logged; a step that keeps failing leaves the record for the sweep and says so."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import docker.errors
import pytest
import requests
import requests.exceptions
from tenacity import wait_none

from faultkit.docker.host import DockerHost
from faultkit.errors import DockerError, FaultError
from faultkit.faults import undo
from faultkit.faults.base import Fault
from faultkit.journal import FaultJournal
from faultkit.sweep import sweep
from tests.unit.faults_fake import node

HOST = "unix:///fake/docker.sock"


def _api_error(status: int) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("boom", response=response, explanation=f"HTTP {status}")


class _FakeAPI:
    """The slice of docker's low-level API the unpause op uses; fails ``failures`` times."""

    def __init__(self, failures: int, error: BaseException) -> None:
        self.failures = failures
        self.error = error
        self.inspects = 0
        self.paused = True

    def inspect_container(self, name: str) -> dict[str, Any]:
        self.inspects += 1
        if self.inspects <= self.failures:
            raise self.error
        return {"Id": "f" * 64, "Name": f"/{name}",
                "State": {"Status": "paused", "Running": True, "Paused": self.paused}}

    def unpause(self, name: str) -> None:
        self.paused = False


class _FakeClient:
    def __init__(self, api: _FakeAPI) -> None:
        self.api = api


def fake_host(monkeypatch: pytest.MonkeyPatch, failures: int,
              error: BaseException | None = None) -> _FakeAPI:
    """A DockerHost whose engine fails ``failures`` times with ``error`` (default: a 500)."""
    api = _FakeAPI(failures, error if error is not None else _api_error(500))
    host = DockerHost(HOST)
    host._client = _FakeClient(api)
    monkeypatch.setattr(undo, "_host", lambda step: host)
    return api


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(undo, "UNDO_WAIT", wait_none())


STEP = {"op": "unpause", "host": HOST, "container": "engine"}


@pytest.mark.parametrize("error", [
    _api_error(500), _api_error(503),
    requests.exceptions.ConnectionError("connection refused"),
    requests.exceptions.ReadTimeout("read timed out"),
], ids=["500", "503", "unreachable", "timeout"])
def test_fails_twice_then_succeeds(monkeypatch: pytest.MonkeyPatch,
                                   caplog: pytest.LogCaptureFixture,
                                   error: BaseException) -> None:
    api = fake_host(monkeypatch, failures=2, error=error)
    with caplog.at_level(logging.WARNING, logger="faultkit.faults.undo"):
        assert undo.run_step(STEP) == "unpaused engine"
    assert api.inspects == 3
    assert api.paused is False
    failures = [r.getMessage() for r in caplog.records]
    assert len(failures) == 2
    assert failures[0].startswith("undo step unpause engine failed (attempt 1 of 5)")
    assert "attempt 2 of 5" in failures[1]


def test_always_failing_gives_up_after_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake_host(monkeypatch, failures=1000)
    with pytest.raises(FaultError, match=r"undo step unpause engine: still failing after 5 "
                                         r"attempts") as failed:
        undo.run_step(STEP)
    assert isinstance(failed.value.__cause__, DockerError)
    assert api.inspects == undo.UNDO_ATTEMPTS
    assert api.paused is True


def test_an_answer_that_will_not_change_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake_host(monkeypatch, failures=1000, error=_api_error(400))
    with pytest.raises(DockerError, match="HTTP 400") as failed:
        undo.run_step(STEP)
    assert failed.value.transient is False
    assert api.inspects == 1


class _PauseFault(Fault):
    """Journals the real ``unpause`` step for a container on the fake host."""

    kind: ClassVar[str] = "pause"

    async def _prepare(self) -> list[dict[str, Any]]:
        return [dict(STEP)]

    async def _apply(self) -> None:
        return None


async def test_revert_that_still_fails_leaves_the_record_for_the_sweep(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    api = fake_host(monkeypatch, failures=1000)
    fault = _PauseFault(node(), journal=FaultJournal(tmp_path))
    await fault.inject()
    with pytest.raises(FaultError) as failed:
        await fault.revert()
    message = str(failed.value)
    assert "still failing after 5 attempts" in message
    assert "the journal keeps it: run `faultkit sweep` to finish" in message
    (record,) = FaultJournal(tmp_path).orphans()  # unreverted, and free for the sweep
    assert record.id == fault.id
    api.failures = api.inspects + 2  # the engine comes back after two more failures
    (line,) = sweep(FaultJournal(tmp_path))
    assert line == f"reverted {fault.id} ({record.description}): unpaused engine"
    assert api.paused is False
    assert FaultJournal(tmp_path).unreverted() == []


def test_step_descriptions_never_show_step_data() -> None:
    step = {"op": "container", "container": "engine", "spec": {"env": {"HF_TOKEN": "secret"}}}
    assert undo.describe_step(step) == "container engine"
    assert undo.describe_step({"op": "iptables_purge", "container": None,
                               "table": "nat"}) == "iptables_purge host nat"
