"""One scenario run against one node, start to incident report.

The shape every scenario shares (principlesofchaos.org): establish steady state under
load → inject the fault → observe → revert → verify recovery → measure → judge against
the node's SLOs → write the run directory and render its incident report. Scenarios
call :meth:`Experiment.run` (or the pieces) and then :meth:`Experiment.check`.

This module wires ``faultkit`` (load, faults, docker), ``slo`` (observer, measurement,
verdicts) and ``reports`` together; it is part of the plugin, the one place besides the
CLI where that is allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from faultkit.docker import docker_host
from faultkit.errors import FaultkitError
from faultkit.events import EventKind
from faultkit.inventory import Inventory, Node, SLOSettings, config_hash
from faultkit.load import BackgroundLoad, LoadProfile
from faultkit.load.ledgerfile import ArrowLedgerWriter
from faultkit.plugin.evidence import container_events
from faultkit.plugin.live import LiveStatus
from faultkit.plugin.status import DryRunPlan
from faultkit.records import Event, JsonlWriter, RequestRecord
from faultkit.rundir import RunDir
from slo.accepted import apply_accepted
from slo.capture import capture, cross_check
from slo.checks import (
    CheckFn,
    Checks,
    checks_from_slo,
    error_ratio_at_most,
    judge,
    ttft_p95_below,
)
from slo.evidence import preflight_gaps, steady_state_violations
from slo.measure import MeasurementInputError, effect_of, measure, recovered_at
from slo.observer import Observer
from slo.prom import Prometheus
from slo.types import Measurement, Verdict

log = logging.getLogger(__name__)


def _close_columnar(writer: ArrowLedgerWriter) -> None:
    try:
        writer.close()
    except Exception as exc:  # a copy for tools: the run goes on without it
        log.warning("columnar ledger %s is incomplete: %s", writer.path, exc)

During = Callable[["Experiment"], Awaitable[None]]


@dataclass
class Experiment:
    """State of one scenario run; create it through the ``experiment`` fixture."""

    scenario: str
    node: Node
    inventory: Inventory
    run: RunDir
    load_profile: LoadProfile
    dry_run: bool = False
    #: the test's case id (``llama`` in ``test_bad_input[llama]``), for accepted findings
    case: str | None = None
    events: list[Event] = field(default_factory=list)
    fault_result: dict[str, Any] = field(default_factory=dict)
    measurement: Measurement | None = None
    verdict: Verdict | None = None
    load: BackgroundLoad | None = None
    _timeline: JsonlWriter | None = None
    _container_before: dict[str, Any] | None = None
    #: the node the fault was injected on when it is not ``node`` (``run_fault(on=…)``)
    fault_node: Node | None = None
    t_start: float = field(default_factory=time.time)
    #: what the terminal's live line shows (the plugin's ``faultkit_live``); fed by every
    #: timeline event, every ledger record of the node's load, and the phases of ``_run``
    live: LiveStatus = field(default_factory=LiveStatus)

    # ------------------------------------------------------------------ basics
    @property
    def slo(self) -> SLOSettings:
        return self.inventory.slo_for(self.node)

    def emit(self, event: Event) -> None:
        """Append an event to the timeline (file and memory)."""
        if self._timeline is None:
            self._timeline = self.run.timeline_writer()
        self._timeline.write(event)
        self.events.append(event)
        self.live.on_event(event)

    def note(self, kind: str, **data: Any) -> None:
        self.emit(Event(t=time.time(), source="harness", kind=kind, node=self.node.name, data=data))

    # ------------------------------------------------------------------ the run
    async def run_fault(
        self,
        kind: str,
        *,
        hold_s: float = 5.0,
        baseline_s: float = 5.0,
        during: During | None = None,
        params: Mapping[str, Any] | None = None,
        load: bool = True,
        neighbours: Sequence[Node] = (),
        recovery_deadline_s: float | None = None,
        on: Node | None = None,
    ) -> Measurement:
        """Baseline under load, inject ``kind`` for ``hold_s`` (or while ``during`` runs),
        revert, wait for recovery (to the node's recovery objective + margin), measure.

        ``neighbours`` get background load too (same ledger), to show a failure stays contained.
        ``on``: inject the fault on that node instead (an upstream of the gateway under
        test; its own fault allowlist applies): the load, the observer and the judgement
        stay on this experiment's node, t_effect is ``on``'s (``measure(effect_node=…)``).
        """
        from faultkit.faults import make_fault

        params = dict(params or {})
        self.fault_node = on if on is not None and on.name != self.node.name else None
        fault = make_fault(
            kind,
            on or self.node,
            inventory=self.inventory,
            timeline=self.emit,
            dry_run=self.dry_run,
            **params,
        )
        if self.dry_run:  # the plan is refused as the run would be (reads the journal only)
            from faultkit.faults.admission import existing_journal

            fault.refuse_if_blocked(existing_journal())
        return await self._run(
            fault,
            kind,
            fault.describe(),
            params,
            hold_s=hold_s,
            baseline_s=baseline_s,
            during=during,
            load=load,
            neighbours=neighbours,
            recovery_deadline_s=recovery_deadline_s,
        )

    async def run_action(
        self,
        kind: str,
        action: During,
        *,
        describe: str,
        baseline_s: float = 5.0,
        params: Mapping[str, Any] | None = None,
    ) -> Measurement:
        """Like :meth:`run_fault`, for a harness-driven action (e.g. malformed requests):
        the action's start and end are the injection window."""
        window = _ActionWindow(self, kind, dict(params or {}))
        return await self._run(
            window,
            kind,
            describe,
            dict(params or {}),
            hold_s=0.0,
            baseline_s=baseline_s,
            during=action,
            load=True,
            neighbours=(),
            recovery_deadline_s=None,
        )

    async def _run(
        self,
        fault: contextlib.AbstractAsyncContextManager[Any],
        kind: str,
        describe: str,
        params: dict[str, Any],
        *,
        hold_s: float,
        baseline_s: float,
        during: During | None,
        load: bool,
        neighbours: Sequence[Node],
        recovery_deadline_s: float | None,
    ) -> Measurement:
        self._write_run_info(fault={"kind": kind, "params": params, "describe": describe})
        if self.dry_run:
            self.note(EventKind.DRY_RUN, plan=describe)
            raise DryRunPlan(describe)
        self.live.phase("preflight")
        self._container_before = self._container_state()
        prom = Prometheus(self.inventory.prometheus.url)
        deadline = recovery_deadline_s or self.slo.recovery_s_max + 15
        self.note(EventKind.SCENARIO_START, scenario=self.scenario, fault=kind)
        running = None
        if self._container_before is not None and "error" not in self._container_before:
            running = bool(self._container_before.get("running"))
        elif self._container_before is not None:
            running = False
        for reason in await asyncio.to_thread(preflight_gaps, self.node, prom, running):
            self.note(EventKind.EVIDENCE_GAP, reason=reason)
        async with contextlib.AsyncExitStack() as stack:
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
            for other in neighbours:
                await stack.enter_async_context(
                    BackgroundLoad(other, self.load_profile,
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
            async with fault:
                if during is not None:
                    await during(self)
                else:
                    await asyncio.sleep(hold_s)
            self.fault_result = dict(getattr(fault, "result", {}) or {})
            self._write_run_info(
                fault_result={k: v for k, v in self.fault_result.items() if k != "records"}
            )
            self.live.phase("recovering")
            await self._wait_recovered(deadline)
            self.live.phase("drain")
        self.note(EventKind.SCENARIO_END)
        return self._finish(prom)

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

    def not_judgeable(self, reason: str) -> NotJudgeable:
        """For a scenario that cannot run its experiment on this node: ``raise
        experiment.not_judgeable(why)`` ends it INCONCLUSIVE (a failure that says what is
        missing), never a skip, which would read as green."""
        return self._abort(reason)

    def _abort(self, reason: str) -> NotJudgeable:
        """End the run before injecting: INCONCLUSIVE, with ``reason`` as the missing evidence."""
        self.note(EventKind.EVIDENCE_GAP, reason=reason)
        self.note(EventKind.ABORTED, reason=reason)
        gaps = tuple(dict.fromkeys(
            str(e.data.get("reason")) for e in self.events if e.kind == EventKind.EVIDENCE_GAP
        ))
        self.verdict = Verdict(checks=(), inconclusive=gaps)
        self.run.write_json(self.run.verdict_json, self.verdict.to_json())
        self._write_run_info(aborted=reason)
        return NotJudgeable(reason)

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
        ledger = self.run.ledger()
        t_end = time.time()
        self._record_container_events(t_end)
        try:
            self.run.write_json(
                self.run.prometheus_json,
                capture(prom, self.node, self.t_start, t_end, timeline=self.events),
            )
            check = cross_check(prom, self.node, ledger, self.t_start, t_end)
        except FaultkitError as exc:
            log.warning("could not capture Prometheus series: %s", exc)
            self.run.write_json(
                self.run.prometheus_json, {"series": [], "alerts": [], "error": str(exc)}
            )
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
        self.run.write_json(self.run.measurement_json, self.measurement.to_json())
        self.run.write_json(
            self.run.container_json,
            {
                "before": self._container_before,
                "after": self._container_state(),
                "log_tail": self._log_tail(),
            },
        )
        self._write_run_info(t_end=t_end)
        return self.measurement

    @property
    def _effect_node(self) -> str:
        """The node whose fault events give t_effect (the faulted node)."""
        return (self.fault_node or self.node).name

    def _record_container_events(self, t_end: float) -> None:
        """Put Docker's own container events for the run on the timeline (see ``evidence``):
        the node's, and the faulted node's when the fault was injected elsewhere."""
        for node in (self.node, self.fault_node):
            if node is None or node.docker is None:
                continue
            try:
                events = docker_host(node.docker.host).events(
                    node.docker.container, self.t_start, t_end
                )
            except FaultkitError as exc:
                log.warning("could not read Docker events of %s: %s", node.name, exc)
                continue
            for event in container_events(events, node.name):
                self.emit(event)

    # ------------------------------------------------------------------ judging
    def default_checks(self) -> Checks:
        """The node's SLOs as checks (detection, recovery, loss, error ratio, TTFT)."""
        return checks_from_slo(self.slo)

    def latency_checks(self, window: str = "fault") -> Checks:
        """TTFT p95 and error ratio of ``window`` against the node's objectives."""
        return ttft_p95_below(self.slo.ttft_s, window=window) & error_ratio_at_most(
            self.slo.error_ratio_max, window=window
        )

    def check(self, checks: Checks | Iterable[CheckFn] | None = None) -> Verdict:
        """Judge the measurement (default: the node's SLOs), apply the node's accepted
        findings (a FAIL made only of accepted failures reads ACCEPTED; ``slo.accepted``)
        and write verdict.json."""
        if self.measurement is None:
            raise RuntimeError("run a fault before checking (Experiment.run_fault)")
        self.live.phase("verdict")
        judged = judge(
            self.measurement, checks if checks is not None else checks_from_slo(self.slo)
        )
        self.verdict = apply_accepted(
            judged,
            self.node.accepted_findings,
            self.scenario,
            datetime.now(UTC).date(),
            case=self.case,
        )
        self.run.write_json(self.run.verdict_json, self.verdict.to_json())
        return self.verdict

    def finalize(self) -> None:
        """Close files and render the incident report (passes, failures, and runs that ended
        INCONCLUSIVE before injecting — their report says what evidence was missing)."""
        if self._timeline is not None:
            self._timeline.close()
            self._timeline = None
        if not (self.run.measurement_json.exists() or self.run.verdict_json.exists()):
            return
        self.live.phase("report")
        from reports.render import render_incident

        render_incident(self.run.path)

    # ------------------------------------------------------------------ evidence
    def _container_state(self) -> dict[str, Any] | None:
        """The container's state for ``container.json``, secrets redacted (see ``_redact``)."""
        if self.node.docker is None:
            return None
        try:
            state = docker_host(self.node.docker.host).state(self.node.docker.container)
            return dict(self._redact(state.to_json()))
        except FaultkitError as exc:
            return {"error": self._redact(str(exc))}

    def _log_tail(self) -> str:
        """The container log's last 80 lines, secrets redacted: engines print their
        arguments at start-up (vLLM's ``args: Namespace(api_key=...)``)."""
        if self.node.docker is None:
            return ""
        try:
            tail = docker_host(self.node.docker.host).logs(self.node.docker.container, tail=80)
            return str(self._redact(tail))
        except FaultkitError as exc:
            return f"(logs unavailable: {self._redact(str(exc))})"

    def _redact(self, data: Any) -> Any:
        """``data`` with secrets redacted, the inventory's known secret values included
        (every node's API key, secret-named serving-config env values)."""
        from reports.text import known_secrets, redact_data

        return redact_data(data, known_secrets(self.inventory))

    def _write_run_info(self, **extra: Any) -> None:
        info = self.run.run_info()
        if not info:
            config = (
                self.inventory.serving_configs.get(self.node.serving_config)
                if self.node.serving_config
                else None
            )
            info = {
                "scenario": self.scenario,
                "node": self.node.name,
                "engine": self.node.engine,
                "serving_config": self.node.serving_config,
                "node_config_hash": config_hash(config),
                "load_profile": dataclasses.asdict(self.load_profile),
                "harness_version": _harness_version(),
                "prometheus_url": self.inventory.prometheus.url,
                "scrape_interval_s": self.inventory.prometheus.scrape_interval_s,
                "slo": self.slo.model_dump(),
                "t_start": self.t_start,
            }
        info.update(extra)
        self.run.write_json(self.run.run_json, info)

    # EventSink protocol (the observer writes through the experiment)
    def write(self, obj: Event) -> None:
        self.emit(obj)


class _ActionWindow:
    """Marks a harness action's window on the timeline as a fault would (inject/revert events)."""

    def __init__(self, experiment: Experiment, kind: str, params: dict[str, Any]) -> None:
        self.experiment = experiment
        self.data = {"fault": kind, "params": params}
        self.result: dict[str, Any] = {}

    def _emit(self, kind: str, **extra: Any) -> None:
        self.experiment.emit(
            Event(
                t=time.time(),
                source="fault",
                kind=kind,
                node=self.experiment.node.name,
                data={**self.data, **extra},
            )
        )

    async def __aenter__(self) -> _ActionWindow:
        # the action is the fault: it takes effect when it starts (docs/definitions.md)
        self.data["effect"] = {"docker_actions": [], "required": "", "spans_outage": True}
        self._emit(EventKind.INJECT_START)
        self._emit(EventKind.ACT, what=f"start {self.data['fault']}")
        self._emit(EventKind.INJECT_END)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._emit(EventKind.REVERT_START)
        self._emit(EventKind.REVERT_END)


class NotJudgeable(Exception):
    """The run ended before injecting because evidence was missing; the verdict is
    INCONCLUSIVE (``Experiment.verdict``) and the message says what was missing."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"INCONCLUSIVE: {reason}")
        self.reason = reason


def _harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("faultkit")
    except PackageNotFoundError:
        return "unknown"


def _each(
    *callbacks: Callable[[RequestRecord], object] | None,
) -> Callable[[RequestRecord], None]:
    """One ``on_record`` callback that calls every given one (``None``s skipped), in order."""
    present = [c for c in callbacks if c is not None]

    def call(record: RequestRecord) -> None:
        for callback in present:
            callback(record)

    return call
