"""``faultkit postmortem``: the report of an outage faultkit did not cause, from the node's
monitoring alone (:mod:`faultkit.postmortem`, docs/postmortem.md).

``faultkit postmortem --node NAME --from T1 [--to T2]`` reads the node's ``up``, alerts and
process start times from Prometheus over the window and finds each outage in it; each
incident becomes a run directory under ``--runs-dir`` with the shared incident report
(Docker's events, the container's state and log where its host answers, the pager's
pages; users affected estimated from the server's counters), and
``postmortem.json``/``postmortem.md`` index them in a directory of their own. Several
nodes — ``--node`` repeated or comma-separated, a gateway bringing its upstreams — each
get theirs, and each index names the other nodes' incidents that overlapped its own. Bad
input — an unknown node, ``--from`` not before ``--to``, Prometheus unreachable, a window
that starts before the oldest sample Prometheus keeps, no sample of a node in the
window, a node whose every scrape failed with an HTTP status (its metrics not served) —
is one line and exit status 2, and nothing is written (every node is checked and read
before anything is written).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import click

from faultkit.commands.input import BadInput, inventory_option
from faultkit.inventory import Inventory, Node, load_inventory
from faultkit.model.durations import human_duration
from faultkit.model.timestamps import parse_rfc3339
from faultkit.postmortem import (
    POSTMORTEM_MD,
    find_incidents,
    postmortem_of,
    read_evidence,
    write_postmortem,
)
from faultkit.postmortem.collect import collect_incident, write_incident
from faultkit.postmortem.read import metrics_not_served
from faultkit.postmortem.related import NodeIncidents, related_incidents
from faultkit.postmortem.render import utc
from faultkit.rundir import RunDir
from slo.errors import PrometheusUnavailable
from slo.prom import Prometheus

#: the longest window read at once (s): its raw samples come back in one answer
MAX_WINDOW_S = 7 * 86400.0


class Instant(click.ParamType[float]):
    """A moment: ISO-8601 / RFC 3339 (``YYYY-MM-DDTHH:MM:SSZ``; no offset: UTC) or Unix
    epoch seconds (``1796614000.5``) → epoch seconds."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        raw = str(value).strip()
        try:
            t: float | None = float(raw)
        except ValueError:
            try:
                t = parse_rfc3339(raw)
            except ValueError:
                t = None
        if t is None or not math.isfinite(t) or t <= 0:
            self.fail(f"{value}: must be an ISO-8601 time (YYYY-MM-DDTHH:MM:SSZ; no offset "
                      "means UTC) or Unix seconds", param, ctx)
        return t


def _within_retention(prom: Prometheus, t_from: float, now: float) -> None:
    """Refuse a window that starts before the oldest sample ``prom`` keeps: the outage's
    start, its alerts and its counters there are gone, and a report would begin where the
    retention does, as if nothing came before."""
    retention = prom.retention_s()
    if retention is None or t_from >= now - retention:
        return
    oldest = utc(now - retention)
    raise BadInput(f"Prometheus at {prom.url} keeps {human_duration(retention)} of samples "
                   f"(its storage retention): the window starts at {utc(t_from)}, before "
                   f"the oldest it keeps — give --from {oldest} or later")


@click.command()
@inventory_option
@click.option("--node", "node_names", required=True, multiple=True, metavar="NAME[,NAME…]",
              help="the node that failed; repeat it or separate names with commas for "
                   "several; a gateway brings its upstreams")
@click.option("--from", "t_from", required=True, type=Instant(), metavar="TIME",
              help="window start: ISO-8601 (no offset: UTC) or Unix seconds")
@click.option("--to", "t_to", type=Instant(), default=None, metavar="TIME",
              help="window end (default: now; a later time is read as now)")
@click.option("--runs-dir", default="runs", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="where the postmortem's directory is created")
@click.option("--prometheus", "prometheus_url", default=None,
              help="Prometheus URL (default: the inventory's)")
