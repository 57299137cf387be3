"""Which node an alert belongs to, by its labels: the one rule for alerts in Prometheus,
Alertmanager and a page alike (the observer, the paging stages, a postmortem's pages)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # read for its name and job only: no inventory machinery to import
    from faultkit.inventory import Node

__all__ = ["names_node"]


def names_node(labels: Mapping[str, str], node: Node) -> bool:
    """An alert's labels name ``node`` (``node=<name>``) or its Prometheus job."""
    job = node.prometheus.job if node.prometheus else None
    return labels.get("node") == node.name or (job is not None and labels.get("job") == job)
