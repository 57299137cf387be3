"""What brought the node back, step by step, from the timeline and container state.

Mechanisms recognised (each only on evidence): the harness itself
(``fault/harness_intervened``: e.g. it started a container the restart policy left down —
then the recovery was not the system's own, and a start Docker reports right after it is
the harness's, not the policy's), Docker restart policy (restart_count went up, or a
``harness/restart_seen`` event), rollback (``harness/rollback_start`` /
``rollback_done``), fault revert (reconnect, unpause, limit restored: ``fault/revert_*``),
manual action (``harness/manual_*``). All times are epoch seconds; durations seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from faultkit.model.events import MANUAL_PREFIX, EventKind
from faultkit.model.kinds import fault_phrase, spec_of
from faultkit.model.records import Event
from reports.evidence import Span, container_facts, fault_kind
from reports.load import RunData
from reports.outage import NOT_APPLICABLE, no_outage
from reports.server_estimate import steady_state_basis, unwatched

#: a container start Docker reports this soon after the harness acted is the harness's
_HARNESS_START_S = 5.0


@dataclass(frozen=True, slots=True)
class Step:
    what: str
    t_start: float | None
    t_end: float | None
    evidence: str

    @property
    def duration_s(self) -> float | None:
        if self.t_start is None or self.t_end is None:
            return None
        return self.t_end - self.t_start


@dataclass(frozen=True, slots=True)
class Recovery:
    mechanisms: tuple[str, ...]
    steps: tuple[Step, ...]
    recovered: bool | None  # None: measurement not captured


def _first(events: list[Event], source: str, kind: str, after: float | None = None) -> Event | None:
    for ev in events:
        if ev.source == source and ev.kind == kind and (after is None or ev.t >= after):
            return ev
    return None


def _params(data: RunData) -> dict[str, object]:
    return dict(data.run.fault.params) if data.run.fault is not None else {}


#: Docker's events that undo an act on a container (what a postmortem says brought it back)
_UNDOING = frozenset({EventKind.DOCKER_START, "docker_unpause", "docker_network_connect"})


def analyse(data: RunData) -> Recovery:
    tl = data.timeline
    mechanisms: list[str] = []
    steps: list[Step] = []
    inj_s = _first(tl, "fault", EventKind.INJECT_START)
    inj_e = _first(tl, "fault", EventKind.INJECT_END)
    t_effect = data.t_effect
    first = inj_s or inj_e
    if first is not None:
        steps.append(
            Step(
                f"fault injected ({fault_kind(data) or 'kind not recorded'})",
                first.t,
                inj_e.t if inj_e else None,
                "fault/inject_start → inject_end",
            )
        )
    # the fault acts from inject_start (e.g. a request fault's first requests), so evidence
    # of its effect counts from there, not from inject_end
    t_acting = first.t if first is not None else t_effect
    interventions = [
        e for e in tl if e.source == "fault" and e.kind == EventKind.HARNESS_INTERVENED
    ]
    for iv in interventions:
        mechanisms.append(f"the harness ({iv.data.get('action')}) — not the system's own recovery")
        steps.append(Step(f"the harness intervened: {iv.data.get('why')}", iv.t, None,
                          "fault/harness_intervened"))

    def by_harness(event: Event) -> bool:
        return any(0 <= event.t - iv.t <= _HARNESS_START_S for iv in interventions)

    refused = _first(tl, "fault", EventKind.NOT_APPLIED)
    if refused is not None and refused.data.get("applied") == "none":
        # nothing was done to the node, so nothing brought it back; the revert only ran the
        # undo of a fault that never took hold
        return Recovery(("nothing: the fault was never applied, so the node was not "
                         "impaired by it",), tuple(steps), None)
    facts = container_facts(data)
    # who started the container after the effect: the restart policy only when the same
    # container's restart count rose; a start inside the harness's or the fault's own act
    # is theirs (a revert's docker start, a rollback, a docker restart)
    starts = [e for e in tl if e.kind == EventKind.DOCKER_START
              and (t_acting is None or e.t >= t_acting) and not by_harness(e)]
    spec = spec_of(fault_kind(data))

    rolled_back = any(e.kind == EventKind.ROLLBACK_START for e in tl)

    def told_elsewhere(span: Span) -> bool:
        """The rollback and a fixing revert have steps of their own; a rollout that was
        rolled back started its candidate, which is not what brought the node back."""
        return span.what == "the rollback" or (
            span.what == "the harness's revert of the fault" and spec is not None
            and spec.revert_is_the_fix) or (span.actor == "fault" and rolled_back)

    own_start = next(((e, span) for e in starts if (span := facts.acting_at(e.t)) is not None
                      and not told_elsewhere(span)), None)
    if facts.policy_restarts:
        restarts = [e for e in tl if e.kind == EventKind.RESTART_SEEN
                    and (t_acting is None or e.t >= t_acting) and not by_harness(e)
                    and not any(span.holds(e.t) for span in facts.actions)]
        b, a = data.container.before.restart_count, data.container.after.restart_count
        mechanisms.append(f"Docker's restart policy (the same container's restart_count "
                          f"{b} → {a})")
        steps.append(
            Step("Docker restart policy restarted the container",
                 restarts[0].t if restarts else None, restarts[-1].t if restarts else None,
                 "container.json restart_count (same container ID)"
                 + (", harness/restart_seen events" if restarts else ""))
        )
    elif own_start is not None:
        event, span = own_start
        # a host or node restart's revert only waits: whatever started then, its act did
        by_the_fault = span.actor == "fault" or (spec is not None and spec.restores_itself)
        who = (f"the fault's own action ({fault_phrase(fault_kind(data), _params(data))})"
               if by_the_fault else span.what)
        mechanisms.append(f"{who} started the container (docker start at "
                          f"{event.t - (t_effect or event.t):+.1f} s)")
    rb_s = _first(tl, "fault", EventKind.ROLLBACK_START, t_acting) or _first(
        tl, "harness", EventKind.ROLLBACK_START, t_acting
    )
    if rb_s is not None:
        rb_d = _first(tl, rb_s.source, EventKind.ROLLBACK_DONE, rb_s.t)
        mechanisms.append("rollback to the previous config")
        steps.append(
            Step(
                "rollback to the previous config",
                rb_s.t,
                rb_d.t if rb_d else None,
                f"{rb_s.source}/rollback_start → rollback_done"
                if rb_d
                else f"{rb_s.source}/rollback_start (no rollback_done recorded)",
            )
        )
    rv_s = _first(tl, "fault", EventKind.REVERT_START, t_effect)
    if rv_s is not None:
        rv_e = _first(tl, "fault", EventKind.REVERT_END, rv_s.t)
        kind = fault_kind(data) or ""
        word = (spec.revert_words if spec else "") or f"revert {kind or 'the fault'}"
        # reverting a kill, a rollout or a request fault is bookkeeping, not what fixed it
        if spec is not None and spec.revert_is_the_fix:
            mechanisms.append(f"the harness's revert of the fault ({word})")
            steps.append(
                Step(
                    f"the harness's revert: {word}",
                    rv_s.t,
                    rv_e.t if rv_e else None,
                    "fault/revert_start → revert_end",
                )
            )
    manual = [e for e in tl if e.source == "harness" and e.kind.startswith(MANUAL_PREFIX)]
    if manual:
        mechanisms.append("manual action")
        steps.append(
            Step(
                f"manual action ({manual[0].kind})", manual[0].t, None, f"harness/{manual[0].kind}"
            )
        )
    anchor = max((s.t_end for s in steps if s.t_end is not None), default=t_effect)
    ready = _first(tl, "observer", EventKind.HEALTH_OK, anchor)
    if ready is not None:
        steps.append(
            Step(
                "readiness endpoint answered OK",
                anchor,
                ready.t,
                "observer/health_ok after the last recovery action",
            )
        )
    m = data.measurement
    if m is None:
        return Recovery(tuple(mechanisms), tuple(steps), None)
    if no_outage(fault_kind(data), m):
        # a request-level fault the node served through: there was nothing to recover from
        mechanisms = mechanisms or [f"{NOT_APPLICABLE} (the node kept serving)"]
        return Recovery(tuple(mechanisms), tuple(steps), True)
    # no harness watched the node (a postmortem): recovery is what monitoring and Docker saw
    no_client = "; no client recorded requests" if unwatched(m) else ""
    if m.t_recovered is not None:
        steps.append(
            Step(
                f"steady state restored ({steady_state_basis(m)}{no_client})",
                m.t_effect,
                m.t_recovered,
                "measurement.json t_recovered",
            )
        )
        undone = [e for e in tl if e.kind in _UNDOING and m.t_effect <= e.t <= m.t_recovered]
        if not mechanisms and unwatched(m) and undone:
            mechanisms.append(
                "Docker's own events: " + ", ".join(
                    f"{e.kind} at {e.t - m.t_effect:+.1f} s" for e in undone[:3])
                + " (its restart policy or someone through Docker's API: Docker does not "
                "record which)")
        if not mechanisms:
            mechanisms.append("no recorded action: the node recovered on its own")
    else:
        mechanisms.append("not recovered by the end of the window: manual intervention needed")
    return Recovery(tuple(mechanisms), tuple(steps), m.t_recovered is not None)
