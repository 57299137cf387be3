"""The cut watch brackets the moment a server stopped answering, against the moment the
test itself closed it (evidence the watch never reads)."""

from __future__ import annotations

import socket
import time

import pytest

from faultkit.faults.cutwatch import CutWatch
from tests.unit.conftest import AnsweringServer


def test_the_bracket_holds_the_moment_the_server_was_cut(
    answering_server: AnsweringServer,
) -> None:
    watch = CutWatch(f"http://127.0.0.1:{answering_server.port}", "/health")
    watch.start()
    try:
        assert watch.wait_answered(2.0)
        time.sleep(0.05)
        answering_server.cut()
        seen = watch.wait_cut(2.0)
    finally:
        watch.stop()
    assert seen is not None and answering_server.cut_at is not None
    # the last answer the watch saw is the server's last answer (connections accepted
    # before the close are still served), and its first failure came after the close
    assert max(answering_server.sent) <= seen.last_answer <= seen.first_failure
    assert seen.first_failure >= answering_server.cut_at
    assert seen.failure == "refused"
    assert 0 <= seen.bracket_s < 0.5
    assert seen.probes >= 2


def test_no_answer_before_the_failure_is_no_bracket() -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens: every probe is refused, none answered
    watch = CutWatch(f"http://127.0.0.1:{port}")
    watch.start()
    assert not watch.wait_answered(0.2)
    assert watch.wait_cut(0.2) is None
    assert watch.stop() is None


def test_a_server_still_answering_is_no_cut(answering_server: AnsweringServer) -> None:
    watch = CutWatch(f"http://127.0.0.1:{answering_server.port}")
    watch.start()
    assert watch.wait_cut(0.3) is None
    assert watch.stop() is None


def test_only_plain_http_urls() -> None:
    with pytest.raises(ValueError, match="plain http"):
        CutWatch("https://example.invalid")


class _CuttingDocker:
    """Stands in for the node's Docker engine (behind the fault's platform): ``disconnect``
    cuts the server off, then takes Docker's time."""

    def __init__(self, server: AnsweringServer) -> None:
        self.server = server
        self.disconnected: list[str] = []
        self.returned_at: float | None = None

    def disconnect(self, container: str, network: str) -> None:
        self.server.cut()
        time.sleep(0.15)  # Docker's operation goes on after the cut (bench/partition_cut.py)
        self.disconnected.append(network)
        self.returned_at = time.time()


async def test_a_refuse_partition_dates_its_effect_by_the_cut_it_watched(
    answering_server: AnsweringServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from faultkit.faults import base, make_fault
    from faultkit.model.records import Event
    from slo.effect import effect_of
    from tests.unit.faults_fake import node

    events: list[Event] = []
    target = node("n1", base_url=f"http://127.0.0.1:{answering_server.port}",
                  docker={"host": "unix:///var/run/docker.sock", "container": "n1"})
    fault = make_fault("partition", target, timeline=events.append, dry_run=True, mode="refuse")
    docker = _CuttingDocker(answering_server)
    monkeypatch.setattr(base, "docker_host", lambda url: docker)
    fault.mode = "refuse"
    fault.result["networks"] = ["lab"]
    fault.emit("inject_start", effect=fault.effect_spec())
    await fault._apply()
    assert docker.disconnected == ["lab"]
    effect = effect_of(events, "n1")
    assert effect.evidence == "observed"
    assert answering_server.cut_at is not None
    # dated by the server's last answer, not by the call's return (which came after the cut
    # and Docker's 0.15 s more)
    assert docker.returned_at is not None
    assert max(answering_server.sent) <= effect.t < docker.returned_at
    confirmed = next(e.t for e in events if e.data.get("evidence") == "mechanism")
    assert effect.t < confirmed
    assert fault.result["cut_bracket_s"] >= 0
