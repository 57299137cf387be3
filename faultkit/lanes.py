"""Lanes: split a scenario run into groups of nodes that can be tested side by side.

Two scenarios may run at the same time only if nothing one does can show in the other's
measurement. A fault on a node shows in that node's figures, and in the figures of every
gateway routing to it; so a gateway and its upstreams form one *group*, and every other
node is a group of its own. Scenarios that act on or load several nodes at once
(``node_restart``, ``contained_failure``: the ``exclusive`` marker) never run beside
anything: they get a pass of their own after the lanes. Two floods (``overload``) never run
at once either: they take the machine lock ``flood`` (:mod:`faultkit.machinelock`).

:func:`plan_lanes` packs the groups into at most ``lanes`` lanes, heaviest first onto the
lightest lane (longest-processing-time first). The weight of a node is how long its share
of the catalogue takes, relative to a simulated node (:data:`ENGINE_WEIGHT`, measured on
the testbed: README, "CI time"). Each lane is one ``pytest scenarios --node A,B -m "not
exclusive"`` process; the lanes share the machine, so more lanes than cores buys nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from faultkit.inventory import Inventory, Node

__all__ = ["ENGINE_WEIGHT", "EXCLUSIVE_MARK", "Lane", "LanePlan", "node_groups", "plan_lanes",
           "plan_passes"]

#: the marker of scenarios that never run beside another one
EXCLUSIVE_MARK = "exclusive"

#: how long a node's share of the catalogue takes relative to a simulated node (1.0):
#: CI run B on the testbed, scenario time per node: vllm 545 s, llama 288 s,
#: sim-vllm 260 s, sim-sglang 213 s (a gateway has two scenarios)
ENGINE_WEIGHT: Mapping[str, float] = {"vllm": 2.2, "llamacpp": 1.2, "sim": 1.0, "litellm": 0.4}


@dataclass(frozen=True)
class Lane:
    """The nodes one scenario process tests, and their summed weight."""

    nodes: tuple[str, ...]
    weight: float

    def node_option(self) -> str:
        """The value of ``--node`` for this lane's process."""
        return ",".join(self.nodes)


def node_groups(inventory: Inventory, names: Sequence[str] | None = None) -> list[list[str]]:
    """The inventory's nodes (or only ``names``) in groups that share nothing: a gateway
    joins the group of every upstream it routes to. Groups keep inventory order."""
    wanted = [n for n in inventory.nodes if names is None or n.name in names]
    parent = {n.name: n.name for n in wanted}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for node in wanted:
        for upstream in node.upstreams:
            if upstream in parent:
                parent[root(upstream)] = root(node.name)
    groups: dict[str, list[str]] = {}
    for node in wanted:
        groups.setdefault(root(node.name), []).append(node.name)
    return list(groups.values())


def _weight(node: Node) -> float:
    return ENGINE_WEIGHT.get(node.engine, 1.0)


def plan_lanes(
    inventory: Inventory, lanes: int, names: Sequence[str] | None = None
) -> list[Lane]:
    """At most ``lanes`` lanes over the node groups, balanced by weight; never an empty
    lane. ``lanes`` must be ≥ 1."""
    if lanes < 1:
        raise ValueError(f"lanes must be 1 or more, not {lanes}")
    by_name = {n.name: n for n in inventory.nodes}
    groups = sorted(
        node_groups(inventory, names),
        key=lambda g: -sum(_weight(by_name[n]) for n in g),
    )
    bins: list[tuple[list[str], float]] = [([], 0.0) for _ in range(min(lanes, len(groups)))]
    for group in groups:
        i = min(range(len(bins)), key=lambda k: bins[k][1])
        members, weight = bins[i]
        bins[i] = ([*members, *group], weight + sum(_weight(by_name[n]) for n in group))
    order = {n.name: i for i, n in enumerate(inventory.nodes)}
    return [
        Lane(tuple(sorted(members, key=order.__getitem__)), round(weight, 3))
        for members, weight in bins
    ]


@dataclass(frozen=True)
class LanePlan:
    """A whole catalogue run: ``lanes`` side by side, then the ``alone`` nodes' scenarios in
    one process, then the exclusive scenarios (on every node) in another."""

    lanes: tuple[Lane, ...]
    alone: tuple[str, ...]


def plan_passes(
    inventory: Inventory, lanes: int, alone_engines: Collection[str] = ()
) -> LanePlan:
    """The nodes whose engine is in ``alone_engines`` are kept out of the lanes and tested
    after them; the others are planned in at most ``lanes`` lanes (:func:`plan_lanes`). A
    gateway kept apart frees its upstreams from sharing its lane.

    Which engines must run alone is a property of the machine, not of the engines: on the
    2-core testbed vLLM's, llama.cpp's and LiteLLM's figures are CPU-bound, and vLLM's and
    LiteLLM's broke their objectives beside other lanes (README, "CI")."""
    alone = tuple(n.name for n in inventory.nodes if n.engine in alone_engines)
    together = [n.name for n in inventory.nodes if n.engine not in alone_engines]
    planned = tuple(plan_lanes(inventory, lanes, together)) if together else ()
    return LanePlan(lanes=planned, alone=alone)
