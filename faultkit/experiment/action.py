"""A harness-driven action's window on the timeline, marked as a fault's would be.

:meth:`Experiment.run_action <faultkit.experiment.Experiment.run_action>` runs an
action (malformed requests, say) as the injection: :class:`ActionWindow` is the async
context around it. Contract: entering writes ``inject_start`` (the action takes effect
when it starts: ``spans_outage``), an ``act`` and ``inject_end``; leaving writes
``revert_start`` and ``revert_end`` — all ``source="fault"`` events of the experiment's
node carrying the action's kind and parameters. ``result`` stays empty.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from faultkit.inventory import Node
from faultkit.model.events import EventKind
from faultkit.model.records import Event


class Timeline(Protocol):
    """What the window writes to: the experiment (its node and its timeline)."""

    @property
    def node(self) -> Node: ...

    def emit(self, event: Event) -> None: ...


class ActionWindow:
    """Marks a harness action's window on the timeline as a fault would (inject/revert events)."""

    def __init__(self, experiment: Timeline, kind: str, params: dict[str, Any]) -> None:
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

    async def __aenter__(self) -> ActionWindow:
        # the action is the fault: it takes effect when it starts (docs/definitions.md)
        self.data["effect"] = {"docker_actions": [], "required": "", "spans_outage": True}
        self._emit(EventKind.INJECT_START)
        self._emit(EventKind.ACT, what=f"start {self.data['fault']}")
        self._emit(EventKind.INJECT_END)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._emit(EventKind.REVERT_START)
        self._emit(EventKind.REVERT_END)

