"""What one run holds while it runs: its inputs, its timeline, and what it found.

:class:`ExperimentState` is the data the run's steps (:mod:`faultkit.experiment.lifecycle`)
read and write, with the few operations every step shares: writing the timeline
(:meth:`~ExperimentState.emit`, :meth:`~ExperimentState.note`; also the observer's
``EventSink``), ``run.json`` (:meth:`~ExperimentState.write_run_info`) and ending the run
INCONCLUSIVE before injecting (:meth:`~ExperimentState.abort`).
:class:`~faultkit.experiment.Experiment` is this state plus what scenarios call.

Time base: ``t_start`` and every event's ``t`` are epoch seconds; ``clock_offset`` is
wall − monotonic, so a wall-clock step during the run is seen at its end
(:func:`faultkit.model.timestamps.clock_step_gap`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from faultkit.experiment.live import LiveStatus
from faultkit.experiment.node_evidence import NodeEvidence, first_run_info
from faultkit.experiment.outcomes import NotJudgeable
from faultkit.inventory import Inventory, Node, SLOSettings
from faultkit.load import BackgroundLoad, LoadProfile
from faultkit.model.events import EventKind
from faultkit.model.records import Event, JsonlWriter
from faultkit.model.timestamps import wall_minus_monotonic
from faultkit.rundir import RunDir
from faultkit.runtime.loopwatch import LoopWatch
from slo.types import Measurement, Verdict

__all__ = ["ExperimentState"]

log = logging.getLogger("faultkit.experiment")


@dataclass
class ExperimentState:
    """The state of one run on ``node``; its files are in ``run``."""

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
    #: the node's background load while it runs (its ``records`` are the run's so far)
    load: BackgroundLoad | None = None
    #: the node that was faulted when it is not ``node`` (``run_fault(on=…)``)
    fault_node: Node | None = None
    t_start: float = field(default_factory=time.time)
    #: what the terminal's live line shows; fed by every timeline event, every ledger record
    #: of the node's load, and the phases of the run
    live: LiveStatus = field(default_factory=LiveStatus)
    #: wall − monotonic clock, at creation and again at the scenario's start: a step by the
    #: end makes the run INCONCLUSIVE
    clock_offset: float = field(default_factory=wall_minus_monotonic)
    #: the container's state before injecting (``container.json``'s ``before``)
    container_before: dict[str, Any] | None = None
    #: the run's loop watch, from the start of its load (``loop-stalls.json``)
    loop_watch: LoopWatch | None = None
    _timeline: JsonlWriter | None = field(default=None, repr=False)

    @property
    def slo(self) -> SLOSettings:
        """The node's objectives (the inventory's defaults under its overrides)."""
        return self.inventory.slo_for(self.node)

    @property
    def evidence(self) -> NodeEvidence:
        """The node's container evidence for this run (state, log tail, clock)."""
        return NodeEvidence(self.node, self.inventory, self.t_start)

    @property
    def effect_node(self) -> str:
        """The node whose fault events give t_effect (the faulted node)."""
        return (self.fault_node or self.node).name

    # ------------------------------------------------------------------ the timeline
    def emit(self, event: Event) -> None:
        """Append an event to the timeline (``timeline.jsonl`` and :attr:`events`)."""
        if self._timeline is None:
            self._timeline = self.run.timeline_writer()
        self._timeline.write(event)
        self.events.append(event)
        self.live.on_event(event)

    def note(self, kind: str, **data: Any) -> None:
        """Emit a ``harness`` event of ``kind`` on the node, now."""
        self.emit(Event(t=time.time(), source="harness", kind=kind, node=self.node.name, data=data))

    def write(self, obj: Event) -> None:
        """The observer's ``EventSink``: what it sees goes on the timeline."""
        self.emit(obj)

    def close_timeline(self) -> None:
        """Close ``timeline.jsonl`` (a later event opens it again, appending); a close the
        filesystem refuses (a full disk) is logged: the verdict already says what is missing."""
        if self._timeline is not None:
            try:
                self._timeline.close()
            except OSError as exc:
                log.warning("timeline %s is incomplete: %s", self.run.timeline_jsonl, exc)
            self._timeline = None

    # ------------------------------------------------------------------ run.json, endings
    def write_run_info(self, **changes: Any) -> None:
        """Write ``run.json``: what ran, where, with which settings, the first time; then
        ``changes`` (typed :class:`~faultkit.rundir.RunInfo` fields) over what is there."""
        info = self.run.info()
        if not info.captured:
            info = first_run_info(
                scenario=self.scenario, case=self.case, node=self.node,
                inventory=self.inventory, load_profile=self.load_profile,
                t_start=self.t_start,
            )
        self.run.write_info(info.updated(**changes))

    def abort(self, reason: str) -> NotJudgeable:
        """End the run before injecting: INCONCLUSIVE, with ``reason`` as the missing
        evidence; the caller raises what this returns.

        The verdict is set in memory first, then written with the timeline and run.json
        (``aborted``) as far as the run directory lets it: a full filesystem (the reason
        itself, maybe) leaves the verdict, and the test's outcome, INCONCLUSIVE all the same."""
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
            self.write_run_info(aborted=reason)
        except OSError as exc:
            log.warning("the run directory %s holds only part of this run (%s): %s",
                        self.run.path, exc, reason)
        return NotJudgeable(reason)
