"""Which integration tests may run beside which: ``bash run.sh tests`` runs them in two
pytest processes side by side (docs/ci.md).

A test either acts on the testbed's own nodes and Prometheus, or only on containers and
servers it starts itself (the mark ``own_containers``). The testbed's tests take turns in
one process: the truth trials kill, pause and cut ``sim-vllm`` and read its truth file,
which another test's request would disturb. The tests on their own containers (the
scratch vLLM, the fault tests' scratch nodes, LiteLLM on fake upstreams) take turns in the
other, so only one scratch vLLM ever starts at a time. Which side a module is on is stated
here, not guessed: a module not named below runs with the testbed's tests, which is
always safe.

The second Docker host is one machine that both processes use: the fault tests on their
own scratch node there, the dockerd-restart trials and the truth trials on ``sim-vllm-h2``.
A restart of that host ends every container on it, so the tests that restart it, and those
that must not see it restarted under them, take turns across the two processes
(:func:`second_host_turn`).
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

import pytest

from testbed.paths import state_dir

#: modules that act only on what they start themselves (no testbed node, no lab Prometheus)
OWN_CONTAINER_MODULES = frozenset({
    "test_alertmanager_lab",
    "test_dockerd_restart",
    "test_fault_torture",
    "test_faults_crash",
    "test_faults_host2",
    "test_faults_network",
    "test_faults_process",
    "test_harness_chaos",
    "test_litellm_gateway",
    "test_postmortem",
    "test_simnode_docker",
    "test_vllm_configs",
    "test_vllm_node",
})


def pytest_itemcollected(item: pytest.Item) -> None:
    # marked as each test is collected, before any pytest_collection_modifyitems (where
    # ``-m`` selects) runs
    if item.path.parent.name == "integration" and item.path.stem in OWN_CONTAINER_MODULES:
        item.add_marker(pytest.mark.own_containers)


@contextlib.contextmanager
def second_host_turn() -> Iterator[None]:
    """Hold the second host for the block, across both integration processes (an
    exclusive ``flock``, dropped by the kernel if the holder dies)."""
    with (state_dir("integration") / "second-host.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="module")
def second_host_for_the_module() -> Iterator[None]:
    """The second host, for a whole module that restarts it or runs nodes on it."""
    with second_host_turn():
        yield


@pytest.fixture
def second_host() -> Iterator[None]:
    """The second host, for one test whose node there must not be restarted under it."""
    with second_host_turn():
        yield
