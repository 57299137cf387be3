"""Rule-based diagnosis: each rule looks at evidence in the run directory and, when it
matches, says what it concluded and exactly which evidence it used.

Rules never guess: a rule matches only on concrete evidence (a container state field, a
log line, a ledger record, a timeline event, a measurement field). When no rule matches,
the diagnosis is :data:`UNDIAGNOSED`. Several rules may match one run (e.g. memory
exhaustion *and* a monitoring gap); they are reported in rule order.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from faultkit.events import EventKind
from faultkit.faults import FAULTS, fault_class
from reports.figures import no_outage
from reports.load import RunData

#: fault kinds that cut or slow the network path (the faults of family "network")
NETWORK_FAULTS = frozenset(k for k in FAULTS if fault_class(k).family == "network")
#: error classes that mean the client lost the connection or the answer (not a clean reject)
DROP_CLASSES = frozenset(
    {
        "refused",
        "reset",
        "timeout_connect",
        "timeout_first_token",
        "timeout_total",
        "stream_error",
        "truncated",
    }
)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """One conclusion: ``key`` indexes the prevention catalogue; ``evidence`` is why."""

    key: str
    title: str
    evidence: tuple[str, ...]


UNDIAGNOSED = Diagnosis(
    key="undiagnosed",
    title="undiagnosed",
    evidence=("no diagnosis rule matched the evidence in this run directory",),
)

GPU_OOM_RE = re.compile(r"CUDA out of memory|OutOfMemoryError", re.IGNORECASE)
CONTEXT_RE = re.compile(
    r"maximum context length|maximum model length|exceed_context_size_error|"
    r"exceeds the available context size|longer than the model's context length",
    re.IGNORECASE,
)
STARTUP_KV_RE = re.compile(
    r"KV cache is needed|(?:ValueError|Error).*max_model_len|max_model_len.*(?:too large|"
    r"larger than|exceeds|cannot)|max seq len",
    re.IGNORECASE,
)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def fault_kind(data: RunData) -> str | None:
    """The injected fault's kind: run.json ``fault.kind``, else the first fault event's data."""
    fault = data.run.fault
    if fault is not None and fault.kind is not None:
        return fault.kind
    for ev in data.timeline:
        if ev.source == "fault" and isinstance(ev.data.get("fault"), str):
            return str(ev.data["fault"])
    return None


def _log_lines(data: RunData, pattern: re.Pattern[str]) -> list[str]:
    tail = data.container.log_tail
    if tail is None:
        return []
    return [line.strip() for line in tail.splitlines() if pattern.search(line)]


def _rel(data: RunData, t: float) -> str:
    t0 = data.t0
    return f"t={t:.3f}" if t0 is None else f"{t - t0:+.1f} s"


#: faults that kill the engine's process themselves: an exit 137 after them is theirs
KILL_KINDS = frozenset(k for k in FAULTS if fault_class(k).kills_the_engine)


def _exit_evidence(data: RunData) -> tuple[list[str], list[str]]:
    """(OOMKilled evidence, exit-137 evidence) from container.json and timeline event data."""
    oom: list[str] = []
    e137: list[str] = []
    for name, state in (("before", data.container.before), ("after", data.container.after)):
        if state.oom_killed is True:
            oom.append(f"container.json {name}.oom_killed = true")
        if state.exit_code == 137:
            e137.append(f"container.json {name}.exit_code = 137 (SIGKILL)")
    for out, hits, what in (
        (oom, [e for e in data.timeline if e.data.get("oom_killed") is True], "oom_killed = true"),
        (
            e137,
            [e for e in data.timeline if _int(e.data.get("exit_code")) == 137],
            "exit_code = 137",
        ),
    ):
        if hits:
            first = hits[0]
            where = f"{first.source}/{first.kind}"
            times = ", ".join(_rel(data, e.t) for e in hits[:5])
            more = "" if len(hits) <= 5 else f" and {len(hits) - 5} more"
            out.append(f"{len(hits)} timeline event(s) {where} with {what} (at {times}{more})")
    return oom, e137


def rule_memory_exhaustion(data: RunData) -> Diagnosis | None:
    oom, e137 = _exit_evidence(data)
    if oom:
        return Diagnosis(
            "memory_exhaustion", "memory exhaustion (container OOM-killed)", tuple(oom + e137)
        )
    if e137 and fault_kind(data) not in KILL_KINDS:
        return Diagnosis(
            "memory_exhaustion",
            "memory exhaustion (SIGKILL with no injected kill)",
            (*e137, f"injected fault was {fault_kind(data) or 'not recorded'}, not a kill"),
        )
    return None


def rule_injected_kill(data: RunData) -> Diagnosis | None:
    oom, e137 = _exit_evidence(data)
    kind = fault_kind(data)
    if kind in KILL_KINDS and e137 and not oom:
        return Diagnosis(
            "injected_kill",
            "engine process killed by the injected fault (SIGKILL)",
            (f"run.json fault.kind = {kind}", *e137),
        )
    return None


def rule_never_restarted(data: RunData) -> Diagnosis | None:
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


def rule_gpu_oom(data: RunData) -> Diagnosis | None:
    lines = _log_lines(data, GPU_OOM_RE)
    details = [
        r.error_detail for r in data.ledger if r.error_detail and GPU_OOM_RE.search(r.error_detail)
    ]
    if not lines and not details:
        return None
    evidence = [f"container log: {line}" for line in lines[:3]]
    if details:
        evidence.append(f"{len(details)} ledger records carry a GPU OOM error, e.g.: {details[0]}")
    return Diagnosis("gpu_oom", "GPU out of memory during prefill", tuple(evidence))


def rule_context_rejection(data: RunData) -> Diagnosis | None:
    hits = [
        r
        for r in data.ledger
        if r.http_status == 400 and r.error_detail and CONTEXT_RE.search(r.error_detail)
    ]
    if not hits:
        return None
    return Diagnosis(
        "context_rejection",
        "clean context-length rejection (HTTP 400)",
        (
            f"{len(hits)} ledger records with http_status 400 and a context-length error, "
            f"e.g. request {hits[0].id}: {hits[0].error_detail}",
        ),
    )


def rule_config_rejected(data: RunData) -> Diagnosis | None:
    lines = _log_lines(data, STARTUP_KV_RE)
    if not lines:
        return None
    return Diagnosis(
        "config_rejected",
        "serving config rejected at startup (KV cache too small for max_model_len)",
        tuple(f"container log: {line}" for line in lines[:3]),
    )


def rule_failed_rollout(data: RunData) -> Diagnosis | None:
    rollout = [
        e
        for e in data.timeline
        if e.source == "fault" and e.data.get("fault") == "rollout"
        and e.kind in (EventKind.INJECT_START, EventKind.INJECT_END)
    ]
    if not rollout and fault_kind(data) == "rollout":
        rollout = [
            e for e in data.timeline if e.source == "fault" and e.kind == EventKind.INJECT_START
        ]
    if not rollout:
        return None
    t_roll = rollout[0].t
    rollback = [
        e
        for e in data.timeline
        if e.source in ("harness", "fault")
        and e.kind in (EventKind.CONFIG_FAILED, EventKind.ROLLBACK_START,
                       EventKind.READINESS_TIMEOUT, EventKind.ROLLOUT_FAILED)
        and e.t >= t_roll
    ]
    if not rollback:
        return None
    t_stop = rollback[0].t
    ready = [
        e
        for e in data.timeline
        if e.source == "observer" and e.kind == EventKind.HEALTH_OK and t_roll <= e.t <= t_stop
    ]
    if ready:
        return None
    return Diagnosis(
        "failed_rollout",
        "failed rollout: the candidate config never became ready",
        (
            f"fault/{rollout[0].kind} (rollout) at {_rel(data, t_roll)}",
            f"{rollback[0].source}/{rollback[0].kind} at {_rel(data, rollback[0].t)}, "
            f"{rollback[0].t - t_roll:.1f} s after the rollout",
            "no observer/health_ok between the rollout and the rollback",
        ),
    )


def rule_restart_loop(data: RunData) -> Diagnosis | None:
    b, a = data.container.before.restart_count, data.container.after.restart_count
    seen = [e for e in data.timeline if e.kind == EventKind.RESTART_SEEN]
    if b is not None and a is not None and a - b >= 2:
        return Diagnosis(
            "restart_loop",
            "restart loop (the engine restarted repeatedly)",
            (f"container.json restart_count {b} → {a}", f"{len(seen)} harness/restart_seen events"),
        )
    if len(seen) >= 2:
        return Diagnosis(
            "restart_loop",
            "restart loop (the engine restarted repeatedly)",
            (f"{len(seen)} harness/restart_seen events",),
        )
    return None


def rule_injected_disruption(data: RunData) -> Diagnosis | None:
    kind = fault_kind(data)
    m = data.measurement
    if kind not in NETWORK_FAULTS | {"pause"} or m is None:
        return None
    end = m.t_revert if m.t_revert is not None else m.t_window_end
    drops = Counter(
        r.error_class
        for r in data.ledger
        if r.status != "ok"
        and r.error_class in DROP_CLASSES
        and r.t_invoke <= end
        and r.t_end >= m.t_effect
    )
    if not drops:
        return None
    classes = ", ".join(f"{c} {n}" for c, n in sorted(drops.items()))
    key = "injected_pause" if kind == "pause" else "injected_network"
    title = (
        "engine hung by the injected pause"
        if kind == "pause"
        else f"network path disrupted by the injected {kind}"
    )
    return Diagnosis(
        key,
        title,
        (f"run.json fault.kind = {kind}", f"client drops overlapping the fault window: {classes}"),
    )


def rule_monitoring_gap(data: RunData) -> Diagnosis | None:
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
                + ("" if m.t_impact is None else f", first failure at {_rel(data, m.t_impact)}"),
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


def rule_served_through(data: RunData) -> Diagnosis | None:
    """A request-level fault the node served through: no incident, and the report says so
    instead of "undiagnosed"."""
    kind = fault_kind(data)
    m = data.measurement
    if m is None or not no_outage(kind, m):
        return None
    evidence = [
        f"run.json fault.kind = {kind} (a request-level fault: its requests are the fault)",
        "measurement.json lost_total = 0, t_detect = null, probe_detection_s = null",
    ]
    b, a = data.container.before.restart_count, data.container.after.restart_count
    if b is not None and a is not None:
        evidence.append(f"container.json restart_count {b} → {a}")
    return Diagnosis(
        "served_through",
        f"no incident: the node kept serving through the {kind} fault",
        tuple(evidence),
    )


RULES: tuple[Callable[[RunData], Diagnosis | None], ...] = (
    rule_memory_exhaustion,
    rule_gpu_oom,
    rule_config_rejected,
    rule_failed_rollout,
    rule_restart_loop,
    rule_context_rejection,
    rule_never_restarted,
    rule_injected_kill,
    rule_injected_disruption,
    rule_monitoring_gap,
    rule_served_through,
)


def diagnose(data: RunData) -> list[Diagnosis]:
    """Every matching diagnosis, in rule order; ``[UNDIAGNOSED]`` when none matches."""
    found = [d for d in (rule(data) for rule in RULES) if d is not None]
    return found or [UNDIAGNOSED]
