"""Which journal records are the lab's own (``testbed up`` replays those whatever their age)."""

from __future__ import annotations

from faultkit.constants import LOCAL_DOCKER
from faultkit.inventory import Node
from faultkit.inventory.node import DockerRef
from faultkit.journal import JournalRecord
from testbed.settle import LabContainers

H2 = "tcp://127.0.0.1:18100"


def _node(name: str, host: str, container: str) -> Node:
    return Node(name=name, engine="sim", base_url="http://127.0.0.1:1", model="m",
                docker=DockerRef(host=host, container=container))


LAB = LabContainers.of([_node("llama", LOCAL_DOCKER, "faultkit-llama"),
                        _node("sim-vllm-h2", H2, "faultkit-sim-vllm-h2")])


def _record(*steps: dict[str, object]) -> JournalRecord:
    return JournalRecord(id="r", kind="k", node="n", description="d", undo=list(steps))


def test_a_record_on_lab_containers_only_is_the_labs() -> None:
    record = _record({"op": "connect", "host": LOCAL_DOCKER, "container": "faultkit-llama"},
                     {"op": "helpers_remove", "label": "x"})
    assert LAB.owns(record)
    assert LAB.node_of(record) == "llama"


def test_a_step_without_a_host_means_this_machines_engine() -> None:
    assert LAB.node_of(_record({"op": "unpause", "container": "faultkit-llama"})) == "llama"


def test_a_recreate_step_names_its_container_in_its_spec() -> None:
    record = _record({"op": "container", "host": H2, "spec": {"name": "faultkit-sim-vllm-h2"}})
    assert LAB.node_of(record) == "sim-vllm-h2"


def test_a_record_touching_any_other_container_is_not_the_labs() -> None:
    mixed = _record({"op": "connect", "host": LOCAL_DOCKER, "container": "faultkit-llama"},
                    {"op": "unpause", "host": LOCAL_DOCKER, "container": "users-vllm"})
    same_name_elsewhere = _record({"op": "unpause", "host": H2, "container": "faultkit-llama"})
    assert not LAB.owns(mixed)
    assert not LAB.owns(same_name_elsewhere)
    assert LAB.node_of(mixed) is None


def test_a_record_touching_no_container_is_not_the_labs() -> None:
    assert not LAB.owns(_record({"op": "shell", "command": "true"}))
    assert not LAB.owns(_record())
