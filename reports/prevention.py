"""Preventive changes, each tied to a value of this run, for each diagnosis the evidence
supports.

A change cites the flag, value or figure it comes from (``memory 256m``, ``12 of 40
users lost``, the candidate's own words); a diagnosis the evidence does not support gets
no change, and a report carries at most one change that could be written without reading
it (:data:`GENERIC`). Each change is typed as in the SRE postmortem action-item table:

- ``prevent`` — stops it from happening again;
- ``detect`` — makes monitoring see it, or see it sooner;
- ``mitigate`` — makes the next occurrence hurt less or end sooner;
- ``process`` — changes how we work (gates, tests, runbooks) so it is caught earlier.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from faultkit.model.kinds import fault_phrase
from reports.diagnosis import Diagnosis
from reports.evidence import fault_kind
from reports.load import RunData
from reports.numbers import is_number, num
from reports.outage import probe_s
from reports.server_estimate import server_estimate

ChangeType = Literal["prevent", "detect", "mitigate", "process"]


@dataclass(frozen=True, slots=True)
class Change:
    type: ChangeType
    text: str


#: the one change a report may carry that does not depend on its own figures
GENERIC = Change("process", "Keep this scenario in the pre-promotion gate "
                            "(`faultkit gate`) so a config that regresses here is caught.")


def _mib(value: object) -> str | None:
    if is_number(value) and value > 0:
        return f"{value / 2**20:.0f} MiB"
    return None


def _lost(data: RunData) -> str:
    m = data.measurement
    if m is None:
        return "users' requests"
    if (estimate := server_estimate(m)) is not None:
        lost = estimate.get("lost")
        return (f"an estimated {lost} requests (server-side)" if isinstance(lost, int)
                else "an unestimated number of requests")
    return f"{m.lost_total} of {m.requests_total} requests"


def _recovery(data: RunData) -> str:
    m = data.measurement
    if m is None or m.recovery_s is None:
        return "the outage"
    return f"the {num(m.recovery_s)} s outage"


def _memory(d: Diagnosis, data: RunData) -> list[Change]:
    limit = _mib(data.container.after.get("memory_limit"))
    squeeze = data.run.fault.params.get("limit") if data.run.fault else None
    where = f"the limit was {squeeze} (squeezed)" if squeeze else (
        f"the limit is {limit}" if limit else "the limit is not recorded")
    return [Change("prevent", f"Size the container's memory for weights + KV cache + peak "
                              f"prefill: the kernel killed the engine when {where}; lower "
                              "--max-model-len / --max-num-seqs or raise the limit until it "
                              "fits with headroom."),
            Change("detect", "Alert on container memory above 90 % of its limit "
                             f"(cost of this kill: {_lost(data)} lost).")]


def _gpu_oom(d: Diagnosis, data: RunData) -> list[Change]:
    what = fault_phrase(fault_kind(data), data.run.fault.params if data.run.fault else {})
    return [Change("prevent", f"Bound prefill memory: {what} exhausted GPU memory; cap "
                              "--max-num-batched-tokens (chunked prefill) or lower "
                              "--max-model-len so the largest admitted prompt fits."),
            Change("mitigate", f"Reject prompts over the served length at the gateway: "
                               f"{_lost(data)} were lost when the engine died.")]


def _candidate(d: Diagnosis, data: RunData) -> list[Change]:
    config = data.run.fault.params.get("config") if data.run.fault else None
    said = f" (its words: {d.underlying})" if d.underlying else ""
    changes = [Change("prevent", f"Fix serving config {config or 'the candidate'} before it "
                                 f"ships{said}.")]
    if data.run.fault_result.get("rolled_back"):
        changes.append(Change("process", f"Keep the readiness deadline and automatic rollback: "
                                         f"they restored the previous config; "
                                         f"{_lost(data)} were lost on the way."))
    return changes


def _engine_exit(d: Diagnosis, data: RunData) -> list[Change]:
    said = f" — its last words: {d.underlying}" if d.underlying else ""
    return [Change("prevent", f"Find why the engine exited{said}; it is not something the "
                              "harness did."),
            Change("detect", "Alert on restarts: "
                             "changes(process_start_time_seconds[10m]) > 0.")]


def _kill(d: Diagnosis, data: RunData) -> list[Change]:
    ttr = data.run.fault_result.get("time_to_ready_s")
    cold = f" (the engine took {num(float(ttr))} s to be ready again)" \
        if is_number(ttr) else ""
    return [Change("mitigate", f"Serve from two replicas behind a health-checked router: a "
                               f"crash cost {_lost(data)} over {_recovery(data)}{cold}.")]


def _hung(data: RunData) -> str:
    """What a hang cost its users: lost, and answered too slowly."""
    m = data.measurement
    if m is None:
        return "cost users' requests"
    return (f"lost {m.lost_total} of {m.requests_total} requests and answered "
            f"{m.slow_total} more too slowly")


def _pause(d: Diagnosis, data: RunData) -> list[Change]:
    return [Change("detect", "Probe liveness with a generated token, not only /health: "
                             f"{_recovery(data)} {_hung(data)}."),
            Change("mitigate", "Set a client time-to-first-token timeout so hung requests "
                               "fail fast and retry elsewhere.")]


def _stall(d: Diagnosis, data: RunData) -> list[Change]:
    """A whole container stopped is a freeze (as a pause); the engine alone stopped while
    its API answered is what only a token-generating probe and the stall alert see."""
    if data.run.fault_result.get("whole"):
        return _pause(d, data)
    m = data.measurement
    probe = probe_s(m) if m is not None else None
    health = ("the readiness endpoint answered OK throughout" if probe is None
              else f"the readiness endpoint failed only {num(probe)} s in")
    changes = []
    if m is None or "FaultkitEngineStalled" not in (m.detect_detail or ""):
        changes.append(Change(
            "detect", "Load the stall alert (`faultkit rules`: FaultkitEngineStalled) and a "
                      "probe that asks the engine for one token (docs/slo.md, \"A stalled "
                      f"engine\"): during {_recovery(data)} {health}."))
    changes.append(Change(
        "mitigate", "Make the liveness check generate a token and restart the engine when "
                    f"it cannot: nothing restarted it, and {_recovery(data)} "
                    f"{_hung(data)}."))
    changes.append(Change("mitigate", "Set a client time-to-first-token timeout so hung "
                                      "requests fail fast and retry elsewhere."))
    return changes


def _network(d: Diagnosis, data: RunData) -> list[Change]:
    return [Change("mitigate", f"Fail over to a replica on another path: {_lost(data)} were "
                               f"lost during {_recovery(data)}.")]


def _stop_timeout(d: Diagnosis, data: RunData) -> list[Change]:
    return [Change("prevent", "Make the engine exit on SIGTERM (an entrypoint that `exec`s "
                              "the server, or `--init`): Docker waited out its stop timeout "
                              "and SIGKILLed it, which every deploy and rollback pays.")]


def _never_restarted(d: Diagnosis, data: RunData) -> list[Change]:
    return [Change("prevent", "Make the engine's death end its container with a non-zero "
                              "status, or use restart policy `unless-stopped`: "
                              f"{d.evidence[0]}")]


def _monitoring_gap(d: Diagnosis, data: RunData) -> list[Change]:
    return [Change("detect", f"Add the missing alert: {_lost(data)} were lost and no alert "
                             "fired (up == 0 / absent() on the node's job, plus a probe "
                             "error-ratio alert).")]


def _no_alert(d: Diagnosis, data: RunData) -> list[Change]:
    m = data.measurement
    seen = "" if m is None or m.detection_s is None else f" after {num(m.detection_s)} s"
    signal = m.detect_signal if m is not None else "another signal"
    return [Change("detect", f"Alert on the signal that saw it ({signal}{seen}) so someone "
                             "is paged.")]


def _outside_act(d: Diagnosis, data: RunData) -> list[Change]:
    """An act on the container through Docker's API that nobody injected: who did it is
    the first question, then what the act's kind calls for."""
    when = d.evidence[0] if d.evidence else "in this window"
    changes = [Change("process", "Find who or what acted on the container through Docker's "
                                 f"API ({when}): the daemon does not record the caller — "
                                 "audit /var/run/docker.sock (auditd) or put an "
                                 "authorization plugin in front of it; it cost "
                                 f"{_lost(data)} over {_recovery(data)}.")]
    more = {"docker_api_kill": _kill, "docker_api_pause": _pause,
            "docker_api_network_disconnect": _network}.get(d.key)
    return changes + (more(d, data) if more is not None else [])


