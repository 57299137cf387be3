"""Throwaway llama-server nodes for the fault integration tests (never the lab's own node).

``scratch_node(inventory, name)`` creates a second llama-server container from the lab
node's serving config on a free 127.0.0.1 port, labelled ``faultkit.owner=tests``, waits
until it serves, and returns an :class:`Inventory` holding just that node (plus the lab's
serving configs). Remove it with :func:`remove_scratch`.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from faultkit._docker import ContainerSpec, DockerHost, docker_host
from faultkit.errors import ContainerNotFound
from faultkit.health import wait_ready
from faultkit.inventory import Inventory, Node
from testbed.lab import LAB_NETWORK, container_port, lab_mounts

TEST_LABELS = {"faultkit.owner": "tests"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scratch_node(lab_inventory: Inventory, name: str, **node_changes: Any) -> tuple[Inventory, Node]:
    base = lab_inventory.node("llama")
    assert base.serving_config
    config = lab_inventory.serving_config(base.serving_config)
    port = free_port()
    container = f"faultkit-test-{name}"
    node = base.model_copy(update={
        "name": name,
        "base_url": f"http://127.0.0.1:{port}",
        "docker": base.docker.model_copy(update={"container": container}) if base.docker else None,
        "prometheus": None,
        **node_changes,
    })
    host = docker_host(node.docker.host if node.docker else "unix:///var/run/docker.sock")
    remove_scratch(host, container)
    volumes, env = lab_mounts(base, lambda _m: None)
    image = host.state(base.docker.container).image if base.docker else config.image
    host.create(ContainerSpec(
        name=container, image=image, command=tuple(config.command), env={**config.env, **env},
        memory=config.memory, restart_policy=config.restart,
        ports={container_port(base, config): port}, volumes=volumes, network=LAB_NETWORK,
        labels={**TEST_LABELS, "faultkit.node": name,
                "faultkit.serving-config": base.serving_config},
    ))
    asyncio.run(wait_ready(node, timeout_s=60))
    inventory = Inventory(
        nodes=[node], serving_configs=dict(lab_inventory.serving_configs),
        prometheus=lab_inventory.prometheus, source="<scratch>",
    )
    return inventory, node


def remove_scratch(host: DockerHost, container: str) -> None:
    try:
        host.remove(container)
    except ContainerNotFound:
        pass
