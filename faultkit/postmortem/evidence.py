"""What a postmortem reads from monitoring: one node's series over one window, as plain data.

:class:`NodeEvidence` is everything :func:`faultkit.postmortem.incidents.find_incidents`
judges, and nothing it could not get from Prometheus alone: the node's ``up`` samples, the
firing samples of the alerts for the node, and the engine's ``process_start_time_seconds``
where it exposes one. Times are Unix epoch seconds (float) as Prometheus stored them: a
scrape is stamped when it *began*, an alert sample with the evaluation that produced it.
Pure data; :mod:`faultkit.postmortem.read` fills it from Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["AlertSeries", "NodeEvidence", "Samples"]

#: ``(t, value)`` pairs, oldest first; ``t`` in epoch seconds
Samples = tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class AlertSeries:
    """One ``ALERTS{alertstate="firing"}`` series for the node: the alert's name, its labels
    and the stamps of its firing samples, oldest first (one per rule evaluation while it
    fired; none while it did not)."""

    name: str
    labels: Mapping[str, str]
    firing: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class NodeEvidence:
    """One node's monitoring over ``[t_from, t_to]`` (epoch seconds).

    ``up`` holds every stored ``up`` sample of the node's job in the window (1: the scrape
    answered, 0: it failed), merged over its ``up_series`` series (one per scrape target;
    a node is expected to be one target). ``alerts`` were read from ``alert_lookback_s``
    before ``t_from``, so an alert already firing when the window began is seen as such.
    ``process_start`` is ``None`` when the engine exposes no start time
    (``process_start_metric`` is then ``None`` too), never ``()`` for "not asked".
    """

    node: str
    job: str
    #: the PromQL label matchers the series were selected with (``job="…",<selector>``)
    selector: str
    prometheus_url: str
    t_from: float
    t_to: float
    #: the inventory's scrape interval: what the bounds are expected to be as tight as
    scrape_interval_s: float
    up: Samples
    up_series: int = 1
    alerts: tuple[AlertSeries, ...] = ()
    alert_lookback_s: float = 0.0
    process_start_metric: str | None = None
    #: one ``Samples`` per series of the start-time metric (one per target)
    process_start: tuple[Samples, ...] | None = None
    #: what the reader could not read, one line each (shown in the report)
    missing: tuple[str, ...] = field(default=())
