"""A steady-state run: the node under its load with nothing broken, run as every
experiment is run.

The gate judges a config by a window of its everyday load with no fault
(:mod:`faultkit.gate.steady`; docs/gate.md, "Steady state"). That window is evidence like
any run's, so it is kept the same way, by the same steps (:mod:`.lifecycle`): ``run.json``
first (a run directory that cannot hold the evidence ends the run before any load), the
container's state, the load with its ledger in the run directory, then
:func:`~.run_evidence.record_evidence` — Docker's events, Prometheus' series,
``container.json``, ``loop-stalls.json``. What differs from a fault's run is only what is
judged: with no fault there is no effect, no recovery and no measurement; the caller
judges the window's client-side figures.

Contract of ``run_steady(state, seconds)``: ``state.load_profile`` is sent at the node with
at least :data:`STEADY_WARMUP_REQUESTS` warm-up requests kept out of the ledger, then for
``seconds``; every request runs to its end (bounded by the profile's timeouts). Returns a
:class:`SteadyWindow`: the ledger's records, the window (the ``seconds`` after the
warm-up) and ``gaps`` — what the load client could not vouch for
(:func:`slo.gaps.client_gaps`), a violated ledger invariant, a wall-clock step, a run
directory that cannot be written. Each gap makes the window INCONCLUSIVE; none raises.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from faultkit.errors import LedgerInvariantError
from faultkit.experiment.lifecycle import RunPlan, run_dir_unwritable, start_loads
from faultkit.experiment.run_evidence import record_evidence
from faultkit.experiment.state import ExperimentState
from faultkit.model.events import EventKind
from faultkit.model.records import RequestRecord
from faultkit.rundir import FaultInfo
from faultkit.runtime.gcquiet import collector_frozen
from faultkit.runtime.loopwatch import LoopWatch
from slo.gaps import client_gaps
from slo.prom import Prometheus

__all__ = ["STEADY_SCENARIO", "STEADY_WARMUP_REQUESTS", "SteadyWindow", "run_steady"]

#: ``run.json``'s scenario of a steady-state run
STEADY_SCENARIO = "steady_state"
#: Warm-up requests sent before the window and kept out of it, so a candidate (just
#: started: cold caches, lazy compilation) and the current config (warm) are compared warm.
STEADY_WARMUP_REQUESTS = 4


@dataclass(frozen=True)
class SteadyWindow:
    """What one steady-state run saw: every request its load ended (``records``), the
    window ``[start, end)`` its figures are taken over, the open-loop sends later than the
    generator's lateness bound, and why the window cannot vouch for the node (``gaps``)."""

    records: tuple[RequestRecord, ...]
    start: float
    end: float
    late_sends: int = 0
    gaps: tuple[str, ...] = ()


async def run_steady(state: ExperimentState, seconds: float) -> SteadyWindow:
    """Run ``state.load_profile`` at ``state.node`` for ``seconds``, no fault; see the
    module docstring."""
    state.load_profile = state.load_profile.replace(
        duration_s=seconds, requests=None,
        warmup=max(state.load_profile.warmup, STEADY_WARMUP_REQUESTS))
    describe = f"no fault: {seconds:g} s of the node's load"
    unwritable = run_dir_unwritable(
        state, FaultInfo(kind=None, params={"seconds": seconds}, describe=describe))
    if unwritable is not None:
        now = time.time()
        return SteadyWindow((), now, now + seconds, gaps=(unwritable,))
    state.live.phase("preflight")
    state.container_before = state.evidence.container_state()
    state.note(EventKind.SCENARIO_START, scenario=state.scenario, fault=None)
    gaps: list[str] = []
    late_sends = 0
    t_window = time.time()
    try:
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(collector_frozen())
            state.loop_watch = await stack.enter_async_context(LoopWatch())
            await start_loads(state, RunPlan(kind=STEADY_SCENARIO, describe=describe), stack)
            state.live.phase("baseline")
            assert state.load is not None  # start_loads started it: the plan has load
            result = await state.load.finished()
            t_window, late_sends = result.t_start, result.late_sends
    except LedgerInvariantError as exc:
        gaps.append(f"the load client's ledger invariant was violated: {exc}")
    state.note(EventKind.SCENARIO_END)
    state.live.phase("measure")
    ledger = state.run.ledger()
    record_evidence(state, Prometheus(state.inventory.prometheus.url), time.time(), ledger)
    gaps += [str(e.data.get("reason")) for e in state.events
             if e.kind == EventKind.EVIDENCE_GAP]
    gaps += client_gaps(ledger)
    state.write_run_info(t_end=time.time())
    state.close_timeline()
    return SteadyWindow(tuple(ledger), t_window, t_window + seconds, late_sends,
                        tuple(dict.fromkeys(gaps)))
