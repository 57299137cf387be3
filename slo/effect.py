"""t_effect: the moment a fault took effect, from the best evidence on the timeline.

The definition is docs/definitions.md's ("t_effect"), applied in this order: the effect as
the node's clients saw it, observed directly by the fault (an ``effect`` event whose
``evidence`` is ``observed``, dated by the observation: the cut watch of ``partition
mode=refuse``), Docker's own event for the node's container (``docker_die``,
``docker_pause``, … as the fault's ``inject_start`` declares in ``data["effect"]``), the
fault's confirmation that its mechanism is in place (``effect``), and only then the
harness's call (``act``, else ``inject_start``). Faults whose injection spans the outage
(rollout, stop, restart, node restart, memory squeeze, floods) take effect at their first
disruptive act. Missing
evidence the fault declared required is returned as gaps: the verdict is then INCONCLUSIVE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from faultkit.events import DOCKER_PREFIX, EventKind, docker_kind
from faultkit.records import Event

__all__ = ["Effect", "MeasurementInputError", "effect_of", "fault_events", "fault_time"]


class MeasurementInputError(ValueError):
    """The timeline lacks what measurement needs (e.g. no ``inject_start`` event)."""


def fault_events(timeline: Sequence[Event], node: str, kind: str) -> list[Event]:
    return sorted(
        (e for e in timeline if e.source == "fault" and e.kind == kind and e.node in (None, node)),
        key=lambda e: e.t,
    )


def fault_time(timeline: Sequence[Event], node: str, kind: str) -> float | None:
    events = fault_events(timeline, node, kind)
    return events[0].t if events else None


# --------------------------------------------------------------------------- t_effect


@dataclass(frozen=True, slots=True)
class Effect:
    """When the fault took effect, from which evidence, and what evidence is missing."""

    t: float
    evidence: str  # observed | docker_event | mechanism | act | call
    detail: str
    gaps: tuple[str, ...] = ()


def effect_of(timeline: Sequence[Event], node: str) -> Effect:
    """t_effect of the first fault injected on ``node`` (module docstring, definition)."""
    starts = fault_events(timeline, node, EventKind.INJECT_START)
    if not starts:
        raise MeasurementInputError(
            f"no 'inject_start' fault event for node {node!r} in the timeline: "
            "was the fault run inside the observation window?"
        )
    start = starts[0]
    spec: dict[str, Any] = start.data.get("effect") or {}
    kind = str(start.data.get("fault") or "fault")
    acts = [e for e in fault_events(timeline, node, EventKind.ACT) if e.t >= start.t]
    t_act = acts[0].t if acts else None
    gaps = [
        f"the fault did not take effect: {e.data.get('why')}"
        for e in fault_events(timeline, node, EventKind.NO_EFFECT)
    ]
    actions = [str(a) for a in spec.get("docker_actions") or ()]
    docker = sorted(
        (
            e
            for e in timeline
            if e.node == node and e.kind in {docker_kind(a) for a in actions} and e.t >= start.t
        ),
        key=lambda e: e.t,
    )
    confirmed = [e for e in fault_events(timeline, node, EventKind.EFFECT) if e.t >= start.t]
    observed = [e for e in confirmed if e.data.get("evidence") == "observed"]
    mechanism = [e for e in confirmed if e.data.get("evidence") != "observed"]
    required = str(spec.get("required") or "")
    if required == "docker" and not docker:
        gaps.append(
            f"no evidence that the fault took effect: Docker recorded no "
            f"{' / '.join(repr(a) for a in actions)} event for the node's container "
            f"after {kind} was injected"
        )
    if required == "mechanism" and not mechanism:
        gaps.append(
            f"no evidence that the fault took effect: {kind} never confirmed its mechanism in place"
        )
    if spec.get("spans_outage"):
        t = t_act if t_act is not None else start.t
        what = acts[0].data.get("what") if acts else "inject() called"
        return Effect(t, "act", f"first disruptive act: {what}", tuple(gaps))
    if observed:
        return Effect(observed[0].t, "observed", str(observed[0].data.get("what") or
                                                     "the clients' view"), tuple(gaps))
    if docker:
        first = docker[0]
        detail = f"Docker '{first.kind.removeprefix(DOCKER_PREFIX)}' event"
        if "exit_code" in first.data:
            detail += f" (exit code {first.data['exit_code']})"
        return Effect(first.t, "docker_event", detail, tuple(gaps))
    if mechanism:
        return Effect(
            mechanism[0].t,
            "mechanism",
            str(mechanism[0].data.get("what") or "mechanism in place"),
            tuple(gaps),
        )
    if t_act is not None:
        return Effect(t_act, "call", f"the harness's call: {acts[0].data.get('what')}", tuple(gaps))
    return Effect(start.t, "call", "inject() called (no better evidence)", tuple(gaps))
