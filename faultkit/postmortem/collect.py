"""Collect one incident's evidence from Prometheus and the node's Docker host, and write
it as a run directory with its incident report (:mod:`faultkit.postmortem.incident_run`).

I/O: reads Prometheus (the request counters, the node's series, its SLO window's traffic)
and, where the inventory names them, the node's Docker host and the pager
(:mod:`faultkit.postmortem.pages`); none being unreadable ends the postmortem — what
could not be read is written down instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

from faultkit.errors import FaultkitError
from faultkit.inventory import Inventory, Node
from faultkit.postmortem.docker_evidence import read_docker_evidence
from faultkit.postmortem.evidence import NodeEvidence
from faultkit.postmortem.incident_run import (
    IncidentRun,
    incident_measurement,
    incident_timeline,
    incident_window,
    judge_incident,
    write_incident_run,
)
from faultkit.postmortem.model import Incident
from faultkit.postmortem.pages import read_paging
from faultkit.postmortem.read import read_request_counters
from faultkit.postmortem.users import BASELINE_S, estimate_lost
from faultkit.rundir import RunDir
from slo.capture import PrometheusCapture, capture
from slo.prom import Prometheus
from slo.traffic import window_traffic

__all__ = ["collect_incident", "harness_version", "write_incident"]

log = logging.getLogger("faultkit.postmortem")


def harness_version() -> str:
    """The installed faultkit's version (``unknown`` when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("faultkit")
    except PackageNotFoundError:
        return "unknown"


#: how long before the last good scrape the container's log is read: an engine says why it
#: fails before its scrapes fail (it logs a CUDA OOM, then exits), and a scrape between the
#: two is still answered (s)
LOG_LEAD_S = 10.0


def collect_incident(prom: Prometheus, node: Node, inventory: Inventory, incident: Incident,
                     evidence: NodeEvidence, *, previous: Incident | None = None
                     ) -> IncidentRun:
    """The incident's run, every piece of evidence read (see the module docstring);
    ``previous``: the incident before it in the window (its traffic rate is never taken
    from before that one's end)."""
    slo = inventory.slo_for(node)
    interval = evidence.scrape_interval_s
    t_start, t_end = incident_window(incident, t_from=evidence.t_from, t_to=evidence.t_to,
                                     hold_s=slo.recovery_hold_s)
    # the log from LOG_LEAD_S before the last good scrape (never before an earlier
    # incident's end: its words are not this one's) to the first good scrape's answer
    log_since = t_start - LOG_LEAD_S
    if previous is not None and previous.end is not None and previous.end.by is not None:
        log_since = max(log_since, previous.end.by)
    recovered = (incident.end.by + interval
                 if incident.end is not None and incident.end.by is not None else None)
    docker = read_docker_evidence(node, inventory, t_start, t_end, log_since=log_since,
                                  log_until=recovered)
    try:
        requests, errors, counter = read_request_counters(
            prom, node, t_start - BASELINE_S - interval, t_end)
        why = "" if requests is not None else (
            f"the {node.profile_engine} engine exposes no request counter (no "
            "requests_total in its metric profile, slo/profiles.py)")
    except FaultkitError as exc:
        requests, errors, counter, why = None, None, None, f"Prometheus did not answer ({exc})"
    if requests == ():
        requests, why = None, f"no sample of {counter} around the outage"
    floor = evidence.t_from
    if previous is not None and previous.end is not None and previous.end.by is not None:
        floor = max(floor, previous.end.by)
    estimate = estimate_lost(incident, requests, errors, span_end=t_end,
                             interval_s=interval, counter=counter, why_none=why,
                             not_before=floor)
    timeline = incident_timeline(node.name, incident, docker,
                                 read_paging(inventory, node, t_start, t_end))
    measurement = incident_measurement(node.name, incident, docker, estimate,
                                       t_window_end=t_end, interval_s=interval,
                                       timeline=timeline)
    try:
        captured = capture(prom, node, t_start, t_end,
                           rate_window=f"{max(5, round(4 * interval))}s")
    except FaultkitError as exc:
        log.warning("could not capture Prometheus series: %s", exc)
        captured = PrometheusCapture(error=str(exc))
    traffic = window_traffic(prom, node, f"{slo.window_days}d", t_end)
    return IncidentRun(
        node=node, inventory=inventory, incident=incident, t_start=t_start, t_end=t_end,
        timeline=timeline, measurement=measurement,
        verdict=judge_incident(measurement, slo, estimate), capture=captured, docker=docker,
        traffic=traffic, harness_version=harness_version(), prometheus_url=prom.url)


def write_incident(runs_dir: Path, run: IncidentRun) -> RunDir:
    """Write the incident's run directory and render its incident report (``incident.md``,
    ``timeline.png``: the one report every run gets, :func:`reports.render.render_incident`)."""
    from reports.render import render_incident  # pulls in matplotlib: only when writing

    directory = write_incident_run(runs_dir, run)
    render_incident(directory.path)
    return directory
