"""What a lab node's container is made of beyond its serving config: the port its engine
listens on, how other lab containers reach it, what the lab mounts into it, and the lab
gateway's router configs. :class:`testbed.lab.Lab` and the scratch containers
(:mod:`testbed.scratch`) build their containers from these.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from faultkit.inventory import Inventory, Node, ServingConfig
from testbed import llama
from testbed._shell import Progress
from testbed.errors import TestbedError
from testbed.gateway_config import GatewayVariant, RouterPolicy
from testbed.paths import state_dir

__all__ = [
    "DEFAULT_CONTAINER_PORTS",
    "LAB_GATEWAY_CONFIGS",
    "LAB_GATEWAY_POLICY",
    "container_address",
    "container_port",
    "gateway_variants",
    "lab_mounts",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONTAINER_PORTS = {
    "llamacpp": 8080, "vllm": 8000, "sglang": 30000, "tgi": 80, "litellm": 4000,
}  # fmt: skip


#: The lab gateway's router (docs/gateway.md has what each knob does, as measured): two
#: retries, an upstream cooled down at its 2nd failure, for 10 s; 30 s per attempt.
LAB_GATEWAY_POLICY = RouterPolicy(num_retries=2, allowed_fails=1, cooldown_s=10.0, timeout_s=30.0)

#: What each of the lab gateway's serving configs (testbed/inventory.yaml) configures: the
#: file its command names (``--config /etc/litellm/FILE``) is written from it at every
#: ``up``, one per serving and candidate config of the node, so a rollout switches file.
LAB_GATEWAY_CONFIGS: dict[str, GatewayVariant] = {
    "gateway-good": GatewayVariant(LAB_GATEWAY_POLICY),
    # KNOWN BAD: retries off. A failed attempt is the user's failure: a dead upstream costs
    # its users allowed_fails + 1 requests per cooldown window (docs/gateway.md)
    "gateway-no-retries": GatewayVariant(dataclasses.replace(LAB_GATEWAY_POLICY, num_retries=0)),
    # KNOWN BAD: sim-sglang at a wrong port (a typo: 30001 for 30000). The proxy starts and
    # its readiness says 200, but it never reaches that upstream
    "gateway-bad-upstream": GatewayVariant(
        LAB_GATEWAY_POLICY, {"sim-sglang": "http://faultkit-sim-sglang:30001"}
    ),
}


def container_address(inventory: Inventory, node: Node) -> str:
    """The URL another lab container reaches ``node`` at: its container name (Docker's DNS
    on the ``faultkit-lab`` network; it survives a restart, an IP may not) and the port the
    engine listens on inside its container. The inventory's ``base_url`` is the host's
    view (127.0.0.1 and the published port), which means the gateway container itself."""
    if node.docker is None or not node.serving_config:
        raise TestbedError(
            f"node {node.name!r} has no lab container: a lab gateway cannot reach it"
        )
    port = container_port(node, inventory.serving_config(node.serving_config))
    return f"http://{node.docker.container}:{port}"


def container_port(node: Node, config: ServingConfig) -> int:
    """The port the engine listens on inside the container (``--port N`` in its command)."""
    cmd = config.command
    for i, arg in enumerate(cmd[:-1]):
        if arg == "--port":
            return int(cmd[i + 1])
    engine = node.personality if node.engine == "sim" and node.personality else node.engine
    return DEFAULT_CONTAINER_PORTS.get(engine, 8000)


def lab_mounts(
    node: Node, progress: Progress, inventory: Inventory | None = None
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """What the lab mounts into a node's container beyond its serving config (volumes, env).

    A gateway (``engine: litellm``) needs ``inventory``: its proxy config is written from
    its upstreams, each named by :func:`container_address`. The lab's gateway is open
    (no master key: ``require_key=False``): it is published on 127.0.0.1 only.
    """
    if node.engine == "llamacpp":
        return (
            {
                str(llama.ensure_llama_server(progress)): {"bind": "/opt/llama", "mode": "ro"},
                str(llama.ensure_model(progress)): {"bind": "/models", "mode": "ro"},
            },
            {},
        )
    if node.engine == "sim":
        sim_state = state_dir(f"sim/{node.name}")
        return (
            {
                str(REPO_ROOT): {"bind": "/opt/faultkit", "mode": "ro"},
                str(sim_state): {"bind": "/var/lib/simnode", "mode": "rw"},
            },
            {"PYTHONPATH": "/opt/faultkit"},
        )
    if node.engine == "vllm":
        from testbed import vllm_node

        vllm_node.ensure_vllm_env(progress)
        vllm_node.ensure_vllm_model(progress)
        return vllm_node.vllm_container_mounts(), vllm_node.vllm_container_env()
    if node.engine == "litellm":
        from testbed import litellm_node

        if inventory is None:
            raise TestbedError(f"gateway {node.name!r}: its upstreams come from the inventory")
        lab = inventory
        volumes, env, _command = litellm_node.litellm_lab_setup(
            lab,
            node,
            progress,
            address=lambda n: container_address(lab, n),
            require_key=False,
            variants=gateway_variants(lab, node),
        )
        return volumes, env
    raise TestbedError(f"the testbed cannot run engine {node.engine!r} (node {node.name!r})")


def gateway_variants(inventory: Inventory, node: Node) -> dict[str, GatewayVariant]:
    """Config file name → :class:`GatewayVariant` for each serving config of gateway
    ``node`` (its own and its candidates) and every other gateway config of the inventory
    the lab knows (:data:`LAB_GATEWAY_CONFIGS`): a config kept out of the catalogue's
    candidates (``gateway-no-retries``) can still be rolled out by a targeted run."""
    from testbed.litellm_node import config_file_of

    files: dict[str, GatewayVariant] = {}
    known = [name for name in LAB_GATEWAY_CONFIGS if name in inventory.serving_configs]
    for name in dict.fromkeys([node.serving_config or "", *node.candidate_configs, *known]):
        if name not in LAB_GATEWAY_CONFIGS:
            raise TestbedError(
                f"gateway {node.name!r}: serving config {name!r} is not one the lab can write "
                f"(testbed.lab_nodes.LAB_GATEWAY_CONFIGS: {', '.join(LAB_GATEWAY_CONFIGS)})"
            )
        files[config_file_of(inventory.serving_config(name).command)] = LAB_GATEWAY_CONFIGS[name]
    return files