def postmortem(inventory_path: Path, node_names: tuple[str, ...], t_from: float,
               t_to: float | None, runs_dir: Path, prometheus_url: str | None) -> None:
    """The incident report of each outage of the --node in the window, from monitoring alone.

    Finds every outage in Prometheus (when it began and ended, which alert detected it),
    reads the node's Docker host (events, state, log) and the pager's pages, and estimates
    lost requests from the server's own counters; writes one run directory and
    incident.md per incident, and postmortem.md as their index. Several nodes (a gateway
    and its upstreams) each get their own, and each index names the other nodes'
    incidents that overlapped its own. Exit 0 = written, 2 = bad input (nothing written).
    """
    now = time.time()
    end = now if t_to is None else min(t_to, now)
    if t_from >= end:
        raise BadInput(f"--from {utc(t_from)} must be before --to {utc(end)}"
                       + (" (now)" if t_to is None or t_to > now else ""))
    if end - t_from > MAX_WINDOW_S:
        raise BadInput(f"the window {utc(t_from)} → {utc(end)} is longer than "
                       f"{MAX_WINDOW_S / 86400:g} days: give a shorter one")
    inventory = load_inventory(inventory_path)
    nodes, skipped = _nodes_of(inventory, node_names)
    url = prometheus_url or inventory.prometheus.url
    with Prometheus(url) as prom:
        try:
            _within_retention(prom, t_from, now)
            evidence = {node.name: read_evidence(
                prom, node, t_from, end, scrape_interval_s=inventory.prometheus.scrape_interval_s)
                for node in nodes}
            for node in nodes:
                assert node.prometheus is not None
                up = evidence[node.name].up
                if not up:
                    raise BadInput(
                        f"no up sample of job {node.prometheus.job!r} (node {node.name}) from "
                        f"{utc(t_from)} to {utc(end)} at {url}: is the window right, and does "
                        "that Prometheus scrape this job?")
                refused = metrics_not_served(prom, node) if all(v == 0 for _, v in up) else None
                if refused is not None:
                    raise BadInput(
                        f"node {node.name}'s metrics are not served ({refused}): its scrapes "
                        "fail whether it serves or not, so no outage can be told from them — "
                        "serve its metrics (llama.cpp: --metrics) or fix the job's "
                        "metrics_path")
        except PrometheusUnavailable as exc:
            raise BadInput(str(exc)) from exc
    found = {node.name: find_incidents(evidence[node.name],
                                       hold_s=inventory.slo_for(node).recovery_hold_s)
             for node in nodes}
    written: dict[str, list[RunDir]] = {}
    with Prometheus(url) as prom:
        for node in nodes:
            previous = None
            written[node.name] = []
            for incident in found[node.name].incidents:
                written[node.name].append(write_incident(runs_dir, collect_incident(
                    prom, node, inventory, incident, evidence[node.name], previous=previous)))
                previous = incident
    related = related_incidents({name: NodeIncidents(
        found[name].incidents, [d.path.name for d in written[name]], evidence[name].t_to)
        for name in found})
    t_written = time.time()
    for line in skipped:
        click.echo(line)
    for node in nodes:
        name = node.name
        index = write_postmortem(runs_dir, postmortem_of(
            evidence[name], found[name], t_written=t_written,
            runs=tuple(d.path.name for d in written[name]), related=related[name]))
        click.echo(f"{len(found[name].incidents)} incident(s) of {name} from {utc(t_from)} "
                   f"to {utc(end)}: {index.path / POSTMORTEM_MD}")
        for directory in written[name]:
            click.echo(f"  {directory.incident_md}")


def _nodes_of(inventory: Inventory, names: tuple[str, ...]) -> tuple[list[Node], list[str]]:
    """The nodes asked for (``--node`` repeated or comma-separated, each checked: bad
    input names the first wrong one), then each gateway's upstreams not asked for; an
    upstream no Prometheus job scrapes is left out, with a line saying so."""
    asked: list[Node] = []
    for raw in names:
        for name in (n.strip() for n in raw.split(",")):
            if not name:
                raise BadInput(f"--node {raw!r}: an empty node name")
            node = inventory.node(name)  # an unknown node: InventoryError, exit 2
            if node.prometheus is None:
                raise BadInput(f"{inventory.source}: node {name!r} has no prometheus job: "
                               "there is no monitoring to read")
            if node not in asked:
                asked.append(node)
    skipped: list[str] = []
    for gateway in [n for n in asked if n.upstreams]:
        for name in gateway.upstreams:
            upstream = inventory.node(name)
            if upstream in asked:
                continue
            if upstream.prometheus is None:
                skipped.append(f"upstream {name} of {gateway.name} has no prometheus job: "
                               "left out")
                continue
            asked.append(upstream)
    return asked, skipped
