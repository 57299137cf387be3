"""One scenario run against one node, start to incident report.

The shape every scenario shares (principlesofchaos.org): establish steady state under
load → inject the fault → observe → revert → verify recovery → measure → judge against
the node's SLOs → write the run directory and render its incident report. Scenarios
call :meth:`Experiment.run` (or the pieces) and then :meth:`Experiment.check`.

This module wires ``faultkit`` (load, faults, docker), ``slo`` (observer, measurement,
verdicts) and ``reports`` together; it is part of the plugin, the one place besides the
CLI where that is allowed.

:class:`Experiment` holds the run's state and is what scenarios use: the timeline
(``emit``, ``note``), the run (``run_fault``, ``run_action``, ``not_judgeable``), the
judgement (``default_checks``, ``latency_checks``, ``check``) and ``finalize``. Its bases
hold the rest: the run's steps, :class:`~faultkit.plugin.lifecycle.RunLifecycle`; what
is recorded about the node (``run.json``, ``container.json``, Docker's events),
:class:`~faultkit.plugin.run_evidence.RunEvidence`; a harness action's window is
:class:`~faultkit.plugin.action.ActionWindow`. :class:`NotJudgeable` ends a run
INCONCLUSIVE before injecting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from faultkit.events import EventKind
from faultkit.inventory import Inventory, Node, SLOSettings
from faultkit.load import BackgroundLoad, LoadProfile
from faultkit.plugin.action import ActionWindow
from faultkit.plugin.lifecycle import RunLifecycle
from faultkit.plugin.live import LiveStatus
from faultkit.records import Event, JsonlWriter
from faultkit.rundir import RunDir
from faultkit.timestamps import wall_minus_monotonic
from slo.accepted import apply_accepted
from slo.checks import (
    CheckFn,
    Checks,
    checks_from_slo,
    error_ratio_at_most,
    judge,
    ttft_p95_below,
)
from slo.types import Measurement, Verdict

log = logging.getLogger(__name__)

#: a harness action (``run_action``); what it returns, if anything, is the run's fault result
During = Callable[["Experiment"], Awaitable[Mapping[str, Any] | None]]


@dataclass
class Experiment(RunLifecycle):
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
    #: wall − monotonic clock at scenario start: a step by the end makes the run
    #: INCONCLUSIVE (faultkit.timestamps.clock_step_gap)
    _clock_offset: float = field(default_factory=wall_minus_monotonic)
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
        after_revert: During | None = None,
    ) -> Measurement:
        """Baseline under load, inject ``kind`` for ``hold_s`` (or while ``during`` runs),
        revert, wait for recovery (to the node's recovery objective + margin), measure.

        ``neighbours`` get background load too (same ledger), to show a failure stays contained.
        ``on``: inject the fault on that node instead (an upstream of the gateway under
        test; its own fault allowlist applies): the load, the observer and the judgement
        stay on this experiment's node, t_effect is ``on``'s (``measure(effect_node=…)``).
        ``after_revert``: awaited after the revert, under the same load, before waiting for
        recovery (what else the scenario waits to see; its return value is ignored).

        A fault that could not be applied (an act still failed after its retries: Docker
        refused it) is reverted and the run measured all the same: it returns, its verdict
        INCONCLUSIVE "the fault could not be applied: …" (already in ``verdict`` and
        ``verdict.json``; ``check`` keeps it INCONCLUSIVE), never a traceback.
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
            after_revert=after_revert,
        )

    async def run_action(
        self,
        kind: str,
        action: During,
        *,
        describe: str,
        baseline_s: float = 5.0,
        params: Mapping[str, Any] | None = None,
        load_profile: LoadProfile | None = None,
    ) -> Measurement:
        """Like :meth:`run_fault`, for a harness-driven action (e.g. malformed requests):
        the action's start and end are the injection window. ``load_profile`` replaces the
        run's background load (a soak's: the users' load *is* the experiment); run.json
        records the one used."""
        if load_profile is not None:
            self.load_profile = load_profile
        window = ActionWindow(self, kind, dict(params or {}))
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

    def not_judgeable(self, reason: str) -> NotJudgeable:
        """For a scenario that cannot run its experiment on this node: ``raise
        experiment.not_judgeable(why)`` ends it INCONCLUSIVE (a failure that says what is
        missing), never a skip, which would read as green."""
        return self._abort(reason)

    def _abort(self, reason: str) -> NotJudgeable:
        """End the run before injecting: INCONCLUSIVE, with ``reason`` as the missing evidence.

        The verdict is set in memory first, then written with the timeline and run.json as
        far as the run directory lets it: a full filesystem (the reason itself, maybe)
        leaves the verdict, and the test's outcome, INCONCLUSIVE all the same."""
        gaps = tuple(dict.fromkeys([
            *(str(e.data.get("reason")) for e in self.events
              if e.kind == EventKind.EVIDENCE_GAP),
            reason,
        ]))
        self.verdict = Verdict(checks=(), inconclusive=gaps)
        try:
            self.note(EventKind.EVIDENCE_GAP, reason=reason)
            self.note(EventKind.ABORTED, reason=reason)
            self.run.write_model(self.run.verdict_json, self.verdict)
            self._write_run_info(aborted=reason)
        except OSError as exc:
            log.warning("the run directory %s holds only part of this run (%s): %s",
                        self.run.path, exc, reason)
        return NotJudgeable(reason)

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
        self.run.write_model(self.run.verdict_json, self.verdict)
        return self.verdict

    def finalize(self) -> None:
        """Close files and render the incident report (passes, failures, and runs that ended
        INCONCLUSIVE before injecting — their report says what evidence was missing)."""
        if self._timeline is not None:
            try:
                self._timeline.close()
            except OSError as exc:  # a full disk: the verdict already says what is missing
                log.warning("timeline %s is incomplete: %s", self.run.timeline_jsonl, exc)
            self._timeline = None
        if not (self.run.measurement_json.exists() or self.run.verdict_json.exists()):
            return
        self.live.phase("report")
        from reports.render import render_incident

        render_incident(self.run.path)

    # EventSink protocol (the observer writes through the experiment)
    def write(self, obj: Event) -> None:
        self.emit(obj)


class NotJudgeable(Exception):
    """The run ended before injecting because evidence was missing; the verdict is
    INCONCLUSIVE (``Experiment.verdict``) and the message says what was missing."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"INCONCLUSIVE: {reason}")
        self.reason = reason

