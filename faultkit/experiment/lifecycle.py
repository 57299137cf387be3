"""The steps of one run, from preflight to measurement, as functions over its state.

:func:`run_steps` is what ``Experiment.run_fault`` and ``Experiment.run_action`` call.
Contract of ``run_steps(state, fault, plan, during=…, after_revert=…)``:

1. ``run.json`` is written; a run directory that cannot be written, or whose filesystem
   has less than :data:`RUN_DIR_MIN_FREE_BYTES` free, ends the run INCONCLUSIVE before
   anything acts (``state.abort``, the reason also in memory when no file can hold it).
   Under a dry run the plan is noted and
   :class:`~faultkit.experiment.outcomes.DryRunPlan` raised (nothing acts).
2. Preflight: the container's state is taken, evidence gaps are noted.
3. The observer starts, then the background load of the node (and of the plan's
   ``neighbours``, same ledger; ``ledger.arrows`` beside it, best effort).
4. Baseline for ``plan.baseline_s``: not in steady state, or the container not running,
   ends the run INCONCLUSIVE before injecting
   (:class:`~faultkit.experiment.outcomes.NotJudgeable`, from ``state.abort``).
5. Inject: ``fault`` is entered for ``plan.hold_s`` or while ``during`` runs, then
   reverted; its ``result`` is kept. ``after_revert``, when given, then runs under the same
   load (what the scenario still wants to see after the revert, e.g. a gateway sending its
   upstream traffic again); a mapping either step returns is added to the fault's
   result. A fault that could not be applied
   (:class:`~faultkit.errors.FaultNotApplied`: an act still failed after its retries, and
   what was done is reverted) does not end the run: its reason is noted as an
   ``evidence_gap`` and the run goes on to be measured like any other. A node another
   fault holds (:class:`~faultkit.errors.NodeBusy`: its lock taken by another run) ends
   the run INCONCLUSIVE, nothing injected.
6. Recovery is awaited (the node recovered and held for ``recovery_hold_s`` and the after
   window holds :data:`AFTER_MIN_REQUESTS`, or the deadline), the loads drain.
7. Measure (:func:`finish`): Docker's events and Prometheus' series are captured, the
   measurement, ``container.json`` and ``t_end`` written; the measurement is returned.
   After a fault that could not be applied the verdict is already INCONCLUSIVE
   (``verdict.json``, no check judged; a later ``check`` judges it again, still
   INCONCLUSIVE).

The live status (``state.live``) is moved through the phases preflight, baseline,
inject, recovering, drain, measure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faultkit.errors import FaultNotApplied, NodeBusy
from faultkit.experiment.outcomes import DryRunPlan
from faultkit.experiment.pages import watch_alertmanager
from faultkit.experiment.run_evidence import record_evidence
from faultkit.experiment.state import ExperimentState
from faultkit.inventory import Node
from faultkit.load import BackgroundLoad
from faultkit.load.ledgerfile import ArrowLedgerWriter
from faultkit.load.profile import within_node_rate
from faultkit.model.events import EventKind
from faultkit.model.records import RequestRecord
from faultkit.model.timestamps import wall_minus_monotonic
from faultkit.rundir import FaultInfo
from faultkit.runtime.gcquiet import collector_frozen
from faultkit.runtime.loopwatch import LoopWatch
from slo.effect import fault_time
from slo.evidence import preflight_gaps, steady_state_violations
from slo.measure import (
    MeasurementInputError,
    after_window_start,
    effect_of,
    held_rule_applies,
    measure,
    recovered_at,
)
from slo.observer import Observer
from slo.prom import Prometheus
from slo.samples import arrival
from slo.traffic import window_traffic
from slo.types import Measurement, Verdict

__all__ = ["AFTER_MAX_EXTRA_S", "AFTER_MIN_REQUESTS", "RunPlan", "Step", "finish",
           "run_dir_unwritable", "run_steps", "start_loads"]

log = logging.getLogger("faultkit.experiment")

#: requests the after window holds before a run ends: its TTFT p95 is then about the 57th
#: of 60, so the first two or three requests a node serves once back (a proxy's cold
#: start) are not the whole of its tail, as they are over the 21-30 requests a 5 req/s
#: load sends in the recovery hold (docs/definitions.md, "The after window")
AFTER_MIN_REQUESTS = 60

#: the most the run waits past the recovery hold for :data:`AFTER_MIN_REQUESTS` (a
#: load of 3 req/s or less then ends with fewer; the window's count is in its figures)
AFTER_MAX_EXTRA_S = 15.0

#: a step a scenario hands the run (``during``, ``after_revert``); what it returns, if a
#: mapping, is added to the fault's result
Step = Callable[[], Awaitable[Any]]

#: free space the run directory's filesystem must have before a fault is injected: about
#: ten times what a 150 s scenario at 10 req/s writes (a 20 s pause run: 264 KB, most of it
#: the ledger at ≈ 6.5 KB/s)
RUN_DIR_MIN_FREE_BYTES = 16 * 2**20

#: seconds past the node's recovery objective the run waits for recovery by default
RECOVERY_MARGIN_S = 15.0


@dataclass(frozen=True)
class RunPlan:
    """What one run does: the fault (or action) ``kind`` as ``describe`` says, its
    ``params`` (as ``run.json`` records them), and how long each phase lasts (seconds)."""

    kind: str
    describe: str
    params: dict[str, Any] = field(default_factory=dict)
    hold_s: float = 5.0
    baseline_s: float = 5.0
    #: background load on the node (off: the scenario brings its own)
    load: bool = True
    #: other nodes under background load too (same ledger), to show a failure stays contained
    neighbours: Sequence[Node] = ()
    #: how long after t_effect recovery is awaited (default: the objective + a margin)
    recovery_deadline_s: float | None = None


async def run_steps(
    state: ExperimentState,
    fault: contextlib.AbstractAsyncContextManager[Any],
    plan: RunPlan,
    *,
    during: Step | None = None,
    after_revert: Step | None = None,
) -> Measurement:
    """Run ``fault`` by ``plan`` on ``state``'s node; see the module docstring."""
    unwritable = run_dir_unwritable(
        state, FaultInfo(kind=plan.kind, params=plan.params, describe=plan.describe))
    if unwritable is not None:
        raise state.abort(unwritable)
    if state.dry_run:
        state.note(EventKind.DRY_RUN, plan=plan.describe)
        raise DryRunPlan(plan.describe)
    state.live.phase("preflight")
    state.container_before = state.evidence.container_state()
    prom = Prometheus(state.inventory.prometheus.url)
    deadline = plan.recovery_deadline_s or state.slo.recovery_s_max + RECOVERY_MARGIN_S
    state.note(EventKind.SCENARIO_START, scenario=state.scenario, fault=plan.kind)
    state.clock_offset = wall_minus_monotonic()
    running = _running(state.container_before)
    clock = await asyncio.to_thread(state.evidence.docker_clock)
    for reason in await asyncio.to_thread(preflight_gaps, state.node, prom, running, clock):
        state.note(EventKind.EVIDENCE_GAP, reason=reason)
    not_applied: FaultNotApplied | None = None
    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(collector_frozen())  # no GC pass walks the whole heap meanwhile
        state.loop_watch = await stack.enter_async_context(LoopWatch())
        alertmanager = await asyncio.to_thread(watch_alertmanager, state)
        if alertmanager is not None:
            stack.callback(alertmanager.close)
        await stack.enter_async_context(Observer(state.node, prom, state,
                                                 alertmanager=alertmanager))
        await start_loads(state, plan, stack)
        state.live.phase("baseline")
        state.note(EventKind.BASELINE_START, seconds=plan.baseline_s)
        t_baseline = time.time()
        await asyncio.sleep(plan.baseline_s)
        unsteady = steady_state_violations(
            state.load.records if state.load else [], state.events, state.node.name,
            state.slo, t_baseline, time.time(),
        )
        if unsteady:
            state.live.phase("drain")
            await stack.aclose()
            raise state.abort("not in steady state before injection: " + "; ".join(unsteady))
        if running is False:
            state.live.phase("drain")
            await stack.aclose()
            before = state.container_before or {}
            status = before.get("error") or f"status {before.get('status')}"
            raise state.abort(f"the node's container is not running ({status})")
        state.live.phase("inject")  # the fault's own events move it on: hold, revert
        found: Any = None
        try:
            async with fault:
                if during is not None:
                    found = await during()
                else:
                    await asyncio.sleep(plan.hold_s)
        except FaultNotApplied as exc:  # reverted already: measured all the same
            not_applied = exc
            state.note(EventKind.EVIDENCE_GAP, reason=exc.reason)
        except NodeBusy as exc:  # another fault holds the node: nothing acted, nothing to judge
            state.live.phase("drain")
            await stack.aclose()
            raise state.abort(f"the node was busy, so nothing was injected: {exc}") from exc
        _keep_result(state, fault, found)
        state.live.phase("recovering")
        if after_revert is not None:
            _keep_findings(state, await after_revert())
        await _wait_recovered(state, deadline)
        state.live.phase("drain")
    state.note(EventKind.SCENARIO_END)
    measurement = finish(state, prom)
    if not_applied is not None:
        # INCONCLUSIVE with the measurement's gaps (why it was not applied among them), no
        # check judged, written at once: the run reads so even if nothing judges it
        state.verdict = Verdict(checks=(), inconclusive=tuple(measurement.inconclusive))
        state.run.write_model(state.run.verdict_json, state.verdict)
    return measurement


