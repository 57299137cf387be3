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

from faultkit.model.events import DOCKER_PREFIX, EventKind, docker_kind
from faultkit.model.kinds import spec_of
from faultkit.model.records import Event, RequestRecord

__all__ = ["Effect", "MeasurementInputError", "earliest_effect", "effect_of", "fault_events",
           "fault_time"]


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


#: error classes that are the client's own doing, never evidence that the fault took effect
_NOT_THE_FAULTS = frozenset({"shed_client", "client_exhausted", "client_stalled", "cancelled"})


def earliest_effect(effect: Effect, timeline: Sequence[Event], node: str,
                    failures: Sequence[tuple[float, str]]) -> Effect:
    """``effect`` moved to the first sign of it after the harness's first act, when that
    came earlier: a request of the node's clients that failed (``failures``: (t_end, what),
    client-side errors excluded), the harness's probe failing (``health_fail``), or — for a
    fault that kills the engine — Docker's ``die`` of the node's container.

    Evidence of an effect can never come after the effect was observed (docs/definitions.md,
    "t_effect"): Docker's ``die`` is emitted after the reap, and a remote host's
    confirmation can lag by seconds, while the streams the kill cut ended at once. A fault
    whose injection spans the outage already takes effect at its act and is returned as is.
    """
    if effect.evidence in ("act", "observed"):
        return effect
    acts = fault_events(timeline, node, EventKind.ACT) or \
        fault_events(timeline, node, EventKind.INJECT_START)
    if not acts:
        return effect
    t_act = acts[0].t
    starts = fault_events(timeline, node, EventKind.INJECT_START)
    kind = str(starts[0].data.get("fault")) if starts else None
    spec = spec_of(kind)
    candidates: list[tuple[float, str]] = [
        (t, f"the first request that failed after the act ({what})")
        for t, what in failures if t_act <= t < effect.t]
    candidates += [(e.t, "the harness's probe failed (health_fail)") for e in timeline
                   if e.node == node and e.kind == EventKind.HEALTH_FAIL
                   and t_act <= e.t < effect.t]
    if spec is not None and spec.kills_the_engine:
        candidates += [(e.t, "Docker's 'die' event") for e in timeline
                       if e.node == node and e.kind == EventKind.DOCKER_DIE
                       and t_act <= e.t < effect.t]
    if not candidates:
        return effect
    t, what = min(candidates)
    return Effect(t, "observed",
                  f"{what}, {effect.t - t:.3f} s before {effect.detail}", effect.gaps)


def client_failures(records: Sequence[RequestRecord]) -> list[tuple[float, str]]:
    """(t_end, what) of each failed request that may show a fault's effect."""
    return [(r.t_end, f"request {r.id}: {r.error_class or r.status}") for r in records
            if r.status != "ok" and (r.error_class or "") not in _NOT_THE_FAULTS]
