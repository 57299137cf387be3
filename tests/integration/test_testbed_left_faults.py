"""``testbed up`` after a harness was killed mid-fault: the lab comes back as its spec says.

The failure this pins happened in CI: a run was cut off while a partition held ``llama``
off its network; Docker kept it disconnected across an engine restart, and the next
``testbed up`` kept the container (its config hash matched) and waited 60 s for a node
nobody could reach. The evidence here is Docker's inspect (the container's networks, its
ID, its memory limit) and the node's own health endpoint, not what faultkit reports.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from faultkit.constants import LOCAL_DOCKER
from faultkit.docker.host import DockerHost
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal, JournalRecord
from testbed.lab import LAB_NETWORK, Lab
from testbed.settle import SUPERSEDED
from testbed.torture import FAULTKIT

pytestmark = pytest.mark.docker

#: the node these tests disturb (a sim node: recreated in under a second)
NODE = "sim-sglang"
#: what ``up`` may leave out here: the heavy nodes and the second host are not disturbed
SKIP = frozenset({"vllm", "gateway", "host2"})


@pytest.fixture
def sim_node(lab: Lab, lab_inventory: Inventory) -> Iterator[Node]:
    target = lab_inventory.node(NODE)
    yield target
    lab.up(SKIP)  # whatever a test left, the next one starts from the spec


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[FaultJournal]:
    journal = FaultJournal(tmp_path / "journal")
    yield journal
    journal.close()


def _container(node: Node) -> str:
    assert node.docker is not None
    return node.docker.container


def _answers(node: Node) -> int:
    return httpx.get(f"{node.base_url}{node.health_path}", timeout=5).status_code


def _inject_and_kill(node: Node, journal_dir: Path, tmp_path: Path) -> str:
    """Partition ``node`` (refuse: off its network) with ``faultkit inject`` and SIGKILL the
    harness once its record says applied; the record's id."""
    err = (tmp_path / "inject.stderr").open("w")
    proc = subprocess.Popen(
        [*FAULTKIT, "inject", "partition", "--node", node.name, "--param", "mode=refuse",
         "--duration", "600s", "--journal-dir", str(journal_dir)],
        stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            records = [json.loads(p.read_text()) for p in journal_dir.glob("*.json")]
            applied = [r for r in records if r.get("state") == "applied"]
            if applied:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                return str(applied[0]["id"])
            assert proc.poll() is None, (tmp_path / "inject.stderr").read_text()
            time.sleep(0.1)
        raise AssertionError("the partition was never journalled as applied")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        err.close()


def test_up_undoes_an_old_partition_a_killed_harness_left(
    lab: Lab, sim_node: Node, journal: FaultJournal, tmp_path: Path
) -> None:
    docker = DockerHost()
    record_id = _inject_and_kill(sim_node, journal.directory, tmp_path)
    assert LAB_NETWORK not in docker.endpoints(_container(sim_node))  # the fault is on
    before = docker.inspect(_container(sim_node))["Id"]
    # two hours old: more than the plain sweep's bound, which would leave it applied
    path = journal.path_of(record_id)
    data = json.loads(path.read_text())
    data["t_created"] = time.time() - 7200
    path.write_text(json.dumps(data))

    lab.up(SKIP, journal=journal)

    assert LAB_NETWORK in docker.endpoints(_container(sim_node))
    assert docker.inspect(_container(sim_node))["Id"] == before  # undone, not rebuilt
    assert _answers(sim_node) == 200
    assert journal.unreverted() == []
    reverted = journal.read(record_id)
    assert reverted is not None and reverted.note == "reverted by sweep"


def test_up_recreates_a_container_taken_off_its_network_outside_faultkit(
    lab: Lab, sim_node: Node, journal: FaultJournal
) -> None:
    docker = DockerHost()
    before = docker.inspect(_container(sim_node))["Id"]
    docker.disconnect(_container(sim_node), LAB_NETWORK)  # no journal knows of this one

    lab.up(SKIP, journal=journal)

    assert docker.inspect(_container(sim_node))["Id"] != before
    assert LAB_NETWORK in docker.endpoints(_container(sim_node))
    assert _answers(sim_node) == 200


def test_up_recreates_a_container_whose_memory_limit_was_left_squeezed(
    lab: Lab, sim_node: Node, journal: FaultJournal
) -> None:
    docker = DockerHost()
    limit, swap = docker.memory_limits(_container(sim_node))
    assert limit > 0, "the sim node's spec sets a memory limit"
    docker.set_memory_limits(_container(sim_node), limit + 64 * 2**20, swap + 64 * 2**20)

    lab.up(SKIP, journal=journal)

    assert docker.memory_limits(_container(sim_node)) == (limit, swap)
    assert _answers(sim_node) == 200


def test_up_rebuilds_a_node_whose_left_fault_cannot_be_undone_and_supersedes_it(
    lab: Lab, sim_node: Node, journal: FaultJournal
) -> None:
    docker = DockerHost()
    before = docker.inspect(_container(sim_node))["Id"]
    # an undo step Docker refuses (a limit under its 6 MB minimum): the replay fails
    record = JournalRecord(
        id=f"memory-{NODE}-left", kind="memory", node=NODE, state="applied",
        description=f"memory squeeze on {NODE}", t_created=time.time(), pid=1,
        undo=[{"op": "memory", "host": LOCAL_DOCKER, "container": _container(sim_node),
               "memory": 1024, "memswap": 1024}])
    journal.begin(record)
    journal.release(record.id)  # as a killed harness would: the record is an orphan now

    lab.up(SKIP, journal=journal)

    assert docker.inspect(_container(sim_node))["Id"] != before
    assert _answers(sim_node) == 200
    assert journal.unreverted() == []
    left = journal.read(record.id)
    assert left is not None
    assert left.note == SUPERSEDED.format(container=_container(sim_node))
