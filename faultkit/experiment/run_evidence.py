"""What every run keeps at its end, whatever it judges (:func:`record_evidence`): read by
the fault's run (:func:`faultkit.experiment.lifecycle.finish`) and the steady-state run
(:mod:`faultkit.experiment.steady`) alike, so both leave the same evidence."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from faultkit.errors import FaultkitError
from faultkit.experiment.node_evidence import container_timeline
from faultkit.experiment.pages import collect_pages
from faultkit.experiment.state import ExperimentState
from faultkit.model.events import EventKind
from faultkit.model.records import RequestRecord
from faultkit.model.timestamps import clock_step_gap
from faultkit.rundir import ContainerEvidence
from slo.capture import PrometheusCapture, capture, cross_check
from slo.prom import Prometheus

__all__ = ["record_evidence"]

log = logging.getLogger("faultkit.experiment")


def record_evidence(
    state: ExperimentState, prom: Prometheus, t_end: float, ledger: Sequence[RequestRecord],
) -> dict[str, Any] | None:
    """What every run keeps at its end, whatever it judges: a wall-clock step since the
    run started as an evidence gap, Docker's events and the pages onto the timeline,
    Prometheus' series (``prometheus.json``), ``loop-stalls.json`` and ``container.json``.
    Returns the server's counts cross-checked against ``ledger`` (``None`` when Prometheus
    could not be read: its error is in ``prometheus.json``)."""
    stepped = clock_step_gap(state.clock_offset)
    if stepped is not None:
        state.note(EventKind.EVIDENCE_GAP, reason=stepped)
    for event in container_timeline((state.node, state.fault_node), state.t_start, t_end):
        state.emit(event)
    collect_pages(state, state.t_start, t_end)
    check: dict[str, Any] | None
    try:
        state.run.write_model(
            state.run.prometheus_json,
            capture(prom, state.node, state.t_start, t_end, timeline=state.events),
        )
        check = cross_check(prom, state.node, ledger, state.t_start, t_end)
    except FaultkitError as exc:
        log.warning("could not capture Prometheus series: %s", exc)
        state.run.write_model(state.run.prometheus_json, PrometheusCapture(error=str(exc)))
        check = None
    _write_loop_stalls(state)
    evidence = state.evidence
    state.run.write_container_evidence(ContainerEvidence.of(
        before=state.container_before, after=evidence.container_state(),
        log_tail=evidence.log_tail(), startup_log=evidence.startup_log(),
    ))
    return check


def _write_loop_stalls(state: ExperimentState) -> None:
    """``loop-stalls.json``: each stall of the run's event loop and what the process did
    meanwhile (:mod:`faultkit.runtime.loopwatch`); the longest is logged."""
    watch = state.loop_watch
    if watch is None:  # the run ended before its load started
        return
    state.run.write_json(state.run.loop_stalls_json, [s.to_json() for s in watch.stalls])
    if watch.stalls:
        longest = max(watch.stalls, key=lambda s: s.duration_s)
        log.warning("the harness's event loop stalled %d time(s) during the run; the "
                    "longest: %s", len(watch.stalls), longest.summary())
