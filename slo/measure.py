"""Measurement: detection, recovery and lost requests from ledger + timeline (pure functions).

Definitions (DESIGN.md, used exactly):

- **Detection time** = t_detect − t_inject, where t_detect is the first moment monitoring
  shows the fault: an alert for the node enters ``firing`` (primary), else ``up == 0``
  first seen, else the first failed synthetic probe. Which signal detected it is recorded;
  "not detected within the window" is a finding (``None`` + a note), not an error.
  The moment used is the one the monitoring system itself recorded: the alert's firing
  time (``activeAt + for``, from the observer's ``t_state``), the scrape timestamp of the
  first ``up == 0`` sample, the send time of the first failed probe.
- **Recovery time** = t_recovered − t_inject (also t_recovered − t_revert), where
  t_recovered is the start of the first period of at least ``recovery_hold_s`` in which
  the readiness endpoint answers OK and every request invoked succeeds, lasting to the
  end of the observation window. "Not recovered by the deadline" is a finding.
  Here: t_recovered = max(start of the final readiness-OK stretch, invoke time of the
  first successful request after the last failed one), and never before t_inject.
  Requests the harness itself cancelled while draining (``error_class == "cancelled"``)
  do not break the period.
- **Lost request** = a request invoked in [t_inject, t_recovered] (or in flight at
  t_inject) whose status is ``fail`` or ``unknown``; by error class, clean rejections
  (``http_4xx``/``http_429``/``http_5xx``) also counted apart. The fault acts somewhere
  inside the ``inject()`` call, so the loss window opens at ``inject_start`` (durations
  are measured from ``inject_end``): a request the fault broke before ``inject()``
  returned is not missed. Without a recovery the window closes at the window end.

Time base: epoch seconds throughout. Fault events used: source ``fault``, kinds
``inject_start``, ``inject_end`` (t_inject), ``revert_start``, ``revert_end`` (t_revert).
Synthetic ``probe`` ledger records are excluded from request counts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from faultkit.load.stats import e2e_s, percentile, tpot_s, ttft_s
from faultkit.records import CLEAN_REJECTIONS, Event, RequestRecord
from slo.types import DetectSignal, Measurement, WindowSLIs

#: events on the observer's readiness track
_HEALTH_KINDS = frozenset({"health_ok", "health_fail"})


class MeasurementInputError(ValueError):
    """The timeline lacks what measurement needs (e.g. no ``inject_end`` event)."""


# --------------------------------------------------------------------------- helpers


def _fault_time(timeline: Sequence[Event], node: str, kind: str) -> float | None:
    times = [e.t for e in timeline if e.source == "fault" and e.kind == kind
             and e.node in (None, node)]
    return min(times) if times else None


def _state_time(event: Event) -> float:
    """When the monitoring system itself recorded the change this event reports."""
    for key in ("t_state", "t_sample"):
        value = event.data.get(key)
        if isinstance(value, int | float):
            return float(value)
    return event.t


# --------------------------------------------------------------------------- detection


def detect(
    timeline: Sequence[Event], node: str, t_from: float
) -> tuple[float | None, DetectSignal | None, str | None, dict[str, float]]:
    """First moment each signal showed the fault at or after ``t_from``; pick by priority.

    Returns (t_detect, signal, detail, first time per signal). A signal counts only as a
    *transition* seen after ``t_from`` (an alert already firing before the fault began
    would show up as no new ``alert_firing`` event).
    """
    firsts: dict[str, tuple[float, str]] = {}
    for event in timeline:
        if event.source != "observer" or event.node != node:
            continue
        t = _state_time(event)
        if t < t_from:
            continue
        if event.kind == "alert_firing":
            signal, detail = "alert", f"alert {event.data.get('alertname')} firing"
        elif event.kind == "up_0":
            signal, detail = "up", "up == 0 (scrape failed)"
        elif event.kind == "health_fail":
            signal, detail = "probe", f"readiness probe failed: {event.data.get('detail')}"
        else:
            continue
        if signal not in firsts or t < firsts[signal][0]:
            firsts[signal] = (t, detail)
    by_signal = {k: v[0] for k, v in firsts.items()}
    for signal in ("alert", "up", "probe"):
        if signal in firsts:
            t, detail = firsts[signal]
            return t, signal, detail, by_signal  # type: ignore[return-value]
    return None, None, None, by_signal


# --------------------------------------------------------------------------- recovery


def readiness_ok_since(timeline: Sequence[Event], node: str) -> tuple[bool, float | None]:
    """(any readiness data?, start of the final OK stretch or None if it ends failing)."""
    events = sorted((e for e in timeline if e.source == "observer" and e.node == node
                     and e.kind in _HEALTH_KINDS), key=lambda e: e.t)
    ok_since: float | None = None
    for event in events:
        if event.kind == "health_ok":
            if ok_since is None:
                ok_since = event.t
        else:
            ok_since = None
    return bool(events), ok_since


def recovered_at(
    requests: Sequence[RequestRecord],
    timeline: Sequence[Event],
    node: str,
    t_inject: float,
    t_end: float,
    hold_s: float,
) -> tuple[float | None, list[str]]:
    """t_recovered per the definition in the module docstring, and notes."""
    notes: list[str] = []
    have_probes, ok_since = readiness_ok_since(timeline, node)
    if have_probes and ok_since is None:
        return None, ["readiness endpoint still failing at the end of the window"]
    candidate = t_inject
    if ok_since is not None:
        candidate = max(candidate, ok_since)
    elif not have_probes:
        notes.append("no readiness probes in the timeline: recovery judged on requests only")
    after = sorted((r for r in requests if r.t_invoke >= t_inject
                    and r.error_class != "cancelled"), key=lambda r: r.t_invoke)
    last_bad = max((i for i, r in enumerate(after) if r.status != "ok"), default=None)
    if last_bad is not None:
        later = after[last_bad + 1 :]
        if not later:
            return None, [*notes, "the last request invoked in the window failed"]
        candidate = max(candidate, later[0].t_invoke)
    if t_end - candidate < hold_s:
        return None, [*notes, f"no healthy stretch of {hold_s:g} s lasting to the window end"]
    return candidate, notes


# --------------------------------------------------------------------------- SLIs


def window_slis(requests: Sequence[RequestRecord], start: float, end: float) -> WindowSLIs:
    """Client-side SLIs of the requests *invoked* in [start, end).

    TTFT, TPOT and E2E exactly as :mod:`faultkit.load.stats` defines them. Latencies are
    over successful requests; ``output_tokens_per_s`` = their output tokens / window length.
    """
    chosen = [r for r in requests if start <= r.t_invoke < end]
    good = [r for r in chosen if r.status == "ok"]
    ttft = [t for r in good if (t := ttft_s(r)) is not None]
    tpot = [t for r in good if (t := tpot_s(r)) is not None]
    e2e = [e2e_s(r) for r in good]
    tokens = sum(r.output_tokens or 0 for r in good)
    span = end - start
    return WindowSLIs(
        start=start,
        end=end,
        requests=len(chosen),
        ok=len(good),
        failed=len(chosen) - len(good),
        error_ratio=(len(chosen) - len(good)) / len(chosen) if chosen else None,
        ttft_p50_s=percentile(ttft, 50),
        ttft_p95_s=percentile(ttft, 95),
        ttft_p99_s=percentile(ttft, 99),
        tpot_p50_s=percentile(tpot, 50),
        tpot_p95_s=percentile(tpot, 95),
        e2e_p50_s=percentile(e2e, 50),
        e2e_p95_s=percentile(e2e, 95),
        e2e_p99_s=percentile(e2e, 99),
        output_tokens_per_s=tokens / span if span > 0 and good else None,
    )


# --------------------------------------------------------------------------- measure


def measure(
    ledger: Sequence[RequestRecord],
    timeline: Sequence[Event],
    node: str,
    *,
    recovery_hold_s: float = 5.0,
    t_window_end: float | None = None,
    server_cross_check: dict[str, Any] | None = None,
) -> Measurement:
    """Detection, recovery, loss and SLIs of the first fault injected on ``node``.

    ``t_window_end`` defaults to the latest time in the ledger or timeline.
    ``server_cross_check`` (from :func:`slo.capture.cross_check`) is stored as given.
    """
    requests = [r for r in ledger if r.node == node and r.kind != "probe"]
    t_inject = _fault_time(timeline, node, "inject_end")
    if t_inject is None:
        raise MeasurementInputError(
            f"no 'inject_end' fault event for node {node!r} in the timeline: "
            "was the fault run inside the observation window?"
        )
    t_loss_from = _fault_time(timeline, node, "inject_start") or t_inject
    t_revert = _fault_time(timeline, node, "revert_end")
    times = [r.t_end for r in requests] + [e.t for e in timeline]
    end = t_window_end if t_window_end is not None else max(times, default=t_inject)
    requests = [r for r in requests if r.t_invoke <= end]
    timeline = [e for e in timeline if e.t <= end]
    notes: list[str] = []

    t_detect, signal, detail, by_signal = detect(timeline, node, t_loss_from)
    if t_detect is None:
        notes.append("not detected within the window (no alert, up == 0 or failed probe)")
    elif t_detect < t_inject:
        notes.append(f"the fault was visible {t_inject - t_detect:.3f} s before inject() returned")

    t_recovered, rec_notes = recovered_at(requests, timeline, node, t_inject, end,
                                          recovery_hold_s)
    notes.extend(rec_notes)
    if t_recovered is None:
        span = end - t_inject
        notes.append(f"not recovered by the end of the window ({span:.1f} s after inject)")

    loss_end = t_recovered if t_recovered is not None else end
    in_flight = [r for r in requests if r.t_invoke < t_loss_from < r.t_end]
    lost = [
        r for r in requests
        if r.status != "ok"
        and (t_loss_from <= r.t_invoke <= loss_end or r.t_invoke < t_loss_from < r.t_end)
    ]
    by_class = Counter(r.error_class or r.status for r in lost)
    impact = min((r.t_end for r in lost), default=None)

    # SLI windows: the fault window lasts while the fault is applied *or* its effects last
    # (to revert, or to recovery if that is later); "after" is everything once both ended.
    start = min((r.t_invoke for r in requests), default=t_loss_from)
    fault_end = max(loss_end, t_revert if t_revert is not None else t_inject)
    slis = {
        "baseline": window_slis(requests, min(start, t_loss_from), t_loss_from),
        "fault": window_slis(requests, t_loss_from, fault_end),
    }
    if t_recovered is not None:
        slis["after"] = window_slis(requests, fault_end, end + 1e-9)

    return Measurement(
        node=node,
        t_inject=t_inject,
        t_revert=t_revert,
        t_window_end=end,
        t_impact=impact,
        t_detect=t_detect,
        detect_signal=signal,
        detect_detail=detail,
        detection_s=None if t_detect is None else t_detect - t_inject,
        detection_by_signal_s={k: v - t_inject for k, v in by_signal.items()},
        t_recovered=t_recovered,
        recovery_s=None if t_recovered is None else t_recovered - t_inject,
        recovery_after_revert_s=(
            None if t_recovered is None or t_revert is None else t_recovered - t_revert
        ),
        lost_total=len(lost),
        lost_by_class=dict(sorted(by_class.items())),
        clean_rejections=sum(1 for r in lost if r.error_class in CLEAN_REJECTIONS),
        in_flight_at_inject=len(in_flight),
        requests_total=len(requests),
        slis=slis,
        server_cross_check=server_cross_check,
        notes=notes,
    )
