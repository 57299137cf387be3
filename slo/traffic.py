"""A node's traffic over its SLO window: the denominator of an incident's budget cost.

An incident's cost is its lost requests against the error budget of the node's rolling
SLO window ending at the incident: ``lost / ((1 − availability) × requests in the window)``
(docs/slo.md, "What an incident cost"), the same quantity ``faultkit budget`` lists for
each run. The requests are the ones the node's own server counted (its request counter's
``increase()`` over the window, which handles restarts), never the harness's: the
budget is spent against the users the node served, not against the harness's load.

Prometheus may hold less than the window (a new node, short retention): the count then
covers what it holds, and :class:`WindowTraffic` says how much that is — a reader can
tell a 30-day denominator from a 2-hour one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from faultkit.errors import FaultkitError
from faultkit.inventory import Node
from slo.profiles import NodeQueries
from slo.prom import Prometheus

__all__ = ["WindowTraffic", "window_traffic"]

#: the step at which the node's earliest sample in the window is looked for: the history
#: Prometheus holds is stated to within it
HISTORY_STEP = "1m"
#: a history younger than :data:`HISTORY_STEP` is looked for in this last span, each second
RECENT = "2m"


@dataclass(frozen=True, slots=True)
class WindowTraffic:
    """What a node's server counted over ``window`` up to ``at``.

    ``requests`` is ``None`` when it cannot be counted, and ``missing`` then says why and
    what to configure; ``history_s`` is how much of the window Prometheus holds for the
    node (``None`` when unknown)."""

    window: str
    at: float
    requests: float | None = None
    history_s: float | None = None
    promql: str | None = None
    missing: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``run.json`` ``slo_window`` (the count itself is ``slo_window_requests``)."""
        return {"window": self.window, "at": self.at, "history_s": self.history_s,
                "promql": self.promql, "missing": self.missing}


def window_traffic(prom: Prometheus, node: Node, window: str, at: float) -> WindowTraffic:
    """The requests ``node``'s server counted over ``window`` (a Prometheus duration such
    as ``30d``) ending at ``at``; never raises for a Prometheus that does not answer (the
    answer says so instead: a budget that cannot be counted is not a failed run)."""
    q = NodeQueries.for_node(node)
    if q is None:
        return WindowTraffic(window, at, missing=(
            f"{node.name} is not scraped by Prometheus: give it prometheus.job in the "
            "inventory to count its requests"))
    promql = q.increase(q.profile.requests_total, window)
    if promql is None:
        return WindowTraffic(window, at, missing=(
            f"{q.profile.engine} exports no request counter, so {node.name}'s budget cannot "
            "be counted in requests: count them where they pass (a gateway in front of it) "
            "or serve it with an engine that exports one"))
    try:
        requests = _finite(prom.query_value(promql, at))
        # a history younger than the coarse step has no step in it: look again, finely
        history_s = next((h for h in (
            _finite(prom.query_value(_history(q.up(), window, HISTORY_STEP, at), at)),
            _finite(prom.query_value(_history(q.up(), RECENT, "1s", at), at)),
        ) if h is not None), None)
    except FaultkitError as exc:
        return WindowTraffic(window, at, promql=promql,
                             missing=f"Prometheus did not answer the window's count ({exc})")
    if not requests:
        return WindowTraffic(window, at, history_s=history_s, promql=promql, missing=(
            f"Prometheus counted no requests for {node.name} in the {window} window "
            "(no traffic recorded yet)"))
    return WindowTraffic(window, at, requests=round(requests), history_s=history_s,
                         promql=promql)


def _history(up: str, window: str, step: str, at: float) -> str:
    """PromQL: how long before ``at`` the node's first ``up`` sample in ``window`` is,
    looked for every ``step`` (a subquery: its steps are aligned to multiples of it)."""
    return f"{at:.3f} - min_over_time(timestamp({up})[{window}:{step}])"


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value
