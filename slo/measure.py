"""Measurement: t_effect, detection, recovery and lost requests from ledger + timeline.

Pure functions over the run's records; the definitions are docs/definitions.md's, used
exactly:

- **t_effect** = the moment the fault took effect, from the best evidence on the timeline
  (:mod:`slo.effect`, which says which evidence fixed it).
- **Detection time** = t_detect − t_effect, where t_detect is the first moment *monitoring*
  shows the fault: an alert for the node entering ``firing`` (primary), else ``up == 0``
  first seen — the moment Prometheus recorded (the alert's ``activeAt + for``, the scrape
  timestamp). The harness's readiness probe is a figure (``probe_detection_s``), never
  detection. A signal stamped before t_effect is not a negative figure: when the observer
  first saw it after the fault's first act and it still held at t_effect, it is the scrape
  (or evaluation) under way when the fault took effect, and counts at t_effect; otherwise
  it is a finding about the signal (notes). "Not detected within the window" is a finding.
- **Recovery time** = t_recovered − t_effect (also t_recovered − t_revert), where
  t_recovered is the start of the first period of at least ``recovery_hold_s`` in which
  the readiness endpoint answers OK and every request *scheduled* succeeds, lasting to the
  end of the observation window: max(start of the final readiness-OK stretch, arrival of
  the first successful request after the last failed one), never before t_effect. Requests
  the harness cancelled while draining (``cancelled``) and client-side failures
  (``shed_client``, ``client_exhausted``, ``client_stalled``: evidence about the client,
  not the node) do not break it — the latter still count as lost inside the span — except
  a cancelled request that had waited ``recovery_hold_s`` or more without a first token:
  the node had left that user unanswered (a llama.cpp node still working through a
  flood's abandoned requests read "recovered after 0.0 s" while it answered no one).
  When the readiness endpoint never failed after t_effect — an engine stalled while its API
  answers — a request that waited ``recovery_hold_s`` or more for its first token and then
  got it was held by the node just the same: the steady state starts no earlier than the
  last such first token (its users were answered again then). Request-level faults (their
  requests *are* the load) and a fault on another node (a gateway's upstream) keep the
  rule above alone: their slow users are the fault's effect, counted as slow.
  If the harness had to bring the node back (``harness_intervened`` events), that is
  recorded: it is not the system's own recovery.
- **Lost request** = a request *scheduled* in [t_effect, t_recovered] (or in flight at
  t_effect) whose status is ``fail`` or ``unknown`` — client-shed arrivals included — by
  error class; clean rejections (4xx/429/503 with an OpenAI-style error body) are also
  counted apart. Without a recovery the span closes at the window end.
- **Affected** = lost + the *slowed* users (``slow_total``): requests of the fault window
  (t_effect until the after window starts, below) that succeeded but either waited for
  the outage — arrived before t_recovered and got their first token only at or after it
  (a hang holds them) — or saw a user-facing TTFT (from the scheduled arrival) above the
  objective (a flood, added latency).
- **After window** = from the later of recovery and the revert, once the node has served
  every request that arrived before it (:func:`after_window_start`): the backlog a hang or
  a partition releases at once is the fault's load, and the users who arrive while the
  node works through it queue behind it; their latency is the fault's, not the service the
  node gives once back.
- **Inconclusive**: evidence the verdict needs is missing — ``evidence_gap`` events the
  harness wrote (Prometheus not ready, rules missing, clock skew, not in steady state),
  Prometheus unreachable during the run, no proof the fault took effect (``no_effect``, or
  the required Docker event / mechanism confirmation absent), client exhaustion.

Time base: epoch seconds throughout. A request's *arrival* is ``t_scheduled`` (open loop)
or ``t_invoke``. Synthetic ``probe`` ledger records are excluded from request counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from faultkit.model.events import EventKind
from faultkit.model.kinds import spec_of
from faultkit.model.records import CLIENT_SIDE, Event, RequestRecord, is_clean_rejection
from slo.detection import detect
from slo.effect import (
    MeasurementInputError,
    client_failures,
    earliest_effect,
    effect_of,
    fault_events,
    fault_time,
)
from slo.gaps import evidence_gaps, late_gap, sent_late
from slo.paging import page_of
from slo.samples import arrival, samples_slis, user_ttft, window_samples
from slo.types import Measurement, WindowSLIs

#: events on the observer's readiness track
_HEALTH_KINDS = frozenset({EventKind.HEALTH_OK, EventKind.HEALTH_FAIL})
#: failures that say nothing about the node's health (they never break a recovery stretch)
_NOT_ABOUT_THE_NODE = CLIENT_SIDE | {"cancelled"}

__all__ = [
    "MeasurementInputError",  # re-exported: raised by measure() and effect_of()
    "after_window_start",
    "answered_at",
    "arrival",
    "detect",
    "effect_of",
    "evidence_gaps",
    "measure",
    "readiness_ok_since",
    "recovered_at",
    "sent_late",
    "user_ttft",
    "window_slis",
]


# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- recovery


def readiness_ok_since(timeline: Sequence[Event], node: str) -> tuple[bool, float | None]:
    """(any readiness data?, start of the final OK stretch or None if it ends failing).

    The stretch starts when its first OK probe was *answered* (send time + latency).
    """
    events = sorted((e for e in timeline if e.source == "observer" and e.node == node
                     and e.kind in _HEALTH_KINDS), key=lambda e: e.t)
    ok_since: float | None = None
    for event in events:
        if event.kind == EventKind.HEALTH_OK:
            if ok_since is None:
                ok_since = answered_at(event)
        else:
            ok_since = None
    return bool(events), ok_since


def answered_at(event: Event) -> float:
    """When an OK probe was answered: its send time plus its latency.

    A probe sent into a hang (a paused node) is answered only when the node serves again;
    its send time would date the recovery before it happened.
    """
    latency = event.data.get("latency_s")
    return event.t + float(latency) if isinstance(latency, int | float) else event.t


def _left_unanswered(r: RequestRecord, hold_s: float) -> bool:
    """A request the harness cancelled after it had waited ``hold_s`` or more for its first
    token: the node left that user unanswered (it breaks recovery like a failure)."""
    return (r.error_class == "cancelled" and r.t_first_token is None
            and r.t_end - arrival(r) >= hold_s)


def _held(r: RequestRecord, hold_s: float) -> float | None:
    """The first token of a successful request the node held ``hold_s`` or more for it
    (None for any other request)."""
    if r.status != "ok" or r.t_first_token is None:
        return None
    return r.t_first_token if r.t_first_token - arrival(r) >= hold_s else None


def held_rule_applies(timeline: Sequence[Event], node: str, t_effect: float) -> bool:
    """Whether a request held ``recovery_hold_s`` or more breaks the steady state (module
    docstring): the fault is the node's own (its inject_start is the node's, not a gateway's
    upstream's) and not request-level, and the readiness endpoint never failed since
    t_effect."""
    starts = fault_events(timeline, node, EventKind.INJECT_START)
    spec = spec_of(str(starts[0].data.get("fault"))) if starts else None
    if spec is None or spec.implementation is None or spec.request_level:
        return False
    return not any(e.source == "observer" and e.node == node and e.t >= t_effect
                   and e.kind == EventKind.HEALTH_FAIL for e in timeline)


def recovered_at(
    requests: Sequence[RequestRecord],
    timeline: Sequence[Event],
    node: str,
    t_effect: float,
    t_end: float,
    hold_s: float,
) -> tuple[float | None, list[str]]:
    """t_recovered per the definition in the module docstring, and notes (the same rule
    for the experiment watching live and for the measurement after it)."""
    notes: list[str] = []
    have_probes, ok_since = readiness_ok_since(timeline, node)
    if have_probes and ok_since is None:
        return None, ["readiness endpoint still failing at the end of the window"]
    candidate = t_effect
    if ok_since is not None:
        candidate = max(candidate, ok_since)
    elif not have_probes:
        notes.append("no readiness probes in the timeline: recovery judged on requests only")
    after = sorted((r for r in requests if arrival(r) >= t_effect
                    and (r.error_class not in _NOT_ABOUT_THE_NODE
                         or _left_unanswered(r, hold_s))), key=arrival)
    last_bad = max((i for i, r in enumerate(after) if r.status != "ok"), default=None)
    if last_bad is not None:
        later = after[last_bad + 1 :]
        if not later:
            return None, [*notes, "the last request scheduled in the window failed"]
        candidate = max(candidate, arrival(later[0]))
    if held_rule_applies(timeline, node, t_effect):
        held = [t for r in after if (t := _held(r, hold_s)) is not None]
        if held and max(held) > candidate:
            candidate = max(held)
            notes.append(f"readiness answered OK throughout, but the node held {len(held)} "
                         f"request(s) {hold_s:g} s or more before their first token: "
                         "recovered when it answered them")
    if t_end - candidate < hold_s:
        return None, [*notes, f"no healthy stretch of {hold_s:g} s lasting to the window end"]
    return candidate, notes


# --------------------------------------------------------------------------- SLIs


def after_window_start(requests: Sequence[RequestRecord], t_recovered: float,
                       t_revert: float | None) -> float:
    """When the after window starts: once the fault is over (the later of recovery and the
    revert), or later, at the end of the last request arrived before then that the node
    served.

    A hang or a partition holds its users and releases them at once: the node's first
    seconds back go to that backlog, and users who arrive meanwhile queue behind it, so
    their latency is the fault's. Only requests the node answered count: one it never
    answered (cut, timed out, cancelled at the run's end) ended without taking its time.
    """
    fault_over = max(t_recovered, t_revert if t_revert is not None else t_recovered)
    served = (r.t_end for r in requests if r.status == "ok" and arrival(r) < fault_over)
    return max([fault_over, *served])


def window_slis(requests: Sequence[RequestRecord], start: float, end: float) -> WindowSLIs:
    """Client-side SLIs of the requests that *arrived* in [start, end).

    TTFT, TPOT and E2E exactly as :mod:`faultkit.load.stats` defines them (from the send
    time); ``user_ttft_*`` count from the arrival (scheduled time), so a client that could
    not send on time shows in them. Latencies are over successful requests;
    ``output_tokens_per_s`` = their output tokens / window length.
    """
    return samples_slis(window_samples(requests, start, end), start, end)


# --------------------------------------------------------------------------- inconclusive


def _slowed(r: RequestRecord, t_recovered: float | None, objective_s: float | None) -> bool:
    """A successful request the fault slowed: held by the outage, or over the objective."""
    if r.t_first_token is None:
        return False
    held = t_recovered is not None and arrival(r) < t_recovered <= r.t_first_token
    over = objective_s is not None and r.t_first_token - arrival(r) > objective_s
    return held or over


def measure(
    ledger: Sequence[RequestRecord],
    timeline: Sequence[Event],
    node: str,
    *,
    recovery_hold_s: float = 5.0,
    t_window_end: float | None = None,
    server_cross_check: dict[str, Any] | None = None,
    ttft_objective_s: float | None = None,
    effect_node: str | None = None,
) -> Measurement:
    """t_effect, detection, recovery, loss and SLIs of the first fault injected on ``node``.

    ``effect_node``: the fault was injected on that node instead (an upstream behind the
    gateway ``node``): t_effect, the revert and harness interventions come from its fault
    events and Docker events; detection, recovery, loss and SLIs stay ``node``'s.
    ``t_window_end`` defaults to the latest time in the ledger or timeline.
    ``server_cross_check`` (from :func:`slo.capture.cross_check`) is stored as given.
    ``ttft_objective_s``: user-facing TTFT above it counts a successful request as slow.
    """
    requests = [r for r in ledger if r.node == node and r.kind != "probe"]
    faulted = effect_node or node
    effect = earliest_effect(effect_of(timeline, faulted), timeline, faulted,
                             client_failures(requests))
    t_effect = effect.t
    t_revert = fault_time(timeline, faulted, EventKind.REVERT_END)
    times = [r.t_end for r in requests] + [e.t for e in timeline]
    end = t_window_end if t_window_end is not None else max(times, default=t_effect)
    requests = [r for r in requests if arrival(r) <= end]
    timeline = [e for e in timeline if e.t <= end]
    notes: list[str] = []
    if faulted != node:
        notes.append(f"the fault was injected on {faulted}, which {node} depends on: "
                     f"t_effect is {faulted}'s, everything else is measured on {node}")

    t_acting = fault_time(timeline, faulted, EventKind.ACT)
    if t_acting is None:
        t_acting = fault_time(timeline, faulted, EventKind.INJECT_START)
    t_detect, signal, detail, by_signal, detect_notes = detect(timeline, node, t_effect,
                                                               t_acting)
    notes.extend(detect_notes)
    if t_detect is None:
        probe_note = " (the harness's readiness probe saw it)" if "probe" in by_signal else ""
        notes.append(f"not detected by monitoring within the window (no alert firing, no "
                     f"up == 0){probe_note}")

    paging = page_of(timeline, node, t_effect, t_detect, end, t_acting)

    t_recovered, rec_notes = recovered_at(requests, timeline, node, t_effect, end,
                                          recovery_hold_s)
    notes.extend(rec_notes)
    if t_recovered is None:
        span = end - t_effect
        notes.append(f"not recovered by the end of the window ({span:.1f} s after t_effect)")
    intervened = [f"{e.data.get('action')}: {e.data.get('why')}"
                  for e in fault_events(timeline, faulted, EventKind.HARNESS_INTERVENED)]

    loss_end = t_recovered if t_recovered is not None else end
    # a request the effect itself ended (a stream cut at t_effect) was in flight at it
    in_flight = [r for r in requests if r.t_invoke < t_effect <= r.t_end]

    def in_span(r: RequestRecord) -> bool:
        return t_effect <= arrival(r) <= loss_end or r.t_invoke < t_effect <= r.t_end

    lost = [r for r in requests if r.status != "ok" and in_span(r)]
    fault_end = after_window_start(requests, loss_end, t_revert)
    slow = [r for r in requests if r.status == "ok" and r not in lost
            and t_effect <= arrival(r) <= fault_end
            and _slowed(r, t_recovered, ttft_objective_s)]
    by_class = Counter(r.error_class or r.status for r in lost)
    impact = min((r.t_end for r in lost), default=None)

    # a client that sent late across the outage's edges could not see them; a node that
    # served through the fault (recovered at its effect, nothing lost) had no outage and no
    # edge to cross; inside the outage, up to its first edge, the node stayed as the fault
    # held it
    served_through = t_recovered is not None and t_recovered <= t_effect and not lost
    late = [] if served_through else sent_late(requests, (t_effect, t_revert, t_recovered))
    edges_after = [t for t in (t_revert, t_recovered) if t is not None and t > t_effect]
    outage = None if served_through else (t_effect, min(edges_after, default=end))

    # SLI windows: the fault window lasts while the fault is applied *or* its effects last
    # (to revert, or to recovery if that is later, and until the node has served the
    # backlog it held); "after" is everything once all three ended.
    start = min((arrival(r) for r in requests), default=t_effect)
    slis = {
        "baseline": window_slis(requests, min(start, t_effect), t_effect),
        "fault": window_slis(requests, t_effect, fault_end),
    }
    if t_recovered is not None:
        slis["after"] = window_slis(requests, fault_end, end + 1e-9)

    return Measurement(
        node=node,
        t_effect=t_effect,
        t_revert=t_revert,
        t_window_end=end,
        effect_evidence=effect.evidence,
        effect_detail=effect.detail,
        t_impact=impact,
        t_detect=t_detect,
        detect_signal=signal,
        detect_detail=detail,
        detection_s=None if t_detect is None else t_detect - t_effect,
        detection_by_signal_s={k: v - t_effect for k, v in by_signal.items()},
        probe_detection_s=(by_signal["probe"] - t_effect) if "probe" in by_signal else None,
        t_recovered=t_recovered,
        recovery_s=None if t_recovered is None else t_recovered - t_effect,
        recovery_after_revert_s=(
            None if t_recovered is None or t_revert is None else t_recovered - t_revert
        ),
        lost_total=len(lost),
        lost_by_class=dict(sorted(by_class.items())),
        clean_rejections=sum(1 for r in lost if is_clean_rejection(r)),
        slow_total=len(slow),
        affected_total=len(lost) + len(slow),
        in_flight_at_effect=len(in_flight),
        requests_total=len(requests),
        sent_late=len(late),
        slis=slis,
        server_cross_check=server_cross_check,
        harness_intervened=intervened,
        paging=paging,
        inconclusive=[*evidence_gaps(timeline, requests, node, effect, outage),
                      *late_gap(late)],
        notes=notes,
    )
