"""A run's start-up log (:meth:`faultkit.experiment.node_evidence.NodeEvidence.startup_log`):
the first lines a container that started during the run wrote since that start, with
Docker's stamps and secrets redacted; nothing for a container that did not start again."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from faultkit.errors import DockerError
from faultkit.experiment import node_evidence
from faultkit.experiment.node_evidence import NodeEvidence
from faultkit.inventory import Inventory, Node
from faultkit.model.runfiles import STARTUP_LOG_LINES

T = 1_796_600_000.0
SECRET = "token-abc123secret"


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


class FakeHost:
    """A container started at ``started``: Docker's stamped log from before it, its
    start-up words (a progress bar among them), then one line per request; ``logs`` answers
    from ``since`` on, as Docker does, and remembers what it was asked."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.asked: list[dict[str, Any]] = []
        self.lines = [(T - 5.0, "the previous run's last line"),
                      (started, f"args: Namespace(model='m', api_key='{SECRET}')"),
                      (started + 1.0, "Loading 50%\rLoading 100%"),
                      *((started + 2.0 + k / 10, "POST /v1/chat/completions 200")
                        for k in range(STARTUP_LOG_LINES))]

    def state(self, _name: str) -> Any:
        return SimpleNamespace(started_at=self.started)

    def logs(self, _name: str, **asked: Any) -> str:
        self.asked.append(asked)
        return "".join(f"{stamp(t)} {text}\n" for t, text in self.lines
                       if t >= asked["since"])


def evidence(monkeypatch: pytest.MonkeyPatch, host: Any, *, docker: bool = True
             ) -> NodeEvidence:
    monkeypatch.setattr(node_evidence, "docker_host", lambda _url: host)
    node = Node(name="n", engine="vllm", base_url="http://127.0.0.1:9", model="m",
                docker={"container": "c"} if docker else None)
    return NodeEvidence(node, Inventory(nodes=[node]), since=T)


def test_a_container_started_during_the_run_keeps_its_first_lines_since_that_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(started=T + 10.0)
    lines = evidence(monkeypatch, host).startup_log().splitlines()
    assert host.asked == [{"tail": "all", "since": T + 10.0, "timestamps": True}]
    assert len(lines) == STARTUP_LOG_LINES
    assert lines[0].startswith(f"{stamp(T + 10.0)} args: Namespace(")
    assert SECRET not in lines[0]  # redacted
    assert lines[1:3] == [f"{stamp(T + 11.0)} Loading 50%", "Loading 100%"]
    assert lines[-1].startswith(stamp(T + 12.0 + (STARTUP_LOG_LINES - 4) / 10))


def test_no_start_during_the_run_no_container_or_no_docker_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = FakeHost(started=T - 1.0)
    assert evidence(monkeypatch, host).startup_log() == ""
    assert host.asked == []  # the log is not read at all
    assert evidence(monkeypatch, host, docker=False).startup_log() == ""

    class Unreachable(FakeHost):
        def state(self, _name: str) -> Any:
            raise DockerError(f"engine unreachable, api_key={SECRET}")

    said = evidence(monkeypatch, Unreachable(T + 10.0)).startup_log()
    assert said.startswith("(logs unavailable: engine unreachable") and SECRET not in said
