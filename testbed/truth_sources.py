"""The truth trials' independent evidence: the simulator's truth file, Docker's events, the
second host's deaths, the pager's own record and Prometheus's stored ``ALERTS`` — read
here, never through the measurement (:mod:`testbed.truth` compares the two)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faultkit.constants import LOCAL_DOCKER
from faultkit.docker.host import DockerHost
from faultkit.inventory import Inventory, Node
from faultkit.model.timestamps import parse_rfc3339
from faultkit.pager import fetch_notifications
from slo.prom import Prometheus
from testbed import host2
from testbed.paths import state_dir
from testbed.simnode.truth import parse_truth

#: how far before the fault's effect an alert's ``startsAt`` may read and still be this
#: fault's: Prometheus stamps it at the evaluation that made it pending
STARTED_SLACK_S = 1.0


def truth_path(node: Node) -> Path:
    """The simulator's truth file of ``node``: in this machine's state directory, or in the
    second host's, which that host's containers mount (testbed/host2_nodes.py)."""
    remote = state_dir("host2") / "sim" / node.name / "truth.jsonl"
    if node.docker is not None and node.docker.host != LOCAL_DOCKER and remote.exists():
        return remote
    return state_dir(f"sim/{node.name}") / "truth.jsonl"


def truth_events(node: Node, since: float) -> list[dict[str, Any]]:
    """The simulator's ground-truth lines written since ``since`` (epoch seconds)."""
    path = truth_path(node)
    # a line cut short by the process's death is its unfinished last event (parse_truth)
    events, _cut_short = parse_truth(path.read_text()) if path.exists() else ([], 0)
    return [e for e in events if e["t"] >= since]


def docker_events(node: Node, since: float, until: float) -> list[dict[str, Any]]:
    """Docker's container and network events for the node's container, oldest first."""
    assert node.docker is not None
    host = DockerHost(node.docker.host)
    cid = host.client.containers.get(node.docker.container).id
    out = []
    stream = host.client.events(since=int(since), until=int(until) + 1, decode=True)
    for event in stream:
        attrs = (event.get("Actor") or {}).get("Attributes") or {}
        kind = event.get("Type")
        if (kind == "container" and attrs.get("name") == node.docker.container) or (
            kind == "network" and attrs.get("container") == cid
        ):
            out.append(event)
    return sorted(out, key=lambda e: int(e["timeNano"]))


def host_deaths(since: float, until: float) -> list[float]:
    """When the second host died, by this machine's Docker (its container's ``die``): the
    host's own engine died with it, and the events it kept went with it."""
    host = DockerHost(LOCAL_DOCKER)
    stream = host.client.events(since=int(since), until=int(until) + 1, decode=True,
                                filters={"container": host2.CONTAINER, "event": "die"})
    return sorted(event_time(event) for event in stream)


def first_page(inventory: Inventory, node: Node, since: float, until: float,
               carried: Mapping[str, float] | None = None) -> float | None:
    """When the pager received the first firing notification naming ``node`` in
    [``since``, ``until``] for an alert that started at or after ``since`` (its own
    ``startsAt``), as the pager itself recorded it (``None``: no pager, or no page): read
    here directly, never through the run's timeline. An alert already firing before the
    fault took effect (an earlier trial's, re-notified within the window) is no page for
    this fault, nor is one :func:`carried_over` into it (``carried``)."""
    settings = inventory.alertmanager
    if settings is None or settings.pager_url is None:
        return None
    for notification in fetch_notifications(settings.pager_url, since, until):
        if any(_fired_for(a, node, since, carried or {})
               for a in notification.payload.get("alerts") or () if isinstance(a, dict)):
            return notification.t_received
    return None


def _fired_for(alert: dict[str, Any], node: Node, since: float,
               carried: Mapping[str, float]) -> bool:
    """A firing alert naming ``node`` that started at or after ``since`` (to the second
    Prometheus's rule evaluation can lag the clock it stamps by), not the firing of one
    carried over into the fault."""
    labels = alert.get("labels") or {}
    if alert.get("status") != "firing" or labels.get("node") != node.name:
        return False
    started = parse_rfc3339(str(alert.get("startsAt") or ""))
    carried_until = carried.get(str(labels.get("alertname")), -math.inf)
    return (started is not None and started >= since - STARTED_SLACK_S
            and started > carried_until + STARTED_SLACK_S)


