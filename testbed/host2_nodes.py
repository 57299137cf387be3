"""The nodes of the testbed's second Docker host (:mod:`testbed.host2`): which nodes of the
inventory live there, their container specs, creating or keeping them, and :func:`up`, which
brings the host and its nodes up.

A node's port the host's engine will not publish (after an unclean shutdown,
:func:`testbed.host2.is_held_port`) is answered by one restart of that engine
(:func:`testbed.host2.restart_engine`) and one more try: docs/architecture.md, "The second
host".
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Collection
from pathlib import Path

from faultkit.constants import LABEL_CONFIG_HASH, LABEL_NODE, LABEL_SERVING_CONFIG
from faultkit.docker.host import ContainerSpec, DockerHost
from faultkit.errors import DockerError
from faultkit.inventory import Inventory, Node, config_hash, load_inventory
from faultkit.probes.health import wait_ready
from faultkit.runtime.progress import step
from testbed._shell import Progress
from testbed.errors import TestbedError
from testbed.host2 import (
    HOST2_URL,
    INNER_NETWORK,
    INNER_REPO,
    INNER_STATE,
    LABELS,
    NODE_PORTS,
    down,
    ensure_images,
    inner,
    is_held_port,
    restart_engine,
    start_host,
)
from testbed.images import BASE_IMAGE
from testbed.paths import INVENTORY, state_dir
from testbed.settle import keep_existing


def host2_nodes(inventory: Inventory) -> list[Node]:
    """The inventory's nodes that live on the second host."""
    return [n for n in inventory.nodes if n.docker is not None and n.docker.host == HOST2_URL
            and n.serving_config]


def node_spec(inventory: Inventory, node: Node) -> ContainerSpec:
    """The container of a sim node on the second host (code and state from its mounts)."""
    assert node.docker is not None and node.serving_config
    if node.engine != "sim":
        raise TestbedError(f"node {node.name!r}: the second host runs sim nodes only")
    config = inventory.serving_config(node.serving_config)
    port = node.base_url.rsplit(":", 1)[-1].rstrip("/")
    if not port.isdigit() or int(port) not in NODE_PORTS:
        raise TestbedError(f"node {node.name!r}: base_url {node.base_url} must use a port in "
                           f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1} (published to host 2)")
    volumes = {INNER_REPO: {"bind": "/opt/faultkit", "mode": "ro"},
               f"{INNER_STATE}/sim/{node.name}": {"bind": "/var/lib/simnode", "mode": "rw"}}
    env = {**config.env, "PYTHONPATH": "/opt/faultkit"}
    wanted = config_hash(config, [volumes, env, node.base_url, "host2"])
    return ContainerSpec(
        name=node.docker.container, image=BASE_IMAGE, command=tuple(config.command), env=env,
        memory=config.memory, shm_size=config.shm_size, cpu_shares=config.cpu_shares,
        restart_policy=config.restart,
        restart_max_retries=config.restart_max_retries,
        ports={_listen_port(config.command): int(port)}, bind_ip="0.0.0.0",
        volumes=volumes, network=INNER_NETWORK,
        labels={**LABELS, LABEL_NODE: node.name, LABEL_SERVING_CONFIG: node.serving_config,
                LABEL_CONFIG_HASH: wanted},
    )


def _listen_port(command: list[str]) -> int:
    """The port a sim node listens on inside its container (``--port N``; the simulator's
    default 8000)."""
    for flag, value in itertools.pairwise(command):
        if flag == "--port":
            return int(value)
    return 8000


def ensure_nodes(inventory: Inventory, progress: Progress,
                 rebuild: Collection[str] = ()) -> list[Node]:
    """Create (or keep, or start) every second-host node of ``inventory``; wait until ready.
    The nodes named in ``rebuild`` are recreated whatever they are (:mod:`testbed.settle`)."""
    host = inner()
    host.ensure_network(INNER_NETWORK, LABELS)
    nodes = host2_nodes(inventory)
    for node in nodes:
        spec = node_spec(inventory, node)
        (state_dir("host2") / "sim" / node.name).mkdir(parents=True, exist_ok=True)
        try:
            _ensure_node(host, spec, rebuild=node.name in rebuild, progress=progress)
        except DockerError as exc:
            if not is_held_port(exc):
                raise
            progress(f"the second host's engine holds a port {spec.name} publishes ({exc}); "
                     "restarting that engine, which frees a port left by a container it did "
                     "not shut down cleanly (its data and running containers stay)")
            host = restart_engine()
            _ensure_node(host, spec, rebuild=node.name in rebuild, progress=progress)
    for node in nodes:
        config = inventory.serving_config(node.serving_config or "")
        asyncio.run(wait_ready(node, timeout_s=config.ready_timeout_s))
    return nodes


def _ensure_node(host: DockerHost, spec: ContainerSpec, *, rebuild: bool,
                 progress: Progress) -> None:
    """Keep (or start) the node's container when it matches ``spec``; else create it."""
    if keep_existing(host, spec.name, wanted_hash=spec.labels[LABEL_CONFIG_HASH],
                     network=INNER_NETWORK, memory=spec.memory, rebuild=rebuild,
                     progress=progress):
        return
    with step(progress, f"creating {spec.name} on the second host"):
        host.create(spec)


def up(inventory_path: Path = INVENTORY, progress: Progress = print,
       rebuild: Collection[str] = ()) -> float:
    """Bring the second host and its nodes up (idempotent); the seconds it took."""
    t0 = time.monotonic()
    start_host(progress)
    ensure_images(progress)
    nodes = ensure_nodes(load_inventory(inventory_path), progress, rebuild)
    took = time.monotonic() - t0
    progress(f"second host up in {took:.1f} s at {HOST2_URL}: "
             f"{', '.join(n.name for n in nodes) or 'no nodes'}")
    return took


def main(argv: list[str] | None = None) -> int:
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["up"]:
        up()
    elif args[:1] == ["down"]:
        down()
    else:
        print("usage: python -m testbed.host2_nodes up|down", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