#: diagnosis key → the changes it supports, built from the run's own values
RULES: dict[str, Callable[[Diagnosis, RunData], list[Change]]] = {
    "memory_exhaustion": _memory,
    "gpu_oom": _gpu_oom,
    "config_rejected": _candidate,
    "failed_rollout": _candidate,
    "engine_exit": _engine_exit,
    "injected_kill": _kill,
    "injected_kill_process": _kill,
    "injected_pause": _pause,
    "injected_stall": _stall,
    "injected_partition": _network,
    "injected_loss": _network,
    "injected_bandwidth": _network,
    "injected_latency": _network,
    "docker_api_kill": _outside_act,
    "docker_api_pause": _outside_act,
    "docker_api_network_disconnect": _outside_act,
    "stop_timeout": _stop_timeout,
    "never_restarted": _never_restarted,
    "monitoring_gap": _monitoring_gap,
    "no_alert": _no_alert,
}


def changes_for(diagnoses: list[Diagnosis], data: RunData) -> list[tuple[Diagnosis, Change]]:
    """Each diagnosis's changes from this run's values, in order, without duplicates, and at
    most one :data:`GENERIC` change (for an incident no rule has changes for)."""
    out: list[tuple[Diagnosis, Change]] = []
    seen: set[str] = set()
    for diag in diagnoses:
        rule = RULES.get(diag.key)
        for change in rule(diag, data) if rule is not None else []:
            if change.text not in seen:
                seen.add(change.text)
                out.append((diag, change))
    if not out and diagnoses and diagnoses[0].key not in {"served_through", "rollout_served"}:
        out.append((diagnoses[0], GENERIC))
    return out
