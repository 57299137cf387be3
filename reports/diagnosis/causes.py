"""The cause rules, most specific first (:data:`CAUSE_RULES`): the fault not applied, the
candidate's own defect, the kernel's OOM kill, the engine's words "CUDA out of memory", the
engine exiting by itself, an act through Docker's API when none was injected (a postmortem's
kill, pause or network cut), the injected fault, a clean rejection, a request fault that hurt
users, a harness action's failed check, slow service, no incident."""

from __future__ import annotations

import re
from collections import Counter

from faultkit.docker.containers import last_words
from faultkit.model.events import EventKind
from faultkit.model.kinds import FAULTS, fault_phrase, spec_of
from reports.diagnosis.base import (
    CONTEXT_RE,
    GPU_OOM_RE,
    STARTUP_KV_RE,
    Diagnosis,
    Rule,
    deaths_words,
    drops,
    log_lines,
    params_of,
    rel,
    telling_lines,
)
from reports.evidence import ContainerFacts, fault_kind, fault_node
from reports.load import RunData
from reports.numbers import is_number
from reports.outage import no_outage
from slo.types import Measurement


def rule_not_applied(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The fault never took effect: the platform refused it, or its mechanism did nothing.
    The run says nothing about the node's behaviour under it."""
    refused = [e for e in data.timeline if e.source == "fault"
               and e.kind in ("not_applied", EventKind.NO_EFFECT)]
    if not refused:
        return None
    first = refused[0]
    why = first.data.get("error") or first.data.get("why") or first.kind
    kind = fault_kind(data)
    return Diagnosis(
        "fault_not_applied",
        f"the fault could not be applied ({fault_phrase(kind, params_of(data))}): {why}",
        tuple(f"fault/{e.kind} at {rel(data, e.t)}: "
              + ", ".join(f"{k}={v}" for k, v in e.data.items() if k != "fault")
              for e in refused[:3]),
    )


#: a start-up line that names the config value the engine refused
CONFIG_VALUE_RE = re.compile(r"max[_-]model[_-]len|Value ?error|invalid (?:argument|value)|"
                             r"not found|No such file|does not exist", re.IGNORECASE)


def why_it_stopped(log: str) -> str | None:
    """The candidate's own words on why it stopped: the last line naming the value it
    refused (vLLM's ``Value error, User-specified max_model_len (100000) …``), else the
    last exception line (:func:`faultkit.docker.containers.last_words`)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    named = [ln for ln in lines if STARTUP_KV_RE.search(ln) or CONFIG_VALUE_RE.search(ln)]
    return named[-1][:400] if named else last_words(log)


def rollout_result(data: RunData) -> dict[str, object] | None:
    """What a rollout of a candidate config did: the fault's result when the run's fault is
    the rollout, else the ``gateway_rollout`` event a scenario notes when it rolls a
    candidate out before injecting another fault (test_gateway_rollout)."""
    if fault_kind(data) == "rollout":
        return dict(data.run.fault_result)
    noted = [e for e in data.timeline if e.kind == "gateway_rollout"]
    return dict(noted[0].data) if noted else None


def rule_candidate(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """A rollout: the candidate's own defect (its reason and last words), or that it served."""
    result = rollout_result(data)
    if result is None:
        return None
    config = str(result.get("config") or params_of(data).get("config") or "the candidate")
    reason = result.get("failed_reason")
    failed = [e for e in data.timeline if e.kind in (
        EventKind.CONFIG_FAILED, EventKind.READINESS_TIMEOUT, EventKind.ROLLOUT_FAILED)]
    if (not isinstance(reason, str) or not reason) and failed:
        reason = str(failed[0].data.get("reason") or f"{failed[0].source}/{failed[0].kind}")
    if (not isinstance(reason, str) or not reason) and any(
            e.kind == EventKind.ROLLBACK_START for e in data.timeline):
        reason = "rolled back before it answered its readiness check"
    if not isinstance(reason, str) or not reason:
        if result.get("ready") is True:
            return Diagnosis(
                "rollout_served",
                f"the candidate config {config} became ready and served",
                (f"run.json fault_result.ready = true, time_to_ready_s = "
                 f"{result.get('time_to_ready_s')}",),
            )
        return None
    log = result.get("candidate_log_tail")
    said = why_it_stopped(log) if isinstance(log, str) else None
    rejected = said is not None and bool(STARTUP_KV_RE.search(said) or CONFIG_VALUE_RE.search(said))
    key = "config_rejected" if rejected else "failed_rollout"
    evidence = [f"run.json fault_result.failed_reason: {reason}"]
    evidence += [f"the candidate's log: {line}" for line in
                 telling_lines(log if isinstance(log, str) else None, 3)]
    evidence += deaths_words(data, facts.engine_deaths[:2])
    if result.get("rolled_back"):
        evidence.append("run.json fault_result.rolled_back = true: the previous config serves "
                        "again")
    title = f"the candidate config {config} never became ready: {reason}"
    return Diagnosis(key, title, tuple(evidence), underlying=said or "")


def rule_oom_kill(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The kernel killed the engine for memory in this run (Docker's ``oom`` then ``die``)."""
    kills = facts.oom_kills
    if not kills:
        return None
    kind = fault_kind(data)
    if kind == "memory_squeeze":
        title = (f"the engine was OOM-killed under the injected fault "
                 f"({fault_phrase(kind, params_of(data))})")
    else:
        title = "memory exhaustion: the kernel OOM-killed the engine"
    return Diagnosis("memory_exhaustion", title, tuple(deaths_words(data, kills)))


def rule_gpu_oom(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The engine's own words: CUDA out of memory (in this run's log or its answers)."""
    lines = log_lines(data, GPU_OOM_RE)
    details = [
        r.error_detail for r in data.ledger if r.error_detail and GPU_OOM_RE.search(r.error_detail)
    ]
    if not lines and not details:
        return None
    evidence = [f"container log: {line}" for line in lines[:3]]
    if details:
        evidence.append(f"{len(details)} ledger records carry a GPU OOM error, e.g.: {details[0]}")
    evidence += deaths_words(data, facts.engine_deaths[:2])
    kind = fault_kind(data)
    title = "GPU out of memory during prefill"
    if kind == "oversized_context":
        title += f" of the injected fault ({fault_phrase(kind, params_of(data))})"
    return Diagnosis("gpu_oom", title, tuple(evidence))


def rule_engine_exit(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The engine ended by itself (no signal from Docker, the harness or the fault)."""
    deaths = facts.engine_deaths
    if not deaths:
        return None
    codes = Counter(d.exit_code for d in deaths)
    code_words = ", ".join(f"exit {c}" + (f" × {n}" if n > 1 else "")
                           for c, n in codes.items())
    said = last_words(data.container.log_tail or "")
    evidence = deaths_words(data, deaths[:3])
    if said:
        evidence.append(f"the engine's last words (container log): {said}")
    kind = fault_kind(data)
    during = "" if kind is None else \
        f" during the injected fault ({fault_phrase(kind, params_of(data))})"
    return Diagnosis("engine_exit", f"the engine exited by itself ({code_words}){during}",
                     tuple(evidence), underlying=said or "")


#: Docker's actions that take a container out of service without ending its process, and
#: the action that ends each (a pause, a network cut), with a report's words for them
_OUTSIDE_ACTS = {
    "docker_pause": ("docker_unpause", "paused through Docker's API (docker pause): the "
                                       "engine was frozen"),
    "docker_network_disconnect": ("docker_network_connect",
                                  "cut off the network through Docker's API (docker network "
                                  "disconnect)"),
}


#: Docker disconnects a container that died from its networks this soon after the ``die``
DIE_DISCONNECTS_S = 2.0


def _until(data: RunData, t: float, end_kind: str) -> str:
    """``for 6.0 s (until docker_unpause)`` or that no end was seen in the window."""
    end = next((e.t for e in data.timeline if e.kind == end_kind and e.t >= t), None)
    if end is None:
        return f"; no {end_kind} in the window"
    return f" for {end - t:.1f} s (until {end_kind} at {rel(data, end)})"


def rule_outside_docker_act(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """No fault was injected, and Docker's own events show an act on the container through
    its API that no act of the run explains: a kill or stop (a death whose signal went
    through Docker's API, actor ``docker_api``), a pause, a network disconnect — the first
    of them is the cause (an incident a postmortem found, or someone acting on the node
    during a run that injected nothing)."""
    if fault_kind(data) is not None:
        return None
    found: list[tuple[float, str, str, str]] = []  # (t, key, title, evidence)
    for d in facts.deaths:
        if d.actor == "docker_api":
            how = "docker stop" if len(d.signals) > 1 else "docker kill"
            found.append((d.t, "docker_api_kill",
                          f"the container was killed through Docker's API ({how}, signal "
                          f"{' then '.join(d.signals)}): not by the engine itself, not by "
                          "faultkit", d.words(rel(data, d.t))))
    for e in data.timeline:
        act = _OUTSIDE_ACTS.get(e.kind)
        if act is None or facts.acting_at(e.t) is not None:
            continue
        if any(0 <= e.t - d.t <= DIE_DISCONNECTS_S for d in facts.deaths):
            continue  # Docker takes a dead container off its networks: the death's doing
        end_kind, words = act
        network = e.data.get("network")
        where = f" from network {network}" if isinstance(network, str) and network else ""
        key = "docker_api_" + e.kind.removeprefix("docker_")
        found.append((e.t, key, f"the container was {words}{where}{_until(data, e.t, end_kind)}",
                      f"{e.kind} at {rel(data, e.t)} (Docker's own event)"))
    if not found:
        return None
    found.sort()
    _t, key, title, _ = found[0]
    evidence = [line for *_, line in found[:4]]
    evidence.append("no fault was injected: run.json has no fault kind and no fault event")
    return Diagnosis(key, title, tuple(evidence))


def rule_injected_fault(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """The injected fault took effect and is the whole story (kill, stop, pause, partition…)."""
    kind = fault_kind(data)
    spec = FAULTS.get(kind or "")
    m = data.measurement
    if spec is None or m is None or spec.request_level:
        return None
    if kind == "rollout":
        return None
    evidence = [f"run.json fault.kind = {kind}: {fault_phrase(kind, params_of(data))}",
                f"measurement.json effect_evidence = {m.effect_evidence}"
                + (f" ({m.effect_detail})" if m.effect_detail else "")]
    own = [d for d in facts.deaths if d.actor == "fault"]
    evidence += deaths_words(data, tuple(own[:3]))
    if dropped := drops(data):
        evidence.append(f"client drops overlapping the fault: {dropped}")
    where = fault_node(data)
    title = spec.cause if where in (None, data.run.node) else \
        f"{spec.cause}, on {where} behind {data.run.node}"
    return Diagnosis(f"injected_{kind}", title, tuple(evidence))


def rule_slow_service(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """A harness action (malformed requests, prompts at the context limit) during which
    more users waited too long than the TTFT objective allows (``slo.ttft_target``: 0.95
    lets 5 % be slow), with nothing lost and no death: the slowness is a finding of the
    run, not something the action is shown to have caused. Slow users within the
    allowance are no incident, and no cause."""
    kind = fault_kind(data)
    spec = spec_of(kind)
    m = data.measurement
    if spec is None or spec.implementation is not None or m is None or m.lost_total \
            or not m.slow_total or facts.deaths:
        return None
    if _slow_within_allowance(data, m):
        return None
    return Diagnosis(
        "slow_service",
        f"slow service: {m.slow_total} of {m.requests_total} requests were answered too "
        f"slowly for users during {fault_phrase(kind, params_of(data))}; none was lost and the "
        "engine did not die",
        (f"measurement.json slow_total = {m.slow_total}, lost_total = 0",
         "no docker_die in the run's window",
         "the action's own checks passed: the slowness is not shown to be its doing"),
    )


def _slow_within_allowance(data: RunData, m: Measurement) -> bool:
    """No more users were answered too slowly than the TTFT objective allows
    (``slo.ttft_target``: 0.95 lets 5 % be slow)."""
    target = data.run.slo.get("ttft_target")
    return bool(is_number(target) and m.requests_total
                and m.slow_total / m.requests_total <= 1 - target)


def rule_request_fault(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """A request-level fault that hurt users without killing the engine: the requests it
    sent are the cause (a flood saturated the node: users waited or were turned away)."""
    kind = fault_kind(data)
    spec = FAULTS.get(kind or "")
    m = data.measurement
    if spec is None or m is None or not spec.request_level or no_outage(kind, m):
        return None
    if m.lost_total == 0 and m.slow_total == 0 and m.t_detect is None:
        return None
    hurt = []
    if m.lost_total:
        classes = ", ".join(f"{c} {n}" for c, n in sorted(m.lost_by_class.items()))
        hurt.append(f"{m.lost_total} lost ({classes})")
    if m.slow_total:
        hurt.append(f"{m.slow_total} answered too slowly for users")
    evidence = [f"run.json fault.kind = {kind}: {fault_phrase(kind, params_of(data))}",
                f"measurement.json: {'; '.join(hurt) or 'detected by ' + str(m.detect_signal)}",
                "no death of the engine in the run (Docker's events)"]
    return Diagnosis(f"injected_{kind}", spec.cause, tuple(evidence))


def rule_context_rejection(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    hits = [
        r
        for r in data.ledger
        if r.http_status == 400 and r.error_detail and CONTEXT_RE.search(r.error_detail)
    ]
    if not hits:
        return None
    return Diagnosis(
        "context_rejection",
        "clean context-length rejection (HTTP 400): the node refused prompts longer than it "
        "serves and kept serving",
        (
            f"{len(hits)} ledger records with http_status 400 and a context-length error, "
            f"e.g. request {hits[0].id}: {hits[0].error_detail}",
        ),
    )


def rule_failed_check(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """A harness action's own finding (a soak's memory trend, preemptions): its failed check."""
    kind = fault_kind(data)
    spec = spec_of(kind)
    if spec is None or spec.implementation is not None or data.verdict is None:
        return None
    failed = [c for c in data.verdict.checks if not c.passed and not c.inconclusive]
    if not failed:
        return None
    first = failed[0]
    return Diagnosis(
        f"{kind}_{first.name}",
        f"{first.why} (check {first.name}, under {fault_phrase(kind, params_of(data))})",
        tuple(f"verdict.json {c.name}: observed {c.observed}, expected {c.expected}"
              for c in failed),
    )


def rule_served_through(data: RunData, facts: ContainerFacts) -> Diagnosis | None:
    """No incident: the node served through it (no loss, no signal, steady at the end) —
    also when only the harness's readiness probe failed meanwhile (a busy engine's
    ``/health`` timing out) while no user was lost and no more were slow than the TTFT
    objective allows: the users' service is the incident, and it held."""
    kind = fault_kind(data)
    m = data.measurement
    if m is None or kind is None:
        return None
    quiet = (m.lost_total == 0 and m.t_detect is None and m.t_recovered is not None
             and not facts.deaths)
    probe_only = quiet and bool(m.recovery_s) and _slow_within_allowance(data, m)
    if not (no_outage(kind, m) or (quiet and not m.recovery_s) or probe_only):
        return None
    evidence = [
        f"run.json fault.kind = {kind}",
        f"measurement.json lost_total = 0 of {m.requests_total}, t_detect = null",
    ]
    if probe_only:
        evidence.append(
            f"measurement.json slow_total = {m.slow_total}, within the TTFT objective's "
            f"allowance; only the harness's readiness probe failed, for "
            f"{m.recovery_s:.1f} s (recovery_s)")
    if facts.policy_restarts is not None:
        evidence.append(f"container.json restart_count unchanged: "
                        f"{facts.policy_restarts} restarts in the run")
    return Diagnosis(
        "served_through",
        f"no incident: the node kept serving through {fault_phrase(kind, params_of(data))}",
        tuple(evidence),
    )


#: the cause rules, most specific first: the first that matches is the report's cause
CAUSE_RULES: tuple[Rule, ...] = (
    rule_not_applied,
    rule_candidate,
    rule_oom_kill,
    rule_gpu_oom,
    rule_engine_exit,
    rule_outside_docker_act,
    rule_injected_fault,
    rule_context_rejection,
    rule_request_fault,
    rule_failed_check,
    rule_slow_service,
    rule_served_through,
)
