"""The one-sentence summary at the top of an incident report.

Built only from ``run.json`` (node, fault kind and params), ``measurement.json`` and
``verdict.json``, in the words of docs/definitions.md, for example::

    PASS: sim-vllm was down for 2.5 s after a SIGKILL; Prometheus alerted after 1.5 s;
    31 of 118 requests were lost, all resets.

"Down for" is ``recovery_s`` (the fault taking effect → steady state again); "alerted
after" is ``detection_s`` by monitoring; "lost" is ``lost_total`` by ``lost_by_class``.
The sentence is plain text: the template escapes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reports.diagnosis import fault_kind
from reports.figures import no_outage, num
from reports.load import RunData
from slo.types import Measurement

#: error class → (singular, plural) as a person says it
CLASS_WORDS: dict[str, tuple[str, str]] = {
    "refused": ("refused connection", "refused connections"),
    "reset": ("reset", "resets"),
    "timeout_connect": ("connect timeout", "connect timeouts"),
    "timeout_first_token": ("first-token timeout", "first-token timeouts"),
    "timeout_total": ("timeout", "timeouts"),
    "http_4xx": ("HTTP 4xx answer", "HTTP 4xx answers"),
    "http_429": ("HTTP 429 answer", "HTTP 429 answers"),
    "http_5xx": ("HTTP 5xx answer", "HTTP 5xx answers"),
    "stream_error": ("stream error", "stream errors"),
    "truncated": ("truncated stream", "truncated streams"),
    "cancelled": ("cancelled request", "cancelled requests"),
    "shed_client": ("arrival shed by the client", "arrivals shed by the client"),
    "client_exhausted": ("client out of resources", "client out of resources"),
    "client_stalled": ("timeout while the client was stalled",
                       "timeouts while the client was stalled"),
    "other": ("other error", "other errors"),
}

#: fault kind → (how the node fared, preposition before the fault's phrase)
_IMPACT: dict[str, tuple[str, str]] = {
    "pause": ("was hung for", "by"),
    "partition": ("was unreachable for", "during"),
    "loss": ("was degraded for", "under"),
    "bandwidth": ("was degraded for", "under"),
    "latency": ("was degraded for", "under"),
    "flood": ("was impaired for", "under"),
    "oversized_context": ("was impaired for", "by"),
    "bad_input": ("was impaired for", "by"),
}


def _kill(p: Mapping[str, Any]) -> str:
    return "a docker kill" if p.get("docker_kill") else f"a {p.get('signal') or 'SIGKILL'}"


def _partition(p: Mapping[str, Any]) -> str:
    mode = {"blackhole": " (packets dropped)", "refuse": " (disconnected)"}
    return "a network partition" + mode.get(str(p.get("mode")), "")


def _loss(p: Mapping[str, Any]) -> str:
    if isinstance(p.get("percent"), int | float):
        return f"{p['percent']:g} % packet loss"
    if isinstance(p.get("probability"), int | float):
        return f"{p['probability'] * 100:g} % packet loss"
    return "packet loss"


def _oversized(p: Mapping[str, Any]) -> str:
    if p.get("requests") and p.get("input_tokens"):
        return f"{p['requests']} prompts of {p['input_tokens']} tokens"
    return "oversized prompts"


def _with(template: str, key: str, fallback: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda p: template.format(p[key]) if p.get(key) else fallback


_PHRASES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "kill": _kill,
    "kill_process": lambda p: (
        f"a {p.get('signal') or 'SIGKILL'} to the engine's processes matching /{p['match']}/"
        if p.get("match") else "the engine's death inside its container"),
    "stop": lambda p: "a docker stop",
    "restart": lambda p: "a docker restart",
    "pause": lambda p: "a docker pause",
    "node_restart": lambda p: (
        "a restart of every container on its Docker host" if p.get("all_containers")
        else "a restart of the inventory nodes' containers on its Docker host"),
    "host_restart": lambda p: "a restart of its whole Docker host",
    "partition": _partition,
    "loss": _loss,
    "bandwidth": _with("a bandwidth limit of {}", "rate", "a bandwidth limit"),
    "latency": _with("{} ms of added latency", "delay_ms", "added latency"),
    "memory_squeeze": _with("a memory squeeze to {}", "limit", "a memory squeeze"),
    "oversized_context": _oversized,
    "flood": _with("a request flood at {} req/s", "rate", "a request flood"),
    "rollout": _with("rolling out {}", "config", "a rollout"),
    "bad_input": lambda p: "malformed requests",
}


def fault_phrase(kind: str | None, params: Mapping[str, Any]) -> str:
    """The fault in a few words: ``a SIGKILL``, ``30 % packet loss``, ``rolling out c``."""
    if kind is None:
        return "the fault"
    phrase = _PHRASES.get(kind)
    return phrase(params) if phrase is not None else f"the {kind} fault"


def _count(n: int, cls: str) -> str:
    one, many = CLASS_WORDS.get(cls, (cls, cls))
    return f"{n} {one if n == 1 else many}"


def loss_clause(m: Measurement) -> str:
    """``31 of 118 requests were lost, all resets`` (plus the slow ones, if any)."""
    if m.requests_total == 0 and m.lost_total == 0:
        return "no request was recorded"
    classes = sorted(m.lost_by_class.items(), key=lambda kv: (-kv[1], kv[0]))
    if m.lost_total == 0:
        text = f"none of its {m.requests_total} requests was lost"
    else:
        verb = "was" if m.lost_total == 1 else "were"
        text = f"{m.lost_total} of {m.requests_total} requests {verb} lost"
        if len(classes) == 1 and classes[0][1] == m.lost_total and m.lost_total > 1:
            text += f", all {CLASS_WORDS.get(classes[0][0], ('', classes[0][0]))[1]}"
        elif classes:
            text += " (" + ", ".join(_count(n, cls) for cls, n in classes) + ")"
    if m.slow_total:
        text += f", and {m.slow_total} more succeeded too slowly for users"
    return text


def _detection_clause(m: Measurement) -> str:
    if m.detection_s is None:
        return "monitoring did not detect it"
    if m.detect_signal == "up":
        return (f"Prometheus saw its target down (up == 0) after {num(m.detection_s)} s, "
                "but no alert fired")
    return f"Prometheus alerted after {num(m.detection_s)} s"


def _impact_clause(node: str, kind: str | None, what: str, m: Measurement) -> str:
    if no_outage(kind, m) or (m.lost_total == 0 and m.recovery_s == 0):
        return f"{node} kept serving through {what}"
    if m.recovery_s is None:
        return (f"{node} had not recovered {num(m.t_window_end - m.t_effect)} s after {what}, "
                "when the observation ended")
    fared, prep = _IMPACT.get(kind or "", ("was down for", "after"))
    clause = f"{node} {fared} {num(m.recovery_s)} s {prep} {what}"
    if m.harness_intervened:
        clause += " and came back only because the harness intervened"
    return clause


def summary(data: RunData) -> str:
    """One sentence: outcome, how long the node was out, detection, and what users lost."""
    outcome = data.verdict.outcome if data.verdict is not None else "Not judged"
    lead = f"{outcome} (evidence missing)" if outcome == "INCONCLUSIVE" else outcome
    m = data.measurement
    kind = fault_kind(data)
    what = fault_phrase(kind, data.run.fault.params if data.run.fault is not None else {})
    node = data.run.node or (m.node if m is not None else "the node")
    if m is None:
        return (f"{lead}: no measurement of {what} on {node} was recorded "
                "(the run ended before the fault took effect, or its files are missing).")
    parts = [_impact_clause(node, kind, what, m)]
    if not no_outage(kind, m):
        parts.append(_detection_clause(m))
    parts.append(loss_clause(m))
    return f"{lead}: " + "; ".join(parts) + "."
