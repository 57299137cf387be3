"""Which node an alert or an alerting rule belongs to, by its labels: the one rule for
alerts in Prometheus, Alertmanager and a page alike (the observer, the paging stages, a
postmortem's pages), and each rule's ``for:`` as it applies to a node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # read for its name and job only: no inventory machinery to import
    from faultkit.inventory import Node

__all__ = ["names_node", "rule_durations"]


def names_node(labels: Mapping[str, str], node: Node) -> bool:
    """An alert's labels name ``node`` (``node=<name>``) or its Prometheus job."""
    job = node.prometheus.job if node.prometheus else None
    return labels.get("node") == node.name or (job is not None and labels.get("job") == job)


def rule_durations(groups: Sequence[Mapping[str, Any]], node: Node) -> dict[str, float]:
    """Each alerting rule's ``for:`` (seconds) by alert name, as it applies to ``node``.

    Rules often share a name across nodes, one per node with its own ``for:`` (``faultkit
    rules`` writes them so): the rule whose labels name ``node`` holds, else one that names
    no node or job; another node's rule never dates this node's alerts.
    """
    durations: dict[str, float] = {}
    own: set[str] = set()
    for group in groups:
        for rule in group.get("rules", ()):
            name, labels = rule["name"], rule.get("labels") or {}
            duration = float(rule.get("duration", 0))
            if names_node(labels, node):
                durations[name] = duration
                own.add(name)
            elif name not in own and not {"node", "job"} & labels.keys():
                durations.setdefault(name, duration)
    return durations
