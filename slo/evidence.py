"""Is there enough evidence to run and judge an experiment? Pre-flight and steady state.

Two questions are asked before a fault is injected (docs/definitions.md, "INCONCLUSIVE"):

- :func:`preflight_gaps` — can monitoring be observed at all: Prometheus ready, alert
  rules loaded for the node, this machine's clock within :data:`MAX_CLOCK_SKEW_S` of
  Prometheus' (every detection figure compares the two clocks) and of the node's Docker
  host's (its events date ``t_effect``; another machine in a multi-host lab), the node's
  container present and running.
- :func:`steady_state_violations` — the steady-state hypothesis (Chaos Toolkit's term):
  over the baseline the node answered its readiness probe, its error ratio and TTFT p95
  were within the node's objectives. A node that is not healthy before the fault cannot be
  judged on how it handles the fault; the experiment aborts before injecting.

Each returns human-readable reasons; empty means "go".
"""

from __future__ import annotations

from collections.abc import Sequence

from faultkit.errors import FaultkitError
from faultkit.inventory import Node, SLOSettings
from faultkit.model.events import EventKind
from faultkit.model.records import Event, RequestRecord
from faultkit.probes.clockread import ClockReading, read_clock
from slo.checks import window_objectives
from slo.errors import PrometheusError
from slo.prom import Prometheus

#: Largest tolerated difference between this machine's clock and Prometheus' (seconds).
#: Figures are promised to ±0.5 s; half of that is left for the clocks.
MAX_CLOCK_SKEW_S = 0.25


def prometheus_clock(prom: Prometheus) -> ClockReading:
    """Prometheus' clock against this machine's: ``time()`` against the midpoint of the
    fastest of a few queries (:func:`faultkit.probes.clockread.read_clock`)."""

    def prometheus_time() -> float:
        value = prom.query_value("time()")
        if value is None:
            raise PrometheusError(prom.url, f"Prometheus at {prom.url}: time() returned no value")
        return value

    return read_clock(prometheus_time)


def preflight_gaps(node: Node, prom: Prometheus, container_running: bool | None,
                   docker_clock: ClockReading | None = None) -> list[str]:
    """Reasons the experiment could not be judged, known before it starts.

    ``docker_clock``: the node's Docker host's clock against this machine's (None: not
    known). Docker's events date ``t_effect``, so a host whose clock is off misdates every
    figure counted from it: the same bound applies as to Prometheus' clock. A clock is
    within the bound only if its reading's whole error bar is (:mod:`faultkit.probes.clockread`)."""
    gaps: list[str] = []
    if docker_clock is not None and not docker_clock.within(MAX_CLOCK_SKEW_S):
        host = node.docker.host if node.docker else "?"
        gaps.append(f"clock skew between this machine and the node's Docker host {host} is "
                    f"{docker_clock.describe()}, not shown within ±{MAX_CLOCK_SKEW_S} s: its "
                    "events, which date when the fault took effect, could be misdated")
    try:
        if not prom.ready():
            gaps.append(f"Prometheus at {prom.url} is not ready (/-/ready is not 200)")
        else:
            rules = [r for g in prom.rules("alert") for r in g.get("rules", [])
                     if (r.get("labels") or {}).get("node") == node.name]
            if not rules:
                gaps.append(f"no alert rule for node {node.name!r} is loaded in Prometheus "
                            f"at {prom.url} (add `faultkit rules` output to its rule_files)")
            clock = prometheus_clock(prom)
            if not clock.within(MAX_CLOCK_SKEW_S):
                gaps.append(f"clock skew between this machine and Prometheus is "
                            f"{clock.describe()}, not shown within ±{MAX_CLOCK_SKEW_S} s: "
                            "detection times could be wrong")
    except FaultkitError as exc:  # PrometheusError is one
        gaps.append(f"Prometheus at {prom.url} is unreachable: {exc}")
    if container_running is False:
        where = f"{node.docker.container!r} on {node.docker.host}" if node.docker else "?"
        gaps.append(f"the node's container {where} is not running: the fault has no target")
    return gaps


def steady_state_violations(
    requests: Sequence[RequestRecord],
    events: Sequence[Event],
    node: str,
    slo: SLOSettings,
    t_from: float,
    t_to: float,
) -> list[str]:
    """Why ``node`` was not in steady state over [t_from, t_to) (empty: it was): readiness
    not OK throughout, the window's client requests missing the node's
    :func:`~slo.checks.window_objectives`, or none of them succeeding."""
    from slo.measure import readiness_ok_since, window_slis

    out: list[str] = []
    health = [e for e in events if e.node == node
              and e.kind in (EventKind.HEALTH_OK, EventKind.HEALTH_FAIL) and e.t < t_to]
    have, ok_since = readiness_ok_since(health, node)
    if have and (ok_since is None or ok_since > t_from) and not _only_slow_answers(
            health, t_from, slo.ttft_s):
        out.append("the readiness probe was not OK throughout the baseline")
    ours = [r for r in requests if r.node == node and r.kind != "probe"]
    sli = window_slis(ours, t_from, t_to)
    error_ratio, ttft_p95 = window_objectives(slo)
    if sli.requests and error_ratio.met(sli) is False:
        out.append(f"baseline error ratio {sli.error_ratio:.3f} > objective "
                   f"{error_ratio.limit:g} ({sli.failed} of {sli.requests} failed)")
    if ttft_p95.met(sli) is False:
        out.append(f"baseline TTFT p95 {sli.ttft_p95_s:.3f} s > objective {ttft_p95.limit:g} s")
    if sli.requests and not sli.ok:
        out.append("no request succeeded during the baseline")
    return out


def _only_slow_answers(health: Sequence[Event], t_from: float, limit_s: float) -> bool:
    """Whether every failed probe since ``t_from`` was a *slow answer*: a timeout of the
    harness's probe (1 s) that the next probe answered OK, the node unanswered for less
    than ``limit_s`` (the node's TTFT objective) from the failed probe's send to that
    answer. A CPU-bound engine under load answers ``/health`` that slowly and still serves
    its users in time (CI: vLLM's ``/health`` took 1.23 s while every request of the
    baseline succeeded within 1.43 s); a refusal, an error status or a longer silence is
    a readiness failure (docs/definitions.md, "Steady state")."""
    from slo.measure import answered_at  # slo.measure imports this module

    ordered = sorted(health, key=lambda e: e.t)
    failed_since: float | None = None  # the send time of the first failed probe of a run
    hard = False  # the run held a refusal, an error status, anything but a timeout
    for event in ordered:
        if event.kind == EventKind.HEALTH_FAIL:
            if failed_since is None:
                failed_since, hard = event.t, False
            hard = hard or event.data.get("detail") != "timeout"
            continue
        if failed_since is None:
            continue
        answered = answered_at(event)
        if answered >= t_from and (hard or answered - failed_since >= limit_s):
            return False
        failed_since = None
    return failed_since is None  # still failing at the end: not a slow answer