def event_time(event: dict[str, Any]) -> float:
    return int(event["timeNano"]) / 1e9


def first_alert_firing(prom: Prometheus, node: Node, since: float, until: float,
                       evaluation_interval_s: float,
                       slo_evaluation_interval_s: float | None = None) -> float | None:
    """Timestamp of the first ``ALERTS{alertstate="firing"}`` sample for the node that
    *starts a firing run* at or after ``since``: a sample with none in the
    1.5 evaluation intervals of its rule group before it (``slo_evaluation_interval_s`` for
    ``FaultkitSLOBurn``, whose groups run slower; the global interval for the others). A run
    already under way when the fault took effect (an SLO burn alert from an earlier run) is
    not this fault's detection; a series that fired, resolved and fires again for this fault
    is (`FaultkitNodeDown` of the trial
    before can resolve seconds before t_effect and fire again seconds after it: dropping
    any series with a sample in the 10 s before would compare with a later alert). Nor is
    the firing of an alert :func:`carried_over` into the fault."""
    slowest = max(evaluation_interval_s, slo_evaluation_interval_s or 0.0)
    window = _window(since, until, slowest)
    series = prom.query_samples(f'ALERTS{{alertstate="firing",node="{node.name}"}}[{window}s]',
                                t=until)
    carried = carried_over(prom, node, since, until, evaluation_interval_s)
    firsts = []
    for ser in series:
        name = ser.labels.get("alertname", "")
        burn = name == "FaultkitSLOBurn"
        gap = 1.5 * (slo_evaluation_interval_s if burn and slo_evaluation_interval_s
                     else evaluation_interval_s)
        times = sorted(t for t, v in ser.values if math.isfinite(v))
        starts = [t for i, t in enumerate(times) if i == 0 or t - times[i - 1] > gap]
        after = [t for t in starts if t >= since and t > carried.get(name, -math.inf)]
        if after:
            firsts.append(after[0])
    return min(firsts) if firsts else None


def carried_over(prom: Prometheus, node: Node, since: float, until: float,
                 evaluation_interval_s: float) -> dict[str, float]:
    """The node's alerts whose ``pending`` run began before ``since`` (less
    :data:`STARTED_SLACK_S`) and lasted to it: what they fire on held before the fault (an
    error-ratio rule still counting the trial before's errors), so neither their firing nor
    their page is this fault's. Alert name → the last sample of that alert's run, pending
    and the firing it led into, from Prometheus's stored ``ALERTS``."""
    window = _window(since, until, evaluation_interval_s)
    gap = 1.5 * evaluation_interval_s

    def samples(state: str) -> dict[str, list[float]]:
        found = prom.query_samples(
            f'ALERTS{{alertstate="{state}",node="{node.name}"}}[{window}s]', t=until)
        return {s.labels.get("alertname", ""): sorted(t for t, v in s.values
                                                      if math.isfinite(v)) for s in found}

    firing = samples("firing")
    out: dict[str, float] = {}
    for name, pending in samples("pending").items():
        for run in _runs(pending, gap):
            if run[0] < since - STARTED_SLACK_S and run[-1] >= since - gap:
                # under way at the fault; it goes on into firing without a gap
                end = run[-1]
                for t in firing.get(name, []):
                    if end < t <= end + gap:
                        end = t
                out[name] = end
    return out


def _window(since: float, until: float, slowest: float) -> int:
    """The range, in whole seconds, that reaches back far enough before ``since`` to see
    what was under way then."""
    return max(1, int(until - since + 10.0 + 2 * slowest) + 2)


def _runs(times: list[float], gap: float) -> list[list[float]]:
    """``times`` (sorted) cut into runs wherever two samples lie more than ``gap`` apart."""
    runs: list[list[float]] = []
    for t in times:
        if runs and t - runs[-1][-1] <= gap:
            runs[-1].append(t)
        else:
            runs.append([t])
    return runs
