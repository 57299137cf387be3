"""``make_fault``: the one way to build a fault, with the blast-radius policy checked first.

The policy (checked before anything is touched; a refusal raises :class:`FaultRefused`):

- the node must be in the inventory (when an inventory is given, always in the CLI and
  the pytest plugin);
- the node must not be ``protected`` and its ``faults`` allowlist must name the kind (or ``*``);
- the fault's own check, with its parameters (e.g. ``node_restart`` refuses when another
  node on the same Docker host would be hit against its policy; ``kill`` and the netns
  faults refuse a node whose Docker engine is not on this machine).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from faultkit.errors import FaultParamError, FaultRefused
from faultkit.faults.base import Emit, Fault, Guard
from faultkit.inventory import Inventory, Node
from faultkit.journal import FaultJournal
from faultkit.model.kinds import FAULT_KINDS, FAULTS


def fault_class(kind: str) -> type[Fault]:
    """The class implementing ``kind``; unknown kinds raise :class:`FaultParamError`."""
    if kind not in FAULTS:
        known = ", ".join(sorted(FAULTS))
        hint = " (in the inventory's catalogue, not implemented)" if kind in FAULT_KINDS else ""
        raise FaultParamError(f"unknown fault {kind!r}{hint}; known faults: {known}",
                              param="kind", value=kind, allowed=known)
    implementation = FAULTS[kind].implementation
    assert implementation is not None  # every fault has one; harness actions are not FAULTS
    module, attr = implementation.split(":")
    cls = getattr(importlib.import_module(module), attr)
    assert isinstance(cls, type)
    assert issubclass(cls, Fault)
    return cls


def check_policy(kind: str, node: Node, inventory: Inventory | None) -> None:
    """Raise :class:`FaultRefused` unless the blast-radius policy allows ``kind`` on ``node``."""
    if inventory is not None:
        known = {n.name: n for n in inventory.nodes}
        if node.name not in known or known[node.name] != node:
            raise FaultRefused(
                f"refused: node {node.name!r} is not in the inventory {inventory.source} "
                f"(nodes: {', '.join(inventory.node_names)}); faults only run on inventory nodes"
            )
    if node.protected:
        raise FaultRefused(
            f"refused: node {node.name!r} is protected (protected: true in the inventory); "
            "no fault runs on it. Nothing was done."
        )
    if not node.allows(kind):
        allowed = ", ".join(node.faults) or "none"
        raise FaultRefused(
            f"refused: node {node.name!r} does not allow fault {kind!r} (its allowlist: "
            f"{allowed}); add it to the node's `faults:` in the inventory. Nothing was done."
        )


def make_fault(
    kind: str,
    node: Node | str,
    *,
    inventory: Inventory | None = None,
    timeline: Emit | None = None,
    journal: FaultJournal | None = None,
    guards: Sequence[Guard] = (),
    dry_run: bool = False,
    **params: Any,
) -> Fault:
    """Build a fault after checking the blast radius; ``node`` may be a name (with inventory)."""
    cls = fault_class(kind)
    if isinstance(node, str):
        if inventory is None:
            raise FaultRefused(f"refused: node {node!r} given by name but no inventory given")
        names = inventory.node_names
        if node not in names:
            raise FaultRefused(
                f"refused: no node {node!r} in the inventory {inventory.source} "
                f"(nodes: {', '.join(names)}). Nothing was done."
            )
        node = inventory.node(node)
    check_policy(kind, node, inventory)
    cls.check_blast_radius(node, inventory, cls.parse_params(params))
    return cls(
        node, inventory=inventory, timeline=timeline, journal=journal, guards=guards,
        dry_run=dry_run, **params,
    )