def run_dir_unwritable(state: ExperimentState, fault: FaultInfo) -> str | None:
    """Why the run directory cannot hold this run's evidence (None: it can), checked before
    anything acts: ``run.json`` must be written and its filesystem must have
    :data:`RUN_DIR_MIN_FREE_BYTES` free. A run that could not record what it saw must not
    inject a fault it cannot judge."""
    where = state.run.path
    try:
        state.write_run_info(fault=fault)
        free = shutil.disk_usage(where).free
    except OSError as exc:
        return (f"the run directory {where} cannot be written ({exc.strerror or exc}); "
                "nothing was injected (free space there or choose another runs directory)")
    if free < RUN_DIR_MIN_FREE_BYTES:
        return (f"the run directory {where} has {free / 2**20:.1f} MiB free, under the "
                f"{RUN_DIR_MIN_FREE_BYTES / 2**20:.0f} MiB a run's evidence needs; nothing "
                "was injected (free space there or choose another runs directory)")
    return None


def _running(before: Mapping[str, Any] | None) -> bool | None:
    """Whether the container ran before injecting; ``None`` for a node without one."""
    if before is None:
        return None
    return "error" not in before and bool(before.get("running"))


async def start_loads(
    state: ExperimentState, plan: RunPlan, stack: contextlib.AsyncExitStack,
) -> None:
    """Start the node's background load (``state.load``) and each neighbour's, on ``stack``."""
    # closed after every load below has drained: it holds each one's records
    columnar = _columnar_ledger(state) if plan.load or plan.neighbours else None
    if columnar is not None:
        stack.callback(_close_columnar, columnar)
    on_record = columnar.write if columnar is not None else None
    if plan.load:
        state.load = await stack.enter_async_context(
            BackgroundLoad(
                state.node,
                state.load_profile,
                ledger_path=state.run.ledger_jsonl,
                on_record=_each(state.live.on_record, on_record),
            )
        )
    for other in plan.neighbours:  # each at no more than its own background rate
        await stack.enter_async_context(
            BackgroundLoad(other, within_node_rate(state.load_profile, other.background_rate),
                           ledger_path=state.run.ledger_jsonl, on_record=on_record)
        )


