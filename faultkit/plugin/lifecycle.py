"""The steps of one scenario run, from preflight to measurement.

:class:`RunLifecycle` is a base of :class:`~faultkit.plugin.experiment.Experiment`;
``Experiment.run_fault`` and ``Experiment.run_action`` call its ``_run``. Contract of
``_run(fault, kind, describe, params, …)``:

1. ``run.json`` is written; a run directory that cannot be written, or whose filesystem
   has less than :data:`RUN_DIR_MIN_FREE_BYTES` free, ends the run INCONCLUSIVE before
   anything acts (``Experiment._abort``, the reason also in memory when no file can hold
   it). Under ``--dry-run`` the plan is noted and
   :class:`~faultkit.plugin.status.DryRunPlan` raised (nothing acts).
2. Preflight: the container's state is taken, evidence gaps are noted.
3. The observer starts, then the background load of the node (and of ``neighbours``,
   same ledger; ``ledger.arrows`` beside it, best effort).
4. Baseline for ``baseline_s``: not in steady state, or the container not running, ends
   the run INCONCLUSIVE before injecting (``Experiment._abort``).
5. Inject: ``fault`` is entered for ``hold_s`` or while ``during`` runs, then reverted;
   its ``result`` is kept. ``after_revert``, when given, then runs under the same load
   (what the scenario still wants to see after the revert, e.g. a gateway sending its
   upstream traffic again). A fault that could not be applied
   (:class:`~faultkit.errors.FaultNotApplied`: an act still failed after its retries, and
   what was done is reverted) does not end the run: its reason is noted as an
   ``evidence_gap`` and the run goes on to be measured like any other.
6. Recovery is awaited (the node recovered and held for ``recovery_hold_s``, or the
   deadline), the loads drain.
7. Measure: Docker's events and Prometheus' series are captured, the measurement,
   ``container.json`` and ``t_end`` written; the measurement is returned. After a fault
   that could not be applied the verdict is already INCONCLUSIVE (``verdict.json``, no
   check judged; the scenario's own ``check`` judges it again, still INCONCLUSIVE).

The live status (``Experiment.live``) is moved through the phases preflight, baseline,
inject, recovering, drain, measure.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from faultkit.errors import FaultkitError, FaultNotApplied
from faultkit.events import EventKind
from faultkit.gcquiet import collector_frozen
from faultkit.inventory import Node
from faultkit.load import BackgroundLoad
from faultkit.load.ledgerfile import ArrowLedgerWriter
from faultkit.load.profile import within_node_rate
from faultkit.loopwatch import LoopWatch
from faultkit.plugin.live import LiveStatus
from faultkit.plugin.run_evidence import RunEvidence
from faultkit.plugin.status import DryRunPlan
from faultkit.records import Event, RequestRecord
from faultkit.rundir import ContainerEvidence, FaultInfo
from faultkit.timestamps import clock_step_gap, wall_minus_monotonic
from slo.capture import PrometheusCapture, capture, cross_check
from slo.evidence import preflight_gaps, steady_state_violations
from slo.measure import MeasurementInputError, effect_of, measure, recovered_at
from slo.observer import Observer
from slo.prom import Prometheus
from slo.types import Measurement, Verdict

#: free space the run directory's filesystem must have before a fault is injected: about
#: ten times what a 150 s scenario at 10 req/s writes (a 20 s pause run: 264 KB, most of it
#: the ledger at ≈ 6.5 KB/s)
RUN_DIR_MIN_FREE_BYTES = 16 * 2**20

#: the logger the experiment has always written to (this code was part of its module)
log = logging.getLogger("faultkit.plugin.experiment")

#: what ``during`` is called with: the experiment (``During`` in faultkit.plugin.experiment)
Step = Callable[[Any], Awaitable[Any]]


def _close_columnar(writer: ArrowLedgerWriter) -> None:
    try:
        writer.close()
    except Exception as exc:  # a copy for tools: the run goes on without it
        log.warning("columnar ledger %s is incomplete: %s", writer.path, exc)


class RunLifecycle(RunEvidence):
    """Preflight → load → baseline → inject → recover → measure, for an experiment."""

    #: the run's loop watch, from the start of its load (loop-stalls.json)
    _loop_watch: LoopWatch | None = None

    if TYPE_CHECKING:  # the experiment's (faultkit.plugin.experiment.Experiment)
        dry_run: bool
        events: list[Event]
        fault_result: dict[str, Any]
        measurement: Measurement | None
        verdict: Verdict | None
        load: BackgroundLoad | None
        _container_before: dict[str, Any] | None
        _clock_offset: float
        live: LiveStatus

        def note(self, kind: str, **data: Any) -> None: ...

        def write(self, obj: Event) -> None: ...

        def _abort(self, reason: str) -> Exception: ...

    async def _run(
        self,
        fault: contextlib.AbstractAsyncContextManager[Any],
        kind: str,
        describe: str,
        params: dict[str, Any],
        *,
        hold_s: float,
        baseline_s: float,
        during: Step | None,
        load: bool,
        neighbours: Sequence[Node],
        recovery_deadline_s: float | None,
        after_revert: Step | None = None,
    ) -> Measurement:
        unwritable = self._run_dir_unwritable(FaultInfo(kind=kind, params=params,
                                                         describe=describe))
        if unwritable is not None:
            raise self._abort(unwritable)
        if self.dry_run:
            self.note(EventKind.DRY_RUN, plan=describe)
            raise DryRunPlan(describe)
        self.live.phase("preflight")
        self._container_before = self._container_state()
        prom = Prometheus(self.inventory.prometheus.url)
        deadline = recovery_deadline_s or self.slo.recovery_s_max + 15
        self.note(EventKind.SCENARIO_START, scenario=self.scenario, fault=kind)
        self._clock_offset = wall_minus_monotonic()
        running = None
        if self._container_before is not None and "error" not in self._container_before:
            running = bool(self._container_before.get("running"))
        elif self._container_before is not None:
            running = False
        clock = await asyncio.to_thread(self._docker_clock)
        for reason in await asyncio.to_thread(preflight_gaps, self.node, prom, running, clock):
            self.note(EventKind.EVIDENCE_GAP, reason=reason)
        not_applied: FaultNotApplied | None = None
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(collector_frozen())  # no GC pass walks the whole heap meanwhile
            self._loop_watch = await stack.enter_async_context(LoopWatch())
            await stack.enter_async_context(Observer(self.node, prom, self))
            # closed after every load below has drained: it holds each one's records
            columnar = self._columnar_ledger() if load or neighbours else None
            if columnar is not None:
                stack.callback(_close_columnar, columnar)
            on_record = columnar.write if columnar is not None else None
            if load:
                self.load = await stack.enter_async_context(
                    BackgroundLoad(
                        self.node,
                        self.load_profile,
                        ledger_path=self.run.ledger_jsonl,
                        on_record=_each(self.live.on_record, on_record),
                    )
                )
            for other in neighbours:  # each at no more than its own background rate
                await stack.enter_async_context(
                    BackgroundLoad(other, within_node_rate(self.load_profile,
                                                           other.background_rate),
                                   ledger_path=self.run.ledger_jsonl, on_record=on_record)
                )
            self.live.phase("baseline")
            self.note(EventKind.BASELINE_START, seconds=baseline_s)
            t_baseline = time.time()
            await asyncio.sleep(baseline_s)
            unsteady = steady_state_violations(
                self.load.records if self.load else [], self.events, self.node.name, self.slo,
                t_baseline, time.time(),
            )
            if unsteady:
                self.live.phase("drain")
                await stack.aclose()
                raise self._abort("not in steady state before injection: " + "; ".join(unsteady))
            if running is False:
                self.live.phase("drain")
                await stack.aclose()
                before = self._container_before or {}
                status = before.get("error") or f"status {before.get('status')}"
                raise self._abort(f"the node's container is not running ({status})")
            self.live.phase("inject")  # the fault's own events move it on: hold, revert
            found: Any = None
            try:
                async with fault:
                    if during is not None:
                        found = await during(self)
                    else:
                        await asyncio.sleep(hold_s)
            except FaultNotApplied as exc:  # reverted already: measured all the same
                not_applied = exc
                self.note(EventKind.EVIDENCE_GAP, reason=exc.reason)
            self.fault_result = dict(getattr(fault, "result", {}) or {})
            candidate_log = str(getattr(fault, "candidate_log", "") or "")
            if candidate_log:  # the container that failed: its own words, redacted
                self.fault_result["candidate_log_tail"] = self._redact(candidate_log)
            if isinstance(found, Mapping):  # a harness action's findings
                self.fault_result.update(found)
            self._write_run_info(
                fault_result={k: v for k, v in self.fault_result.items() if k != "records"}
            )
            self.live.phase("recovering")
            if after_revert is not None:
                await after_revert(self)
            await self._wait_recovered(deadline)
            self.live.phase("drain")
        self.note(EventKind.SCENARIO_END)
        measurement = self._finish(prom)
        if not_applied is not None:
            self._not_applied_verdict(measurement)
        return measurement

    def _run_dir_unwritable(self, fault: FaultInfo) -> str | None:
        """Why the run directory cannot hold this run's evidence (None: it can), checked
        before anything acts: ``run.json`` must be written and its filesystem must have
        :data:`RUN_DIR_MIN_FREE_BYTES` free. A run that could not record what it saw must
        not inject a fault it cannot judge."""
        where = self.run.path
        try:
            self._write_run_info(fault=fault)
            free = shutil.disk_usage(where).free
        except OSError as exc:
            return (f"the run directory {where} cannot be written ({exc.strerror or exc}); "
                    "nothing was injected (free space there or choose another runs directory)")
        if free < RUN_DIR_MIN_FREE_BYTES:
            return (f"the run directory {where} has {free / 2**20:.1f} MiB free, under the "
                    f"{RUN_DIR_MIN_FREE_BYTES / 2**20:.0f} MiB a run's evidence needs; nothing "
                    "was injected (free space there or choose another runs directory)")
        return None

    def _not_applied_verdict(self, measurement: Measurement) -> None:
        """The verdict of a run whose fault could not be applied: INCONCLUSIVE with the
        measurement's gaps (why it was not applied among them) and no check judged, written
        to ``verdict.json`` at once: the run reads so even if the scenario never judges it."""
        self.verdict = Verdict(checks=(), inconclusive=tuple(measurement.inconclusive))
        self.run.write_model(self.run.verdict_json, self.verdict)

    def _write_loop_stalls(self) -> None:
        """``loop-stalls.json``: each stall of the run's event loop and what the process did
        meanwhile (:mod:`faultkit.loopwatch`); the longest is logged."""
        watch = self._loop_watch
        if watch is None:  # the run ended before its load started
            return
        self.run.write_json(self.run.loop_stalls_json, [s.to_json() for s in watch.stalls])
        if watch.stalls:
            longest = max(watch.stalls, key=lambda s: s.duration_s)
            log.warning("the harness's event loop stalled %d time(s) during the run; the "
                        "longest: %s", len(watch.stalls), longest.summary())

    def _columnar_ledger(self) -> ArrowLedgerWriter | None:
        """The run's columnar ledger (``ledger.arrows``), or None if it cannot be created.

        A copy for tools, next to ``ledger.jsonl``, which the measurement reads: a problem
        with it is logged and never fails the scenario.
        """
        try:
            return ArrowLedgerWriter(self.run.ledger_arrows)
        except Exception as exc:
            log.warning("no columnar ledger for this run: %s", exc)
            return None

    async def _wait_recovered(self, deadline_s: float) -> None:
        """Keep observing until recovered and held for ``recovery_hold_s`` (or the deadline)."""
        try:
            t_effect = effect_of(self.events, self._effect_node).t
        except MeasurementInputError:
            return
        hold = self.slo.recovery_hold_s
        stop_at = time.monotonic() + max(0.0, deadline_s - (time.time() - t_effect))
        while time.monotonic() < stop_at:
            await asyncio.sleep(1.0)
            records = self.load.records if self.load else []
            now = time.time()
            t_rec, _ = recovered_at(records, self.events, self.node.name, t_effect, now, hold)
            if t_rec is not None and now - t_rec >= hold + 1.0:
                return
        self.note(EventKind.RECOVERY_DEADLINE, seconds=deadline_s)

    def _finish(self, prom: Prometheus) -> Measurement:
        self.live.phase("measure")
        stepped = clock_step_gap(self._clock_offset)
        if stepped is not None:
            self.note(EventKind.EVIDENCE_GAP, reason=stepped)
        ledger = self.run.ledger()
        t_end = time.time()
        self._record_container_events(t_end)
        try:
            self.run.write_model(
                self.run.prometheus_json,
                capture(prom, self.node, self.t_start, t_end, timeline=self.events),
            )
            check = cross_check(prom, self.node, ledger, self.t_start, t_end)
        except FaultkitError as exc:
            log.warning("could not capture Prometheus series: %s", exc)
            self.run.write_model(self.run.prometheus_json, PrometheusCapture(error=str(exc)))
            check = None
        self.measurement = measure(
            ledger,
            self.events,
            self.node.name,
            recovery_hold_s=self.slo.recovery_hold_s,
            t_window_end=t_end,
            server_cross_check=check,
            ttft_objective_s=self.slo.ttft_s,
            effect_node=self.fault_node.name if self.fault_node else None,
        )
        self.run.write_model(self.run.measurement_json, self.measurement)
        self._write_loop_stalls()
        self.run.write_container_evidence(ContainerEvidence.of(
            before=self._container_before, after=self._container_state(),
            log_tail=self._log_tail(),
        ))
        self._write_run_info(t_end=t_end)
        return self.measurement

    @property
    def _effect_node(self) -> str:
        """The node whose fault events give t_effect (the faulted node)."""
        return (self.fault_node or self.node).name


def _each(
    *callbacks: Callable[[RequestRecord], object] | None,
) -> Callable[[RequestRecord], None]:
    """One ``on_record`` callback that calls every given one (``None``s skipped), in order."""
    present = [c for c in callbacks if c is not None]

    def call(record: RequestRecord) -> None:
        for callback in present:
            callback(record)

    return call
