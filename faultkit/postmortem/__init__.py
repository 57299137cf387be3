"""``faultkit postmortem``: the report of an outage faultkit did not cause, from monitoring
alone (docs/postmortem.md).

:func:`read_evidence` reads one node's ``up``, alerts and process start times over a
window from Prometheus; :func:`find_incidents` (pure) finds each outage in them, its start
and end bounded by scrape stamps, its detection and the engine's restarts;
:func:`collect_incident` gathers one incident's evidence (Docker's events, the container's
state and log, users affected estimated from the server's counters, :func:`estimate_lost`)
and :func:`write_incident` writes it as a run directory of the shared format with the shared
incident report; :func:`write_postmortem` writes the index, ``postmortem.json`` and
``postmortem.md``, into a directory of its own.

Layer: beside the experiment runner, which it never imports (docs/architecture.md,
"Layers"): it reads ``slo`` and renders text with ``reports``; it never acts.
"""

from __future__ import annotations

from faultkit.postmortem.collect import collect_incident, write_incident
from faultkit.postmortem.docker_evidence import DockerEvidence, read_docker_evidence
from faultkit.postmortem.evidence import AlertSeries, NodeEvidence, Samples
from faultkit.postmortem.incident_run import (
    IncidentRun,
    incident_measurement,
    judge_incident,
    write_incident_run,
)
from faultkit.postmortem.incidents import alert_episodes, find_incidents, restarts
from faultkit.postmortem.model import (
    AlertEpisode,
    Bound,
    EvidenceSummary,
    Findings,
    Gap,
    Incident,
    Postmortem,
    Restart,
)
from faultkit.postmortem.read import ALERT_LOOKBACK_S, read_evidence, read_request_counters
from faultkit.postmortem.render import render_markdown
from faultkit.postmortem.users import LossEstimate, estimate_lost
from faultkit.postmortem.write import (
    POSTMORTEM_JSON,
    POSTMORTEM_MD,
    postmortem_of,
    write_postmortem,
)

__all__ = [
    "ALERT_LOOKBACK_S",
    "POSTMORTEM_JSON",
    "POSTMORTEM_MD",
    "AlertEpisode",
    "AlertSeries",
    "Bound",
    "DockerEvidence",
    "EvidenceSummary",
    "Findings",
    "Gap",
    "Incident",
    "IncidentRun",
    "LossEstimate",
    "NodeEvidence",
    "Postmortem",
    "Restart",
    "Samples",
    "alert_episodes",
    "collect_incident",
    "estimate_lost",
    "find_incidents",
    "incident_measurement",
    "judge_incident",
    "postmortem_of",
    "read_docker_evidence",
    "read_evidence",
    "read_request_counters",
    "render_markdown",
    "restarts",
    "write_incident",
    "write_incident_run",
    "write_postmortem",
]
