"""Preventive changes, catalogued by diagnosis key.

Each change is typed as in the Google SRE postmortem action-item table:

- ``mitigate`` — makes the next occurrence hurt less or end sooner;
- ``prevent`` — stops it from happening again;
- ``process`` — changes how we work (gates, tests, runbooks) so it is caught earlier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from reports.diagnosis import Diagnosis

ChangeType = Literal["mitigate", "prevent", "process"]


@dataclass(frozen=True, slots=True)
class Change:
    type: ChangeType
    text: str


CATALOGUE: dict[str, tuple[Change, ...]] = {
    "memory_exhaustion": (
        Change(
            "prevent",
            "Size the container memory limit for weights + KV cache + worst-case "
            "prefill activations; lower --max-model-len / --max-num-seqs until it fits.",
        ),
        Change(
            "prevent",
            "Cap --max-num-batched-tokens (enable chunked prefill) so one long "
            "prompt cannot spike memory.",
        ),
        Change(
            "mitigate",
            "Keep a restart policy (on-failure / unless-stopped) so an OOM kill "
            "is followed by a restart, and alert on restart-count increases.",
        ),
        Change(
            "process",
            "Run the OOM scenario in the pre-promotion gate for every serving-config change.",
        ),
    ),
    "gpu_oom": (
        Change(
            "prevent",
            "Cap --max-num-batched-tokens / enable chunked prefill so prefill "
            "activations stay bounded.",
        ),
        Change(
            "prevent",
            "Lower --max-model-len or --gpu-memory-utilization to leave headroom "
            "for worst-case prefill.",
        ),
        Change(
            "mitigate",
            "Reject prompts over a token limit at the gateway before they reach the engine.",
        ),
        Change("process", "Add an oversized-context scenario to the gate for this node."),
    ),
    "config_rejected": (
        Change(
            "prevent",
            "Validate the serving config before rollout: the KV cache must hold "
            "one max_model_len sequence (lower --max-model-len or give the KV cache "
            "more memory).",
        ),
        Change("mitigate", "Keep automatic rollback on a readiness deadline for rollouts."),
        Change("process", "Run `faultkit gate` on every candidate config before promotion."),
    ),
    "failed_rollout": (
        Change(
            "mitigate",
            "Keep automatic rollback on the readiness deadline; shorten the "
            "deadline to the config's measured cold-start time plus margin.",
        ),
        Change(
            "prevent", "Gate candidate configs (`faultkit gate`) before they reach a serving node."
        ),
        Change("process", "Alert when a node stays unready after a rollout."),
    ),
    "restart_loop": (
        Change(
            "prevent",
            "Size the restart policy and the KV cap for worst-case context so a "
            "restart does not hit the same memory spike again.",
        ),
        Change(
            "mitigate",
            "Use a bounded restart policy (on-failure:N) with backoff so a crash "
            "loop stops and becomes visible.",
        ),
        Change("process", "Alert on restarts (changes(process_start_time_seconds[10m]) > 1)."),
    ),
    "context_rejection": (
        Change(
            "mitigate",
            "Count context-length 400s as client errors, not availability "
            "failures, and return them to clients with the limit stated.",
        ),
        Change("prevent", "Truncate or reject over-long prompts client-side or at the gateway."),
        Change("process", "Publish the node's max context length with its API."),
    ),
    "never_restarted": (
        Change(
            "prevent",
            "Make the engine's death end the container with a non-zero status (an entrypoint "
            "or supervisor that exits non-zero when the engine exits), or use the restart "
            "policy `unless-stopped`: `on-failure` never restarts an exit 0.",
        ),
        Change(
            "mitigate",
            "Alert on the node being down for longer than its cold start; check the policy with "
            "`docker inspect -f '{{.HostConfig.RestartPolicy.Name}}' CONTAINER`.",
        ),
        Change("process", "Gate every serving config with `kill_process` on the engine's "
                          "worker, not only a kill of the container."),
    ),
    "injected_kill": (
        Change(
            "mitigate",
            "Keep a restart policy that restarts the engine after a crash "
            "(note: `docker kill` is a manual stop and is not restarted).",
        ),
        Change(
            "prevent",
            "Serve from two or more replicas behind a health-checked router so "
            "one crash loses only its in-flight requests.",
        ),
        Change("process", "Track cold-start time per config; it bounds recovery after a crash."),
    ),
    "injected_pause": (
        Change(
            "prevent",
            "Use a liveness check that generates a token (a hung engine keeps "
            "its port open and may still answer /health).",
        ),
        Change(
            "mitigate",
            "Set a client time-to-first-token timeout so hung requests fail fast "
            "and can be retried elsewhere.",
        ),
    ),
    "injected_network": (
        Change("mitigate", "Retry idempotent requests with backoff and short connect timeouts."),
        Change("prevent", "Spread replicas across hosts/links with health-checked failover."),
    ),
    "monitoring_gap": (
        Change(
            "prevent",
            "Add the missing alert: up == 0 / absent() on the node's job with a "
            "short for:, plus a client-side or probe error-ratio alert (burn-rate "
            "rules go empty when the server is dead).",
        ),
        Change("mitigate", "Run a synthetic probe against the node and alert on its failures."),
        Change("process", "Keep this scenario in CI so the alert's recall is tested."),
    ),
    "no_alert": (
        Change(
            "prevent",
            "Add an alert on the signal that did detect it (up == 0 / probe "
            "failures) so someone is paged, not just a dashboard.",
        ),
        Change("process", "Keep this scenario in CI so the alert's recall is tested."),
    ),
    "served_through": (
        Change(
            "process",
            "Keep this scenario in the pre-promotion gate so a serving config that cannot "
            "take these requests is caught before it ships.",
        ),
    ),
    "undiagnosed": (
        Change(
            "process",
            "Investigate by hand: no rule matched this run's evidence. Once the "
            "cause is known, add a diagnosis rule and catalogue entry.",
        ),
    ),
}


def changes_for(diagnoses: list[Diagnosis]) -> list[tuple[Diagnosis, Change]]:
    """The catalogue's changes for each diagnosis, in order, without duplicates."""
    out: list[tuple[Diagnosis, Change]] = []
    seen: set[str] = set()
    for diag in diagnoses:
        for change in CATALOGUE.get(diag.key, CATALOGUE["undiagnosed"]):
            if change.text not in seen:
                seen.add(change.text)
                out.append((diag, change))
    return out
