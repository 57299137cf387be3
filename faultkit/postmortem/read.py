"""Reading one node's monitoring over a window from Prometheus (:class:`NodeEvidence`).

Every series is read as the raw samples Prometheus stored (a range selector evaluated at
the window's end, :meth:`slo.prom.Prometheus.query_samples`), never as a range query's
evaluation steps: a scrape's own stamp is what the bounds rest on. What is read:

- ``up{job="…",<selector>}`` over ``[t_from, t_to]``;
- ``ALERTS{alertstate="firing"}`` labelled ``job="<the node's job>"`` or
  ``node="<the node's name>"`` (how faultkit's rules label them, slo/rules.py), from
  :data:`ALERT_LOOKBACK_S` before ``t_from``, so an alert already firing is known as such;
- the engine's process start time, where its profile (:mod:`slo.profiles`) names one.

An unreachable Prometheus raises :class:`slo.errors.PrometheusUnavailable` (from the
client); "no samples" is returned as empty evidence for the caller to judge.
"""

from __future__ import annotations

import math

from faultkit.inventory import Node
from faultkit.postmortem.evidence import AlertSeries, NodeEvidence, Samples
from slo.profiles import NodeQueries, node_selector, profile_for
from slo.prom import Prometheus, Series

__all__ = ["ALERT_LOOKBACK_S", "metrics_not_served", "read_evidence", "read_request_counters"]

#: how far before the window alerts are read, to tell an alert that began firing in the
#: window from one that was firing already (s)
ALERT_LOOKBACK_S = 300.0


def _label(value: str) -> str:
    """A PromQL string literal holding ``value``."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _samples(series: Series, t_from: float, t_to: float) -> Samples:
    return tuple(sorted((t, v) for t, v in series.values if t_from <= t <= t_to))


def read_evidence(prom: Prometheus, node: Node, t_from: float, t_to: float, *,
                  scrape_interval_s: float) -> NodeEvidence:
    """The node's ``up``, alerts and process start times over ``[t_from, t_to]`` (epoch s).

    Raises ``ValueError`` when the node has no ``prometheus`` job in the inventory (the
    command refuses it first), and :class:`slo.errors.PrometheusError` when Prometheus
    cannot be asked or refuses a query.
    """
    selector = node_selector(node)
    queries = NodeQueries.for_node(node)
    if selector is None or queries is None or node.prometheus is None:
        raise ValueError(f"node {node.name!r} has no prometheus job in the inventory")
    # one second more than the window: a range selector leaves its start out
    span = math.ceil(t_to - t_from) + 1
    up_series = prom.query_samples(f"up{{{selector}}}[{span}s]", t_to)
    up = tuple(sorted(s for series in up_series for s in _samples(series, t_from, t_to)))

    alert_span = span + math.ceil(ALERT_LOOKBACK_S)
    alert_from = t_from - ALERT_LOOKBACK_S
    seen: dict[tuple[tuple[str, str], ...], AlertSeries] = {}
    for matcher in (f"job={_label(node.prometheus.job)}", f"node={_label(node.name)}"):
        for series in prom.query_samples(
                f'ALERTS{{alertstate="firing",{matcher}}}[{alert_span}s]', t_to):
            key = tuple(sorted(series.labels.items()))
            stamps = tuple(t for t, _ in _samples(series, alert_from, t_to))
            if stamps:
                seen[key] = AlertSeries(series.labels.get("alertname", "?"),
                                        dict(series.labels), stamps)

    missing: list[str] = []
    metric = profile_for(node).process_start
    starts: tuple[Samples, ...] | None = None
    if metric is None:
        missing.append(f"the {node.engine} engine exposes no process start time: "
                       "restarts are not seen")
    else:
        promql = queries.series(metric)
        assert promql is not None
        starts = tuple(found for series in prom.query_samples(f"{promql}[{span}s]", t_to)
                       if (found := _samples(series, t_from, t_to)))
        if not starts:
            missing.append(f"no {metric.name} samples in the window: restarts are not seen")
    if not seen:
        missing.append("no alert for the node fired in the window (or none was loaded: "
                       "the rules in force then are not recorded)")

    return NodeEvidence(
        node=node.name, job=node.prometheus.job, selector=selector, prometheus_url=prom.url,
        t_from=t_from, t_to=t_to, scrape_interval_s=scrape_interval_s, up=up,
        up_series=sum(1 for s in up_series if _samples(s, t_from, t_to)),
        alerts=tuple(seen[k] for k in sorted(seen)), alert_lookback_s=ALERT_LOOKBACK_S,
        process_start_metric=None if metric is None else metric.name,
        process_start=starts, missing=tuple(missing),
    )


def read_request_counters(prom: Prometheus, node: Node, t_from: float, t_to: float
                          ) -> tuple[tuple[Samples, ...] | None, tuple[Samples, ...] | None,
                                     str | None]:
    """The raw samples of the engine's request counter and server-error counter over
    ``[t_from, t_to]``, one ``Samples`` per series, and the request counter's PromQL.
    ``None`` for a counter the engine's profile does not name (llama.cpp has neither)."""
    queries = NodeQueries.for_node(node)
    if queries is None:
        return None, None, None
    span = math.ceil(t_to - t_from) + 1

    def read(promql: str | None) -> tuple[Samples, ...] | None:
        if promql is None:
            return None
        return tuple(found for series in prom.query_samples(f"{promql}[{span}s]", t_to)
                     if (found := _samples(series, t_from, t_to)))

    requests = queries.series(queries.profile.requests_total)
    return read(requests), read(queries.series(queries.profile.errors_total)), requests


def metrics_not_served(prom: Prometheus, node: Node) -> str | None:
    """Why the node's scrapes fail although it answers HTTP — its scrape target's last
    error is an HTTP status (``server returned HTTP status 404 Not Found``: llama.cpp
    without ``--metrics``, a wrong metrics path) — or ``None`` (its target answered, is
    down for another reason such as a refused connection, or is not among Prometheus'
    targets). Such a node's ``up`` is 0 whether it serves or not: no outage can be told
    from it."""
    if node.prometheus is None:
        return None
    for target in prom.targets():
        labels = target.get("labels") or {}
        if labels.get("job") != node.prometheus.job or labels.get("node") not in (None,
                                                                                 node.name):
            continue
        error = str(target.get("lastError") or "")
        if target.get("health") != "up" and "HTTP status" in error:
            return f"{target.get('scrapeUrl') or labels.get('instance')}: {error}"
    return None

