"""Which inventory nodes a scenario runs on: ``--node``, ``--serving-config`` and the
parametrisation of the ``node`` fixture.

Contract:

- :func:`selected_nodes` — the inventory's nodes, or only those ``--node`` names (an
  unknown name is a :class:`pytest.UsageError`).
- :func:`with_candidate` — with ``--serving-config``, the inventory in which the (single)
  selected node is described as running the candidate config; unchanged otherwise.
- :func:`pytest_generate_tests` parametrises ``node`` over the selected nodes whose
  allowlist permits the test's ``@pytest.mark.fault(kind)`` (ids read
  ``test_kill[sim-vllm]``), narrowed by the ``node_kind`` and ``nodes`` markers, one node
  per Docker host under ``per_docker_host``; with a ``candidate_config`` fixture, over
  (node, candidate config) pairs instead; with a ``speculative_config`` fixture, over the
  pairs whose candidate changes the node's speculative decoding
  (``Inventory.speculation_change``).

Light: pytest and the standard library at import time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from faultkit.plugin.state import inventory_of, settings_of

if TYPE_CHECKING:
    from faultkit.inventory import Inventory, Node


def selected_nodes(config: pytest.Config, inventory: Inventory) -> list[Node]:
    wanted = settings_of(config).nodes
    if not wanted:
        return list(inventory.nodes)
    unknown = [n for n in wanted if n not in inventory.node_names]
    if unknown:
        raise pytest.UsageError(
            f"--node names {', '.join(unknown)}, not in {inventory.source} "
            f"(nodes: {', '.join(inventory.node_names)})"
        )
    return [n for n in inventory.nodes if n.name in wanted]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "node" not in metafunc.fixturenames:
        return
    inventory = with_candidate(metafunc.config, inventory_of(metafunc.config))
    marker = metafunc.definition.get_closest_marker("fault")
    kind = marker.args[0] if marker and marker.args else None
    nodes = [
        n for n in selected_nodes(metafunc.config, inventory) if kind is None or n.allows(kind)
    ]
    node_kind = metafunc.definition.get_closest_marker("node_kind")
    if node_kind is not None:
        nodes = [n for n in nodes if n.kind in node_kind.args]
    only = metafunc.definition.get_closest_marker("nodes")
    if only is not None:
        nodes = [n for n in nodes if n.name in only.args]
    for fixture in ("candidate_config", "speculative_config"):
        if fixture in metafunc.fixturenames:
            pairs = [(n, c) for n in nodes for c in n.candidate_configs
                     if c != n.serving_config and (fixture == "candidate_config"
                                                   or inventory.speculation_change(n, c))]
            metafunc.parametrize(
                ("node", fixture), pairs, ids=[f"{n.name}:{c}" for n, c in pairs]
            )
            return
    if metafunc.definition.get_closest_marker("per_docker_host") is not None:
        seen: set[str] = set()
        per_host = []
        for n in nodes:
            host = n.host_key
            if host not in seen:
                seen.add(host)
                per_host.append(n)
        nodes = per_host
    metafunc.parametrize("node", nodes, ids=[n.name for n in nodes])


def with_candidate(config: pytest.Config, inventory: Inventory) -> Inventory:
    """With --serving-config, the selected node is described as running the candidate."""
    name = settings_of(config).serving_config
    if not name:
        return inventory
    nodes = selected_nodes(config, inventory)
    if len(nodes) != 1:
        raise pytest.UsageError("--serving-config needs exactly one node: add --node NAME")
    if name not in inventory.serving_configs:
        raise pytest.UsageError(
            f"--serving-config {name!r} is not in {inventory.source} "
            f"(have: {', '.join(sorted(inventory.serving_configs))})"
        )
    target = nodes[0]
    swapped = [
        n.model_copy(update={"serving_config": name}) if n.name == target.name else n
        for n in inventory.nodes
    ]
    return inventory.model_copy(update={"nodes": swapped})
