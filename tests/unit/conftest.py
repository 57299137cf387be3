"""Fixtures shared by the unit tests: loopback servers in states a node can be in."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: the kernel drops new SYNs, connects hang."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = int(srv.getsockname()[1])
    fillers = []
    for _ in range(4):
        c = socket.socket()
        c.setblocking(False)
        c.connect_ex(("127.0.0.1", port))
        fillers.append(c)
    yield port
    for c in fillers:
        c.close()
    srv.close()


class AnsweringServer:
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
def answering_server() -> Iterator[AnsweringServer]:
    """A loopback server that answers every connection with a status line until cut."""
    srv = AnsweringServer()
    yield srv
    if srv.cut_at is None:
        srv.cut()
