"""The cut watch brackets the moment a server stopped answering, against the moment the
test itself closed it (evidence the watch never reads)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from faultkit.faults.cutwatch import CutWatch


class _TinyServer:
    """Answers every connection with a status line, until :meth:`cut`."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.cut_at: float | None = None
        #: when the server sent each answer (its own record)
        self.sent: list[float] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                self.sent.append(time.time())
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")

    def cut(self) -> None:
        self.cut_at = time.time()
        self.sock.close()  # nothing listens from now on: connections are refused


@pytest.fixture
def server() -> Iterator[_TinyServer]:
    srv = _TinyServer()
    yield srv
    if srv.cut_at is None:
        srv.cut()


def test_the_bracket_holds_the_moment_the_server_was_cut(server: _TinyServer) -> None:
    watch = CutWatch(f"http://127.0.0.1:{server.port}", "/health")
    watch.start()
    try:
        assert watch.wait_answered(2.0)
        time.sleep(0.05)
        server.cut()
        seen = watch.wait_cut(2.0)
    finally:
        watch.stop()
    assert seen is not None and server.cut_at is not None
    # the last answer the watch saw is the server's last answer (connections accepted
    # before the close are still served), and its first failure came after the close
    last_sent = max(server.sent)
    assert last_sent <= seen.last_answer <= last_sent + 0.05
    assert seen.first_failure >= server.cut_at
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


def test_a_server_still_answering_is_no_cut(server: _TinyServer) -> None:
    watch = CutWatch(f"http://127.0.0.1:{server.port}")
    watch.start()
    assert watch.wait_cut(0.3) is None
    assert watch.stop() is None


def test_only_plain_http_urls() -> None:
    with pytest.raises(ValueError, match="plain http"):
        CutWatch("https://example.invalid")
