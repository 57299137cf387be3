"""Which Docker errors ``testbed up`` answers by restarting the second host's engine once
(:func:`testbed.host2.is_held_port`). The texts are Docker's own, as it answered here."""

from __future__ import annotations

import pytest

from faultkit.errors import DockerError
from testbed.host2 import is_held_port

URL = "tcp://127.0.0.1:18100: Docker API error: "


@pytest.mark.parametrize("text", [
    # the allocator still counts the port taken (after a forced removal during a restore)
    "driver failed programming external connectivity on endpoint faultkit-h2-sim-vllm "
    "(cd58…): Bind for 0.0.0.0:18101 failed: port is already allocated",
    # a process of that host listens on it (a stray docker-proxy)
    "driver failed programming external connectivity on endpoint faultkit-test-h2-held "
    "(bb8e…): Error starting userland proxy: listen tcp4 0.0.0.0:18103: bind: address "
    "already in use",
])
def test_a_port_the_engine_cannot_publish_is_answered_by_a_restart(text: str) -> None:
    assert is_held_port(DockerError(URL + text))


@pytest.mark.parametrize("text", [
    "No such container: faultkit-h2-sim-vllm",
    "Conflict. The container name \"/faultkit-h2-sim-vllm\" is already in use",
    "listen tcp 0.0.0.0:2375: bind: address already in use",  # not a node's port mapping
])
def test_any_other_error_is_raised_as_it_is(text: str) -> None:
    assert not is_held_port(DockerError(URL + text))