def _keep_result(
    state: ExperimentState, fault: contextlib.AbstractAsyncContextManager[Any], found: Any,
) -> None:
    """Keep the fault's ``result`` (and a harness action's findings) and write them to
    ``run.json`` (without the raw records)."""
    state.fault_result = dict(getattr(fault, "result", {}) or {})
    candidate_log = str(getattr(fault, "candidate_log", "") or "")
    if candidate_log:  # the container that failed: its own words, redacted
        state.fault_result["candidate_log_tail"] = state.evidence.redact(candidate_log)
    _keep_findings(state, found)


def _keep_findings(state: ExperimentState, found: Any) -> None:
    """Add what a step found (a mapping it returned: a harness action's findings, or what
    a scenario measured after the revert) to the fault result, and write ``run.json``."""
    if isinstance(found, Mapping):
        state.fault_result.update(found)
    state.write_run_info(
        fault_result={k: v for k, v in state.fault_result.items() if k != "records"}
    )


async def _wait_recovered(state: ExperimentState, deadline_s: float) -> None:
    """Keep observing until recovered and held for ``recovery_hold_s``, and the after
    window filled (:func:`_after_window_filled`) — or the deadline, ``deadline_s`` after
    t_effect, noted as ``recovery_deadline``."""
    try:
        t_effect = effect_of(state.events, state.effect_node).t
    except MeasurementInputError:
        return
    hold = state.slo.recovery_hold_s
    stop_at = time.monotonic() + max(0.0, deadline_s - (time.time() - t_effect))
    while time.monotonic() < stop_at:
        await asyncio.sleep(1.0)
        records = state.load.records if state.load else []
        now = time.time()
        t_rec, _ = recovered_at(records, state.events, state.node.name, t_effect, now, hold)
        if t_rec is not None and now - t_rec >= hold + 1.0 \
                and not _still_held(state, now, t_effect) \
                and _after_window_filled(state, t_rec, now, hold):
            return
    state.note(EventKind.RECOVERY_DEADLINE, seconds=deadline_s)


