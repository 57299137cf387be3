"""Rule-based diagnosis: what caused the incident, from this run's evidence only.

Each rule looks at the run directory and, when it matches, says what it concluded and
which evidence it used. The evidence a rule may use is scoped by
:func:`reports.evidence.container_facts`: Docker's events inside the run's window about
this container, with each death attributed to its actor — the harness's own acts (a
revert, a rollback, a stop timeout, the fault's ``docker stop``) are never the engine's
failure, and state flags left by an earlier run are ignored and said to be.

:func:`diagnose` returns the **cause** first (the first rule of
:data:`~reports.diagnosis.causes.CAUSE_RULES` that matches), then every **finding** that
also holds (:data:`~reports.diagnosis.findings.FINDING_RULES`). When no cause rule matches,
the cause is "undiagnosed" with the evidence that was missing.
"""

from __future__ import annotations

from reports.diagnosis.base import (
    CONTEXT_RE,
    DROP_CLASSES,
    GPU_OOM_RE,
    ROUTINE_LOG_RE,
    STARTUP_KV_RE,
    UNDIAGNOSED_KEY,
    Diagnosis,
    telling_lines,
)
from reports.diagnosis.causes import CAUSE_RULES, rollout_result, rule_injected_fault
from reports.diagnosis.findings import FINDING_RULES
from reports.evidence import ContainerFacts, container_facts, fault_kind
from reports.load import RunData

__all__ = [
    "CONTEXT_RE",
    "DROP_CLASSES",
    "GPU_OOM_RE",
    "ROUTINE_LOG_RE",
    "STARTUP_KV_RE",
    "UNDIAGNOSED_KEY",
    "Diagnosis",
    "diagnose",
    "fault_kind",
    "rollout_result",
    "telling_lines",
]


def undiagnosed(data: RunData, facts: ContainerFacts) -> Diagnosis:
    """No cause rule matched: say which evidence was missing rather than guess."""
    missing = []
    if fault_kind(data) is None:
        missing.append("no fault recorded in run.json")
    if data.measurement is None:
        missing.append("no measurement.json (the run ended before it was measured)")
    if not any(e.kind.startswith("docker_") for e in data.timeline):
        missing.append("no Docker event on the timeline (Docker's events were not readable)")
    if data.container.log_tail is None:
        missing.append("no container log")
    missing += list(facts.stale)
    return Diagnosis(UNDIAGNOSED_KEY, "undiagnosed",
                     tuple(missing) or ("no diagnosis rule matched the evidence of this run",))


def diagnose(data: RunData) -> list[Diagnosis]:
    """The cause first (or "undiagnosed" with what was missing), then each finding."""
    facts = container_facts(data)
    cause = next((d for d in (rule(data, facts) for rule in CAUSE_RULES) if d is not None),
                 None)
    if cause is None:
        cause = undiagnosed(data, facts)
    elif facts.stale:
        cause = Diagnosis(cause.key, cause.title,
                          (*cause.evidence, *(f"not used: {s}" for s in facts.stale)),
                          cause.underlying)
    findings = [d for d in (rule(data, facts) for rule in FINDING_RULES) if d is not None]
    if cause.key in ("config_rejected", "failed_rollout", "rollout_served") and \
            fault_kind(data) != "rollout":
        also = rule_injected_fault(data, facts)  # the fault injected on what then served
        findings = [*([also] if also is not None else []), *findings]
    return [cause, *findings]
