"""Throwaway llama-server nodes for fault trials (never the lab's own node): the fault
integration tests and the torture bench (:mod:`testbed.torture`) act on these.

``scratch_node(inventory, name)`` creates a second llama-server container from the lab
node's serving config on a free 127.0.0.1 port, labelled ``faultkit.owner=tests``, waits
until it serves, and returns an :class:`Inventory` holding just that node (plus the lab's
serving configs). Remove it with :func:`remove_scratch`. :func:`snapshot` is what
"restored" compares: the container's spec, networks and aliases, memory limits, paused and
running, the iptables rules faultkit tags in the container's namespace and on the host, and
the root qdiscs it owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from typing import Any

import yaml

from faultkit.constants import LABEL_NODE, LABEL_OWNER, LABEL_SERVING_CONFIG, LOCAL_DOCKER
from faultkit.docker.host import ContainerSpec, DockerHost, docker_host
from faultkit.errors import ContainerNotFound
from faultkit.inventory import Inventory, Node
from faultkit.probes.health import wait_ready
from testbed.lab import LAB_NETWORK
from testbed.lab_nodes import container_port, lab_mounts

TEST_LABELS = {LABEL_OWNER: "tests"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scratch_node(
    lab_inventory: Inventory, name: str, *, base_name: str = "llama", **node_changes: Any
) -> tuple[Inventory, Node]:
    base = lab_inventory.node(base_name)
    # the base node's config, or the one ``node_changes`` names (a known-bad config, say)
    config_name = node_changes.get("serving_config") or base.serving_config
    assert config_name
    config = lab_inventory.serving_config(config_name)
    port = free_port()
    container = f"faultkit-test-{name}"
    node = base.model_copy(update={
        "name": name,
        "base_url": f"http://127.0.0.1:{port}",
        "docker": base.docker.model_copy(update={"container": container}) if base.docker else None,
        "prometheus": None,
        **node_changes,
    })
    host = docker_host(node.docker.host if node.docker else LOCAL_DOCKER)
    remove_scratch(host, container)
    volumes, env = lab_mounts(node, lambda _m: None)
    image = host.state(base.docker.container).image if base.docker else config.image
    host.create(ContainerSpec(
        name=container, image=image, command=tuple(config.command), env={**config.env, **env},
        memory=config.memory, cpu_shares=config.cpu_shares, restart_policy=config.restart,
        ports={container_port(base, config): port}, volumes=volumes, network=LAB_NETWORK,
        labels={**TEST_LABELS, LABEL_NODE: name,
                LABEL_SERVING_CONFIG: config_name},
    ))
    asyncio.run(wait_ready(node, timeout_s=config.ready_timeout_s + 30))
    inventory = Inventory(
        nodes=[node], serving_configs=dict(lab_inventory.serving_configs),
        prometheus=lab_inventory.prometheus, source="<scratch>",
    )
    return inventory, node


def write_inventory(inventory: Inventory, path: Path) -> Path:
    """Write ``inventory`` as YAML (for `faultkit inject --inventory`)."""
    path.write_text(yaml.safe_dump(inventory.model_dump(mode="json"), sort_keys=False))
    return path


def remove_scratch(host: DockerHost, container: str) -> None:
    with contextlib.suppress(ContainerNotFound):
        host.remove(container)


def snapshot(node: Node) -> dict[str, Any]:
    """What "restored" compares: container config, networks (+aliases), limits, netns state."""
    from faultkit.platform import netns
    assert node.docker is not None
    host = docker_host(node.docker.host)
    name = node.docker.container
    attrs = host.inspect(name)
    spec = host.spec_of(name)
    networks = {
        net: sorted(a for a in (ep.get("Aliases") or []) if a != attrs["Id"][:12])
        for net, ep in host.endpoints(name).items()
    }
    st = host.state(name)
    # where the container's netns is reached: a proven PID here, a helper on another host
    from faultkit.platform import platform_for

    pid = platform_for(host.url, host).netns(name, "snapshot") if st.running else None
    return {
        "spec": spec,
        "networks": networks,
        "limits": host.memory_limits(name),
        "paused": st.paused,
        "running": st.running,
        "stopped_processes": stopped_processes(node) if st.running else 0,
        "netns_rules": netns.tagged_rules(pid, "filter") if pid is not None else None,
        "host_nat_rules": netns.tagged_rules(None, "nat"),
        "qdiscs": [dev for dev in netns.interfaces(pid) if netns.root_qdisc_is_ours(pid, dev)]
        if pid is not None else None,
    }


def stopped_processes(node: Node) -> int:
    """How many processes of the node's container are stopped by a signal (state ``T``),
    read from this machine's ``/proc`` — where the second host's containers run too — by
    the cgroup that names the container's id: evidence the fault code never produced."""
    assert node.docker is not None
    container_id = str(docker_host(node.docker.host).inspect(node.docker.container)["Id"])
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if container_id not in (entry / "cgroup").read_text():
                continue
            state = (entry / "stat").read_text().rpartition(")")[2].split()[:1]
        except OSError:
            continue
        count += state == ["T"]
    return count


async def assert_restored(node: Node, before: dict[str, Any]) -> None:
    """The node is as ``before`` and serving again."""
    await wait_ready(node, timeout_s=60)
    after = await asyncio.to_thread(snapshot, node)
    assert after == before
