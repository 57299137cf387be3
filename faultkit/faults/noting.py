"""What a fault says on the timeline: its events and the evidence that it took effect.

:class:`FaultNotes` is a part of :class:`faultkit.faults.base.Fault` (which sets the
attributes declared here). :meth:`FaultNotes.emit` sends one ``source="fault"`` event to
the timeline sink; a sink that raises is logged and never leaves a fault applied.

Evidence that the fault took effect (``t_effect``, docs/definitions.md). Each fault class
declares what proves it (``effect_docker_actions``, ``effect_required``, ``spans_outage``);
``inject_start`` carries that declaration as ``data["effect"]`` so measurement reads it from
the timeline alone. ``_apply`` calls :meth:`acting` just before its first disruptive act
(event ``act``) and :meth:`effect_in_place` once its mechanism is confirmed (event
``effect``, e.g. the iptables rule was added); :meth:`effect_observed` records the moment
the node's clients lost it, seen directly (event ``effect``, evidence ``observed``, dated
by the observation: :mod:`faultkit.faults.cutwatch`); :meth:`effect_missing` (event ``no_effect``)
records that the mechanism demonstrably did nothing. When the harness itself had to bring
the node back, the fault emits ``harness_intervened``.

Event times are Unix epoch seconds; durations in ``result`` are monotonic-clock seconds.
Event data always carries ``{"fault": kind, "id": fault id, "params": {...}}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar

from faultkit.inventory import Node
from faultkit.model.events import EventKind
from faultkit.model.records import Event

#: the faults' logger, named as before the base class was split into modules
log = logging.getLogger("faultkit.faults.base")

Emit = Callable[[Event], None]


class FaultNotes:
    """Describing a fault and emitting its events (attributes set by ``Fault``)."""

    kind: ClassVar[str]
    effect_docker_actions: ClassVar[tuple[str, ...]]
    effect_required: ClassVar[str]
    spans_outage: ClassVar[bool]
    node: Node
    id: str
    params: dict[str, Any]
    mode: str
    timeline: Emit | None
    _acted: bool

    # description --------------------------------------------------------------------
    def describe(self) -> str:
        """One line: what this fault does to which node with which params."""
        params = ", ".join(f"{k}={v}" for k, v in self.params.items() if v is not None)
        target = self.node.docker.container if self.node.docker else self.node.base_url
        return f"{self.kind} on {self.node.name} ({target}){': ' + params if params else ''}" + (
            f" — {self.what()}" if self.what() else ""
        )

    def what(self) -> str:
        """A short phrase of what the fault does (subclasses override)."""
        return ""

    # events -------------------------------------------------------------------------
    def emit(self, kind: str, **data: Any) -> None:
        """One fault event, dated now."""
        self._emit_at(time.time(), kind, data)

    def _emit_at(self, t: float, kind: str, data: dict[str, Any]) -> None:
        """One fault event dated at epoch ``t`` (evidence is dated by its own source)."""
        payload = {"fault": self.kind, "id": self.id, "params": dict(self.params), **data}
        if self.mode:
            payload.setdefault("mode", self.mode)
        event = Event(t=t, source="fault", kind=kind, node=self.node.name, data=payload)
        if self.timeline is not None:
            try:
                self.timeline(event)
            except Exception:  # a broken timeline sink must not leave a fault applied
                log.exception("timeline sink failed on %s", kind)

    def effect_spec(self) -> dict[str, Any]:
        """What proves this fault took effect (written into ``inject_start``)."""
        return {
            "docker_actions": list(self.effect_docker_actions),
            "required": self.effect_required,
            "spans_outage": self.spans_outage,
        }

    def acting(self, what: str, **data: Any) -> None:
        """Mark the first disruptive act (event ``act``, once), just before doing it."""
        if not self._acted:
            self._acted = True
            self.emit(EventKind.ACT, what=what, **data)

    def effect_in_place(self, what: str, **data: Any) -> None:
        """Record that the fault's mechanism is confirmed in place (event ``effect``)."""
        self.emit(EventKind.EFFECT, evidence="mechanism", what=what, **data)

    def effect_observed(self, t: float, what: str, **data: Any) -> None:
        """Record the effect as the node's clients saw it, at epoch ``t`` (event ``effect``,
        evidence ``observed``: it outranks Docker's events, docs/definitions.md)."""
        self._emit_at(t, EventKind.EFFECT, {"evidence": "observed", "what": what, **data})

    def effect_missing(self, why: str) -> None:
        """Record that the mechanism demonstrably did nothing (run becomes INCONCLUSIVE)."""
        self.emit(EventKind.NO_EFFECT, why=why)

    def intervened(self, action: str, why: str) -> None:
        """Record that the harness had to act to bring the node back (not self-recovery)."""
        self.emit(EventKind.HARNESS_INTERVENED, action=action, why=why)

