"""One incident a postmortem found, as a run directory of the same typed format a scenario
run writes (docs/run-directory.md), so the one incident report (:func:`reports.render.
render_incident`) renders it.

What each file holds for an incident nobody injected (docs/postmortem.md):

- ``run.json``: scenario ``postmortem``, no fault kind (``describe`` says it was found in
  monitoring), ``t_start``/``t_end`` the incident's window: from the last good scrape before
  it to the end of the good stretch that confirmed recovery (the window's end while down);
- ``timeline.jsonl``: what monitoring stored (source ``observer``: the first failed and the
  first good scrape, each alert's first and last firing sample, restarts seen in the process
  start time) and Docker's own events of the container (source ``harness``, as the runner
  writes them); ``data["from"]`` names where each was read;
- ``container.json``: the container's state now (``after``; ``before`` was not read: there
  was no before), and its log lines written in the window, secrets redacted;
- ``prometheus.json``: the node's series over the window (:func:`slo.capture.capture`);
- ``measurement.json``: :func:`incident_measurement`; ``verdict.json``: :func:`judge_incident`.

No ``ledger.jsonl``: no client recorded the users' requests; lost requests are the
server-side estimate of :mod:`faultkit.postmortem.users`, in ``server_cross_check``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faultkit.inventory import Inventory, Node, SLOSettings, config_hash
from faultkit.model.events import EventKind, alert_kind
from faultkit.model.records import Event
from faultkit.postmortem.docker_evidence import DockerEvidence
from faultkit.postmortem.model import Bound, Incident
from faultkit.postmortem.users import LossEstimate
from faultkit.rundir import ContainerEvidence, FaultInfo, RunDir, RunInfo
from slo.capture import PrometheusCapture
from slo.checks import (
    detected_within,
    judge,
    paged_within,
    recovered_within,
    recovered_without_intervention,
    window_checks,
)
from slo.paging import page_of
from slo.traffic import WindowTraffic
from slo.types import Measurement, Verdict
from slo.verdict import CheckResult

__all__ = ["DESCRIBE", "EFFECT_ACTIONS", "SCENARIO", "IncidentRun", "incident_measurement",
           "incident_timeline", "incident_window", "judge_incident", "write_incident_run"]

#: the scenario part of a postmortem's directory names and ``run.json``'s ``scenario``
SCENARIO = "postmortem"
#: ``run.json`` ``fault.describe`` of an incident nobody injected
DESCRIBE = "an out-of-band failure found in monitoring (not injected by faultkit)"
#: Docker's container actions that take a node out of service: the first one inside the
#: outage's start bound dates its effect
EFFECT_ACTIONS = ("die", "oom", "pause", "network_disconnect", "stop")
#: Docker's container actions that undo those: the first one inside the outage's end bound
#: dates its recovery (a scrape of a frozen engine is answered when it resumes, and stamped
#: when it began: the first good scrape's stamp can precede the ``unpause``)
RECOVERY_ACTIONS = ("unpause", "network_connect", "start")
#: what an event read from Prometheus names as its origin (``data["from"]``)
FROM_PROMETHEUS = "prometheus"


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]


def _bound_words(b: Bound) -> str:
    after = "before the window" if b.after is None else _utc(b.after)
    by = "after the window" if b.by is None else _utc(b.by)
    width = "" if b.width_s is None else f", {b.width_s:.2f} s wide"
    return f"after {after}, by {by} UTC{width}"


def incident_window(incident: Incident, *, t_from: float, t_to: float,
                    hold_s: float) -> tuple[float, float]:
    """``(t_start, t_end)`` of the incident's run: from its last good scrape before (the
    window's start when it began before) to its first good scrape after plus the hold that
    confirmed recovery (the window's end while still down), within ``[t_from, t_to]``."""
    start = incident.start.after if incident.start.after is not None else t_from
    end = t_to if incident.end is None or incident.end.by is None \
        else min(t_to, incident.end.by + hold_s)
    return start, end


def incident_timeline(node: str, incident: Incident, docker: DockerEvidence | None,
                      paging: Sequence[Event] = ()) -> list[Event]:
    """The incident's timeline: monitoring's instants, Docker's events and the pager's
    (:func:`faultkit.postmortem.pages.read_paging`), oldest first."""
    src: dict[str, Any] = {"from": FROM_PROMETHEUS}
    out: list[Event] = []
    start, end = incident.start, incident.end
    if start.by is not None:
        last_good = "" if start.after is None else f"; the last good one began {_utc(start.after)}"
        out.append(Event(start.by, "observer", EventKind.UP_0, node,
                         {**src, "what": f"first failed scrape (up 0){last_good}"}))
    if end is not None and end.by is not None:
        last_failed = "" if end.after is None else f"; the last failed one began {_utc(end.after)}"
        out.append(Event(end.by, "observer", EventKind.UP_1, node,
                         {**src, "what": "first good scrape (up 1)" + last_failed
                          + ("" if incident.held else ", not held to the window's end")}))
    for a in incident.alerts:
        out.append(Event(a.t_first, "observer", alert_kind("firing"), node,
                         {**src, "alertname": a.alert, "what": "first firing sample"}))
        if end is not None and end.by is not None and a.t_last <= end.by:
            out.append(Event(a.t_last, "observer", alert_kind("resolved"), node,
                             {**src, "alertname": a.alert,
                              "what": "last firing sample (resolved by the next evaluation)"}))
    for r in incident.restarts:
        out.append(Event(r.t_process_start, "observer", "process_restart", node,
                         {**src, "what": "the engine's new process started (its own clock; "
                          f"first scraped at {_utc(r.t_seen)})"}))
    if docker is not None:
        out.extend(docker.events)
    out.extend(paging)
    return sorted(out, key=lambda e: e.t)


def _effect(incident: Incident, docker: DockerEvidence | None, interval_s: float
            ) -> tuple[float, str, str]:
    """``(t_effect, evidence, detail)``: Docker's first act that takes the node out of
    service inside the start bound (a scrape's duration of slack on its later side), else
    the first failed scrape."""
    start = incident.start
    bound = Bound(start.after, None if start.by is None else start.by + interval_s)
    acts = [e for e in (docker.events if docker is not None else ())
            if e.kind.removeprefix("docker_") in EFFECT_ACTIONS and bound.contains(e.t)]
    if acts:
        first = min(acts, key=lambda e: e.t)
        return (first.t, "docker_event",
                f"Docker's {first.kind} event, inside the outage's start bound "
                f"({_bound_words(start)})")
    t = start.by if start.by is not None else 0.0
    return (t, "scrape", f"the first failed scrape: the outage began {_bound_words(start)}; "
            "no Docker event inside that bound dates it closer")


def _recovered(incident: Incident, docker: DockerEvidence | None, interval_s: float
               ) -> tuple[float | None, str]:
    """``(t_recovered, words)``: Docker's first act undoing the outage inside the end bound
    (a scrape's slack on its later side), else the first good scrape of the stretch that
    held; ``None`` when it did not hold."""
    end = incident.end
    if end is None or end.by is None or not incident.held:
        return None, ""
    bound = Bound(end.after, end.by + interval_s)
    undone = [e for e in (docker.events if docker is not None else ())
              if e.kind.removeprefix("docker_") in RECOVERY_ACTIONS and bound.contains(e.t)]
    if not undone:
        return end.by, "; recovered at the first good scrape"
    first = min(undone, key=lambda e: e.t)
    return first.t, f"; recovered at Docker's {first.kind} event, inside that bound"


def incident_measurement(node: str, incident: Incident, docker: DockerEvidence | None,
                         estimate: LossEstimate, *, t_window_end: float, interval_s: float,
                         timeline: Sequence[Event] = ()) -> Measurement:
    """The incident as a :class:`~slo.types.Measurement` (docs/definitions.md): ``t_effect``
    from Docker's event inside the start bound, else the first failed scrape; detection by
    the first alert that began firing in it, else the first failed scrape (``up``);
    recovery at Docker's act undoing it inside the end bound, else the first good scrape of
    the stretch that held (none while not held);
    ``lost_total`` the server-side estimate (0 and an evidence gap when not estimated);
    ``paging`` from ``timeline``'s route and pages (:func:`slo.paging.page_of`; None
    without an Alertmanager)."""
    t_effect, evidence, detail = _effect(incident, docker, interval_s)
    start, end = incident.start, incident.end
    by_signal: dict[str, float] = {}
    if start.by is not None:
        by_signal["up"] = max(0.0, start.by - t_effect)
    t_detect: float | None = None
    signal: Any = None
    detect_detail: str | None = None
    if incident.detection is not None:
        t_detect, signal = incident.detection.t_first, "alert"
        detect_detail = (f"{incident.detection.alert}: its first firing sample (Prometheus' "
                         "rule evaluation that first stored it firing)")
        by_signal["alert"] = max(0.0, t_detect - t_effect)
    elif start.by is not None:
        t_detect, signal = start.by, "up"
        detect_detail = "the first failed scrape: no alert for the node began firing in it"
    t_recovered, recovered_by = _recovered(incident, docker, interval_s)
    notes = [f"no ledger: no client recorded the users' requests; {estimate.method}",
             f"outage start: {_bound_words(start)} (scrape stamps; a scrape is stamped when "
             "it begins, so the instant may trail the later side by one scrape's duration)",
             "outage end: " + ("still failing at the window's end" if end is None
                               else _bound_words(end)
                               + ("" if incident.held else "; the good stretch after it "
                                  "reached the window's end before lasting the hold")
                               + recovered_by)]
    notes += [] if docker is None else list(docker.notes)
    if incident.detection is not None and start.after is not None:
        notes.append(f"detection: {incident.detection.alert} first fired "
                     f"{incident.detection.t_first - start.after:.2f} s after the last good "
                     "scrape")
    gaps = [] if estimate.lost is not None else [
        f"users affected not estimated: {estimate.why}"]
    return Measurement(
        node=node, t_effect=t_effect, t_revert=None, t_window_end=t_window_end,
        effect_evidence=evidence, effect_detail=detail, t_detect=t_detect,
        detect_signal=signal, detect_detail=detect_detail,
        detection_s=None if t_detect is None else max(0.0, t_detect - t_effect),
        detection_by_signal_s=by_signal, t_recovered=t_recovered,
        recovery_s=None if t_recovered is None else max(0.0, t_recovered - t_effect),
        lost_total=estimate.lost or 0,
        requests_total=0 if estimate.expected is None else round(estimate.expected),
        affected_total=estimate.lost or 0,
        server_cross_check=estimate.to_json(), inconclusive=gaps, notes=notes,
        paging=page_of(timeline, node, t_effect, t_detect, t_window_end),
    )


def _lost_check(lost_max: int, estimate: LossEstimate) -> Any:
    """``lost_requests`` against the estimate's range: PASS when its high end is within
    ``lost_max``, FAIL when its low end is over, else (or not estimated) INCONCLUSIVE."""

    def fn(m: Measurement) -> CheckResult:
        expected = f"≤ {lost_max} lost"
        if estimate.lost is None or estimate.low is None or estimate.high is None:
            return CheckResult("lost_requests", False, expected, "not estimated",
                               estimate.why, inconclusive=True)
        observed = (f"≈ {estimate.lost} lost ({estimate.low}–{estimate.high}, estimated from "
                    "the server's counters)")
        if estimate.high <= lost_max:
            return CheckResult("lost_requests", True, expected, observed,
                               f"even the high end {estimate.high} ≤ {lost_max}")
        if estimate.low > lost_max:
            return CheckResult("lost_requests", False, expected, observed,
                               f"even the low end {estimate.low} > {lost_max}")
        return CheckResult("lost_requests", False, expected, observed,
                           f"the estimate's range spans {lost_max}: not decided",
                           inconclusive=True)

    return fn


def judge_incident(m: Measurement, slo: SLOSettings, estimate: LossEstimate) -> Verdict:
    """The incident judged against the node's SLOs with the experiments' checks
    (detection, recovery, no intervention, the page when an objective; the error ratio and
    TTFT after it, INCONCLUSIVE without a client's record); lost requests against the
    estimate's range."""
    checks: list[Any] = [*detected_within(slo.detection_s_max).fns,
                         *recovered_within(slo.recovery_s_max).fns,
                         *recovered_without_intervention().fns]
    if slo.lost_max is not None:
        checks.append(_lost_check(slo.lost_max, estimate))
    if slo.page_s_max is not None:
        checks += paged_within(slo.page_s_max).fns
    checks += window_checks(slo).fns
    return judge(m, checks)


@dataclass(frozen=True)
class IncidentRun:
    """Everything one incident's run directory holds, before it is written."""

    node: Node
    inventory: Inventory
    incident: Incident
    t_start: float
    t_end: float
    timeline: list[Event]
    measurement: Measurement
    verdict: Verdict
    capture: PrometheusCapture
    docker: DockerEvidence | None
    traffic: WindowTraffic | None
    harness_version: str
    prometheus_url: str


def _container(docker: DockerEvidence | None) -> ContainerEvidence:
    if docker is None:
        return ContainerEvidence.of(before=None, after=None, log_tail="")
    return ContainerEvidence.of(before=None, after=docker.state, log_tail=docker.log or "",
                                startup_log=docker.startup_log)


def write_incident_run(runs_dir: Path, run: IncidentRun) -> RunDir:
    """Create the incident's directory (``<stamp of its start>-postmortem-<node>``; a
    second postmortem of the same incident gets ``-2``, ``-3``…) and write its files."""
    node, inventory = run.node, run.inventory
    stamp = datetime.fromtimestamp(run.measurement.t_effect, UTC)
    for n in range(1, 100):
        try:
            directory = RunDir.create(runs_dir, SCENARIO,
                                      node.name if n == 1 else f"{node.name}-{n}", now=stamp)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - a hundred postmortems of one incident
        raise FileExistsError(f"{runs_dir}: too many postmortems of the incident at {stamp}")
    config = inventory.serving_configs.get(node.serving_config) if node.serving_config else None
    info = RunInfo().updated(
        scenario=SCENARIO, node=node.name, engine=node.engine,
        serving_config=node.serving_config, node_config_hash=config_hash(config),
        harness_version=run.harness_version, prometheus_url=run.prometheus_url,
        scrape_interval_s=inventory.prometheus.scrape_interval_s,
        slo=inventory.slo_for(node).model_dump(), t_start=run.t_start, t_end=run.t_end,
        fault=FaultInfo(kind=None, params={}, describe=DESCRIBE),
        fault_result={"postmortem": {
            "incident": run.incident.to_json(),
            "docker": [] if run.docker is None else list(run.docker.notes)}},
        slo_window_requests=None if run.traffic is None else run.traffic.requests,
        slo_window={} if run.traffic is None else run.traffic.to_json(),
    )
    directory.write_info(info)
    writer = directory.timeline_writer()
    try:
        for event in run.timeline:
            writer.write(event)
    finally:
        writer.close()
    directory.write_container_evidence(_container(run.docker))
    directory.write_model(directory.prometheus_json, run.capture)
    directory.write_model(directory.measurement_json, run.measurement)
    directory.write_model(directory.verdict_json, run.verdict)
    return directory
