"""Fixtures shared by the unit tests: loopback sockets in states a server can be in."""

from __future__ import annotations

import socket
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
