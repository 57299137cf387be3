"""What a postmortem keeps of the container's log: the lines stamped in the window, up to
the recovery — a busy engine's request lines after it must not push its dying words out
of the lines kept (faultkit.postmortem.docker_evidence)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from faultkit.inventory import Inventory, Node
from faultkit.model.runfiles import LOG_TAIL_LINES
from faultkit.postmortem import docker_evidence
from faultkit.postmortem.docker_evidence import read_docker_evidence

T = 1_796_600_000.0
DYING = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.46 GiB."


def stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


class FakeHost:
    """A Docker host whose container said its dying words at T−0.5 — before the last good
    scrape at T, which it still answered — came back by T+4 and from T+4.1 logged one line
    per request, 10 a second."""

    def events(self, _container: str, _since: float, _until: float) -> list[dict[str, Any]]:
        return []

    def state(self, _container: str) -> Any:
        class State:
            def to_json(self) -> dict[str, Any]:
                return {"running": True}
        return State()

    def logs(self, _container: str, **_kw: Any) -> str:
        lines = [f"{stamp(T - 15)} a line from before the lead",
                 f"{stamp(T - 0.5)} {DYING}",
                 f"{stamp(T + 3.5)} INFO: Application startup complete."]
        lines += [f"{stamp(T + 4.1 + k / 10)} INFO: POST /v1/chat/completions 200"
                  for k in range(80)]
        return "\n".join(lines)


@pytest.fixture
def dying_node(monkeypatch: pytest.MonkeyPatch) -> tuple[Node, Inventory]:
    monkeypatch.setattr(docker_evidence, "docker_host", lambda _url: FakeHost())
    n = Node(name="n", engine="sim", personality="vllm", base_url="http://127.0.0.1:9",
             model="m", docker={"container": "c"})
    return n, Inventory(nodes=[n])


def test_the_log_is_kept_from_before_the_last_good_scrape_up_to_the_recovery(
    dying_node: tuple[Node, Inventory],
) -> None:
    n, inventory = dying_node
    found = read_docker_evidence(n, inventory, T, T + 12, log_since=T - 10, log_until=T + 4)
    assert found.log is not None
    lines = found.log.splitlines()
    assert lines == [DYING, "INFO: Application startup complete."]


def test_without_the_recovery_the_request_lines_push_the_dying_words_out(
    dying_node: tuple[Node, Inventory],
) -> None:
    """What the recovery bound is for: the last LOG_TAIL_LINES of the whole window are request
    lines only."""
    n, inventory = dying_node
    found = read_docker_evidence(n, inventory, T, T + 12)
    assert found.log is not None
    lines = found.log.splitlines()
    assert len(lines) == LOG_TAIL_LINES and DYING not in lines


def test_without_the_lead_the_words_before_the_last_good_scrape_are_lost(
    dying_node: tuple[Node, Inventory],
) -> None:
    """What the lead is for: the engine logged its CUDA OOM, a scrape still answered, then
    it exited — the window from the last good scrape starts after its words."""
    n, inventory = dying_node
    found = read_docker_evidence(n, inventory, T, T + 12, log_until=T + 4)
    assert found.log is not None and DYING not in found.log
    led = read_docker_evidence(n, inventory, T, T + 12, log_since=T - 10, log_until=T + 4)
    assert led.log is not None and "a line from before the lead" not in led.log


class RestartedHost(FakeHost):
    """The same container, and Docker's record of its death at T+0.2 and start at T+1.5."""

    def events(self, _container: str, _since: float, _until: float) -> list[dict[str, Any]]:
        return [{"Type": "container", "Action": "die", "timeNano": int((T + 0.2) * 1e9),
                 "Actor": {"Attributes": {"exitCode": "1"}}},
                {"Type": "container", "Action": "start", "timeNano": int((T + 1.5) * 1e9),
                 "Actor": {"Attributes": {}}}]


def test_the_start_up_lines_after_the_last_start_are_kept_with_their_stamps(
    dying_node: tuple[Node, Inventory], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the recovery phases are dated from: the lines after Docker's start, each with
    Docker's own time; none when the container did not start again in the window."""
    n, inventory = dying_node
    assert read_docker_evidence(n, inventory, T, T + 12).startup_log == ""
    monkeypatch.setattr(docker_evidence, "docker_host", lambda _url: RestartedHost())
    found = read_docker_evidence(n, inventory, T, T + 12, log_since=T - 10, log_until=T + 4)
    lines = found.startup_log.splitlines()
    assert lines[0] == f"{stamp(T + 3.5)} INFO: Application startup complete."
    assert DYING not in found.startup_log  # said before the start
    assert len(lines) == 1 + 80  # the request lines after it too, up to the window's end


class ProgressBarHost(RestartedHost):
    """The restarted container drew a progress bar as it loaded: one Docker line with
    carriage returns in it, whose later pieces carry no stamp."""

    def logs(self, _container: str, **_kw: Any) -> str:
        return "\n".join([f"{stamp(T - 0.5)} {DYING}",
                          f"{stamp(T + 2.0)} Loading 50%\rLoading 100%",
                          f"{stamp(T + 3.5)} INFO: Application startup complete."])


def test_a_progress_bar_is_kept_with_its_line_not_read_as_a_stamp(
    dying_node: tuple[Node, Inventory], monkeypatch: pytest.MonkeyPatch,
) -> None:
    n, inventory = dying_node
    monkeypatch.setattr(docker_evidence, "docker_host", lambda _url: ProgressBarHost())
    found = read_docker_evidence(n, inventory, T, T + 12, log_since=T - 10, log_until=T + 4)
    assert found.log is not None
    assert found.log.splitlines() == [
        DYING, "Loading 50%", "Loading 100%", "INFO: Application startup complete."]
    assert found.startup_log.splitlines()[:2] == [f"{stamp(T + 2.0)} Loading 50%",
                                                  "Loading 100%"]