def _after_window_filled(state: ExperimentState, t_rec: float, now: float, hold: float) -> bool:
    """Whether the after window (as :func:`slo.measure.after_window_start` cuts it, from
    the requests that have ended) holds :data:`AFTER_MIN_REQUESTS` of the node's requests,
    sent or ended — or cannot: the load no longer sends, or it has been observed
    :data:`AFTER_MAX_EXTRA_S` past the recovery hold (a low rate, a slow backlog)."""
    load = state.load
    if load is None or not load.sending():
        return True
    if now - t_rec >= hold + 1.0 + AFTER_MAX_EXTRA_S:
        return True
    t_revert = fault_time(state.events, state.effect_node, EventKind.REVERT_END)
    requests = [r for r in load.records if r.kind != "probe"]
    start = after_window_start(requests, t_rec, t_revert)
    ended = sum(1 for r in requests if arrival(r) >= start)
    sent = sum(1 for t_invoke in load.in_flight().values() if t_invoke >= start)
    return ended + sent >= AFTER_MIN_REQUESTS


def _still_held(state: ExperimentState, now: float, t_effect: float) -> bool:
    """A request still in flight after ``recovery_hold_s`` while the held-request rule
    applies (:func:`slo.measure.held_rule_applies`): once it ends it may move the
    recovery, so the run keeps watching (a record exists only for a request that ended)."""
    if state.load is None:
        return False
    if not held_rule_applies(state.events, state.node.name, t_effect):
        return False
    hold = state.slo.recovery_hold_s
    return any(now - t_invoke >= hold for t_invoke in state.load.in_flight().values())


def finish(state: ExperimentState, prom: Prometheus) -> Measurement:
    """Measure the run: its evidence recorded (:func:`record_evidence`), the measurement
    (``measurement.json``), and ``run.json``'s ``t_end`` and the node's requests over its
    SLO window (``slo_window_requests``, the budget's denominator). Raises
    ``MeasurementInputError`` when no fault ran."""
    state.live.phase("measure")
    ledger = state.run.ledger()
    t_end = time.time()
    check = record_evidence(state, prom, t_end, ledger)
    state.measurement = measure(
        ledger,
        state.events,
        state.node.name,
        recovery_hold_s=state.slo.recovery_hold_s,
        t_window_end=t_end,
        server_cross_check=check,
        ttft_objective_s=state.slo.ttft_s,
        effect_node=state.fault_node.name if state.fault_node else None,
    )
    state.run.write_model(state.run.measurement_json, state.measurement)
    traffic = window_traffic(prom, state.node, f"{state.slo.window_days}d", t_end)
    state.write_run_info(t_end=t_end, slo_window_requests=traffic.requests,
                         slo_window=traffic.to_json())
    return state.measurement


def _columnar_ledger(state: ExperimentState) -> ArrowLedgerWriter | None:
    """The run's columnar ledger (``ledger.arrows``), or None if it cannot be created.

    A copy for tools, next to ``ledger.jsonl``, which the measurement reads: a problem
    with it is logged and never fails the scenario.
    """
    try:
        return ArrowLedgerWriter(state.run.ledger_arrows)
    except Exception as exc:
        log.warning("no columnar ledger for this run: %s", exc)
        return None


def _close_columnar(writer: ArrowLedgerWriter) -> None:
    try:
        writer.close()
    except Exception as exc:  # a copy for tools: the run goes on without it
        log.warning("columnar ledger %s is incomplete: %s", writer.path, exc)


def _each(
    *callbacks: Callable[[RequestRecord], object] | None,
) -> Callable[[RequestRecord], None]:
    """One ``on_record`` callback that calls every given one (``None``s skipped), in order."""
    present = [c for c in callbacks if c is not None]

    def call(record: RequestRecord) -> None:
        for callback in present:
            callback(record)

    return call
