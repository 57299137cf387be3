"""One scenario run against one node, start to incident report.

The shape every scenario shares (principlesofchaos.org): establish steady state under
load → inject the fault → observe → revert → verify recovery → measure → judge against
the node's SLOs → write the run directory and render its incident report. Scenarios
call :meth:`Experiment.run_fault` (or :meth:`Experiment.run_action`) and then
:meth:`Experiment.check`; :meth:`Experiment.finalize` renders the report.

:class:`Experiment` is the run's state (:class:`~faultkit.experiment.state.ExperimentState`:
inputs, timeline, findings) plus what scenarios call: the run (``run_fault``,
``run_action``, ``not_judgeable``), the judgement (``default_checks``,
``latency_checks``, ``check``) and ``finalize``. The steps of the run are
:func:`faultkit.experiment.lifecycle.run_steps`; a harness action's window is
:class:`~faultkit.experiment.action.ActionWindow`.

Usable without pytest: build it with a node, its inventory, a run directory and a load
profile, ``await`` a run, judge it, finalize it (``testbed/truth.py`` does exactly that).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from faultkit.experiment.action import ActionWindow
from faultkit.experiment.lifecycle import RunPlan, Step, run_steps
from faultkit.experiment.outcomes import NotJudgeable
from faultkit.experiment.state import ExperimentState
from faultkit.inventory import Node
from faultkit.load import LoadProfile
from slo.accepted import apply_accepted
from slo.checks import CheckFn, Checks, checks_from_slo, judge, window_check, window_objectives
from slo.types import Measurement, Verdict

__all__ = ["During", "Experiment"]

#: a step a scenario runs inside the experiment (``during``, ``after_revert``,
#: ``run_action``'s action); a mapping it returns is added to the run's fault result
During = Callable[["Experiment"], Awaitable[Mapping[str, Any] | None]]


@dataclass
class Experiment(ExperimentState):
    """One scenario run on ``node``; the pytest plugin's ``experiment`` fixture makes one."""

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
        recovery (what else the scenario waits to see; a mapping it returns is added to the
        run's fault result, like ``during``'s).

        A fault that could not be applied (an act still failed after its retries: Docker
        refused it) is reverted and the run measured all the same: it returns, its verdict
        INCONCLUSIVE "the fault could not be applied: …" (already in ``verdict`` and
        ``verdict.json``; ``check`` keeps it INCONCLUSIVE), never a traceback.
        """
        # the faults pull in the Docker SDK and the platform: imported when one is run
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
        plan = RunPlan(
            kind=kind, describe=fault.describe(), params=params, hold_s=hold_s,
            baseline_s=baseline_s, load=load, neighbours=neighbours,
            recovery_deadline_s=recovery_deadline_s,
        )
        return await run_steps(
            self, fault, plan, during=self._step(during), after_revert=self._step(after_revert),
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
        plan = RunPlan(kind=kind, describe=describe, params=dict(params or {}), hold_s=0.0,
                       baseline_s=baseline_s)
        return await run_steps(self, window, plan, during=self._step(action))

    def _step(self, step: During | None) -> Step | None:
        """``step`` bound to this experiment, as the run's steps call it."""
        if step is None:
            return None

        def call() -> Awaitable[Mapping[str, Any] | None]:
            return step(self)

        return call

    def not_judgeable(self, reason: str) -> NotJudgeable:
        """For a scenario that cannot run its experiment on this node: ``raise
        experiment.not_judgeable(why)`` ends it INCONCLUSIVE (a failure that says what is
        missing), never a skip, which would read as green."""
        return self.abort(reason)

    # ------------------------------------------------------------------ judging
    def default_checks(self) -> Checks:
        """The node's SLOs as checks (detection, recovery, loss, error ratio, TTFT after the
        fault: :func:`slo.checks.checks_from_slo`)."""
        return checks_from_slo(self.slo)

    def latency_checks(self, window: str = "fault") -> Checks:
        """TTFT p95 and error ratio of ``window`` against the node's objectives
        (:func:`~slo.checks.window_objectives`; TTFT first: what a latency scenario is about)."""
        error_ratio, ttft_p95 = window_objectives(self.slo)
        return window_check(ttft_p95, window) & window_check(error_ratio, window)

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
        self.close_timeline()
        if not (self.run.measurement_json.exists() or self.run.verdict_json.exists()):
            return
        self.live.phase("report")
        # the renderer pulls in matplotlib: imported when a report is rendered
        from reports.render import render_incident

        render_incident(self.run.path)
