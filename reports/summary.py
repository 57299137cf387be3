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

from faultkit.model.kinds import fault_phrase, spec_of
from reports.diagnosis import rollout_result
from reports.evidence import fault_kind, fault_node
from reports.load import RunData
from reports.numbers import is_number, num
from reports.outage import no_outage
from reports.phases import Phase, recovery_phases, slowest
from reports.server_estimate import estimate_words, server_estimate
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

def _count(n: int, cls: str) -> str:
    one, many = CLASS_WORDS.get(cls, (cls, cls))
    return f"{n} {one if n == 1 else many}"


def loss_clause(m: Measurement) -> str:
    """``31 of 118 requests were lost, all resets`` (plus the slow ones, if any); for a run
    no client recorded, the server-side estimate
    (:func:`reports.server_estimate.estimate_words`)."""
    if (estimate := server_estimate(m)) is not None:
        return estimate_words(estimate)
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
    alerted = f"Prometheus alerted after {num(m.detection_s)} s"
    paging = m.paging
    if paging is None or not paging.pager:
        return alerted
    if paging.page_s is not None:
        return f"{alerted} and someone was paged after {num(paging.page_s)} s"
    if paging.suppressed_by:
        return f"{alerted}, but no one was paged: Alertmanager suppressed it"
    return f"{alerted}, but no page arrived"


#: a recovery this short is "at once": the steady state held from the effect on
RECOVERED_AT_ONCE_S = 0.05


def _impact_clause(node: str, kind: str | None, what: str, m: Measurement,
                   longest: Phase | None = None) -> str:
    if no_outage(kind, m) or (m.lost_total == 0 and m.recovery_s == 0):
        return f"{node} kept serving through {what}"
    if m.recovery_s is None:
        return (f"{node} had not recovered {num(m.t_window_end - m.t_effect)} s after {what}, "
                "when the observation ended")
    if m.recovery_s < RECOVERED_AT_ONCE_S and not m.harness_intervened:
        # every request that arrived after the effect succeeded: only those in flight at
        # it were lost, and "down for 0.0 s" would hide them
        return (f"{node} answered every request that arrived after {what}, but requests in "
                "flight at that moment were cut")
    spec = spec_of(kind)
    fared, prep = (spec.impact, spec.preposition) if spec else ("was down for", "after")
    clause = f"{node} {fared} {num(m.recovery_s)} s"
    if longest is not None:
        clause += f" (its longest phase: {longest.name}, {num(longest.duration_s)} s)"
    clause += f" {prep} {what}"
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
    if kind is None and data.run.fault is not None and data.run.fault.describe:
        what = data.run.fault.describe  # nothing injected: a postmortem's own words
    node = data.run.node or (m.node if m is not None else "the node")
    if m is None:
        return (f"{lead}: no measurement of {what} on {node} was recorded "
                "(the run ended before the fault took effect, or its files are missing).")
    elsewhere = fault_node(data)
    if elsewhere is not None and elsewhere != node:
        what = f"{what} on {elsewhere} behind it"
    parts = [_impact_clause(node, kind, what, m, slowest(recovery_phases(data)))]
    if (candidate := _candidate_clause(data)) is not None:
        parts.insert(0, candidate)
    if (upstream := _upstream_clause(data.route_around)) is not None:
        parts.append(upstream)
    served = no_outage(kind, m) or (m.lost_total == 0 and m.recovery_s == 0)
    if not served or m.t_detect is not None:
        parts.append(_detection_clause(m))
    parts.append(loss_clause(m))
    if note := _loss_judged(data, m):
        parts.append(note)
    return f"{lead}: " + "; ".join(parts) + "."


def _upstream_clause(route: dict[str, object]) -> str | None:
    """Behind a gateway (route_around.json): the upstream's own outage, how fast the gateway
    routed around it, and when it sent it users again."""
    upstream = route.get("upstream")
    outage, routed = route.get("outage_s"), route.get("route_around_s")
    if not isinstance(upstream, str) or not is_number(outage):
        return None
    text = f"{upstream} itself was out for {num(outage)} s"
    if is_number(routed):
        text += f", and the gateway routed around it after {num(routed)} s"
        retries = route.get("retries")
        if isinstance(retries, int) and retries:
            text += f" ({retries} request{'s' if retries > 1 else ''} retried on another upstream)"
    elif route.get("routed_while_down") is False:
        text += ", and the gateway kept sending it users while it was down"
    back = route.get("back_in_rotation_s")
    if is_number(back):
        text += f"; it served users again {num(back)} s after the fault took effect"
    return text


def _candidate_clause(data: RunData) -> str | None:
    """A candidate rolled out before the fault (test_gateway_rollout): what became of it."""
    if fault_kind(data) == "rollout":
        return None
    result = rollout_result(data)
    if result is None:
        return None
    config = result.get("config") or "the candidate"
    if result.get("rolled_back"):
        return (f"the candidate config {config} was detected ({result.get('failed_reason')}) "
                "and rolled back")
    return f"the candidate config {config} became ready and served"


def _loss_judged(data: RunData, m: Measurement) -> str:
    """Say so when the lost requests shown were not judged (no check on them)."""
    if m.lost_total == 0 or data.verdict is None:
        return ""
    if any(c.name == "lost_requests" or "lost" in c.name or "drops" in c.name
           for c in data.verdict.checks):
        return ""
    return "the lost requests were not judged: the node sets no lost_max"


def judged_line(data: RunData) -> str:
    """Each check of the verdict, observed vs expected, in one line."""
    if data.verdict is None or not data.verdict.checks:
        return ""
    marks = []
    for c in data.verdict.checks:
        mark = "✓" if c.passed else ("?" if c.inconclusive else "✗")
        marks.append(f"{mark} {c.name}: {c.observed} (expected {c.expected})")
    return "; ".join(marks)
