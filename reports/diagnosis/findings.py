"""Findings that hold beside the cause (:data:`FINDING_RULES`): an engine that ignored
SIGTERM, one its supervision left down, a restart loop, a monitoring gap."""

from __future__ import annotations

from faultkit.model.events import EventKind
from reports.diagnosis.base import Diagnosis, Rule, deaths_words, rel
from reports.evidence import ContainerFacts
from reports.load import RunData


def finding_stop_timeout(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The engine ignored SIGTERM: Docker's stop escalated to SIGKILL after its timeout."""
    slow = [d for d in facts.deaths if d.stop_timeout]
    if not slow:
        return None
    return Diagnosis(
        "stop_timeout",
        "the engine did not exit on SIGTERM: Docker's stop timeout killed it (SIGKILL)",
        tuple(deaths_words(data, tuple(slow[:2]))),
    )


def finding_never_restarted(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The engine died and its container's restart policy left it down (kill_process)."""
    finding = data.run.fault_result.get("never_restarted")
    if not isinstance(finding, str) or not finding:
        return None
    return Diagnosis(
        "never_restarted",
        "the engine died and nothing brought it back: no restart by the node's own supervision",
        (f"run.json fault_result.never_restarted: {finding}",
         "the harness started the container after its ready timeout: that is not a recovery"),
    )


def finding_restart_loop(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    deaths = facts.engine_deaths
    if len(deaths) < 2:
        return None
    return Diagnosis(
        "restart_loop",
        f"restart loop: the engine died {len(deaths)} times in the run",
        (f"{len(deaths)} docker_die events of the engine's own at "
         + ", ".join(rel(data, d.t) for d in deaths[:8]),),
    )


def finding_monitoring_gap(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    m = data.measurement
    if m is None:
        return None
    if m.t_detect is None and (m.lost_total > 0 or m.t_impact is not None):
        return Diagnosis(
            "monitoring_gap",
            "monitoring gap: users were affected and no alert fired",
            (
                "measurement.json t_detect = null (not detected within the window)",
                f"measurement.json lost_total = {m.lost_total}"
                + ("" if m.t_impact is None else f", first failure at {rel(data, m.t_impact)}"),
            ),
        )
    fired = [
        e for e in data.timeline if e.source == "observer" and e.kind == EventKind.ALERT_FIRING
    ]
    if m.t_detect is not None and m.detect_signal != "alert" and not fired:
        return Diagnosis(
            "no_alert",
            f"no alert fired: detected only by the {m.detect_signal} signal",
            (
                f"measurement.json detect_signal = {m.detect_signal}",
                "no observer/alert_firing event in timeline.jsonl",
            ),
        )
    return None


#: findings that hold beside the cause
FINDING_RULES: tuple[Rule, ...] = (
    finding_stop_timeout,
    finding_never_restarted,
    finding_restart_loop,
    finding_monitoring_gap,
)
