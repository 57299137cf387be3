"""The evidence a diagnosis may rest on: this run's, about this container, with every act
of the harness told apart from what the engine did.

A container's state outlives a run: Docker keeps ``OOMKilled=true`` and the last exit code
until the container is recreated, so an earlier memory squeeze would read as this run's
OOM. And the harness sends signals of its own (a rollback's ``docker kill``, ``docker
stop`` escalating to SIGKILL after its timeout, a ``docker restart``, the revert's
``docker start``). The contract (docs/definitions.md, "Diagnosis"):

- **Deaths** are Docker's ``die`` events inside the run's window, one each (a
  ``restart_seen`` event restates a ``die`` and is never counted again).
- Each death has an **actor**: ``fault`` (the injected fault's own act: a kill, a stop, a
  restart), ``harness`` (a revert, a rollback, an intervention), ``docker_api`` (a signal
  sent through Docker's API outside any act the run recorded) or ``engine`` (nothing sent
  it: the engine exited, or the kernel killed it for memory). Only ``engine`` deaths are
  the engine's failure.
- Container **state flags** (``OOMKilled``, exit code) count only when the container's
  last stop (``FinishedAt``) falls inside the run's window; otherwise they are stale and
  listed as such, so a report can say why it ignored them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from faultkit.model.events import EventKind
from faultkit.model.kinds import spec_of
from faultkit.model.records import Event
from faultkit.model.timestamps import parse_rfc3339
from reports.load import RunData

Actor = Literal["engine", "fault", "harness", "docker_api"]

#: a Docker API ``kill`` this long before a ``die`` sent the signal that ended the process
#: (``docker stop`` waits 10 s by default between SIGTERM and SIGKILL)
SIGNAL_TO_DIE_S = 15.0
#: an action's effects (a start Docker reports, a die) may trail its end event this long
ACTION_TAIL_S = 5.0
#: Docker's ``oom`` (the kernel killed a process of the container) this long before a
#: ``die`` with no start between them caused it: vLLM's API server exits 3 seconds after
#: the kernel kills its engine core
OOM_TO_DIE_S = 30.0
#: the kinds whose inject phase acts on the container through Docker (stop, restart …)
_DOCKER_ACTING = frozenset({"stop", "restart", "node_restart", "host_restart", "rollout"})


@dataclass(frozen=True, slots=True)
class Death:
    """One ``die`` of the node's container inside the run's window."""

    t: float
    exit_code: int | None
    #: the kernel's OOM killer did it (Docker's ``oom`` event came just before)
    oom: bool
    actor: Actor
    #: who or what, in a report's words ("the rollback's docker kill (signal 9)")
    by: str
    #: the signals sent through Docker's API before it, oldest first
    signals: tuple[str, ...] = ()

    @property
    def stop_timeout(self) -> bool:
        """SIGTERM first, then SIGKILL: the engine did not exit on SIGTERM in time."""
        return len(self.signals) >= 2 and self.signals[0] in {"15", "SIGTERM"} \
            and self.signals[-1] in {"9", "SIGKILL"}

    def words(self, rel: str) -> str:
        code = "exit code not recorded" if self.exit_code is None else f"exit {self.exit_code}"
        oom = ", after Docker's oom event" if self.oom else ""
        return f"docker_die at {rel} ({code}{oom}): {self.by}"


@dataclass(frozen=True, slots=True)
class Span:
    """An interval in which the harness acted on the container (epoch seconds)."""

    actor: Actor
    what: str
    t_start: float
    t_end: float

    def holds(self, t: float) -> bool:
        return self.t_start <= t <= self.t_end + ACTION_TAIL_S


@dataclass(frozen=True, slots=True)
class ContainerFacts:
    """What the run's evidence says about the node's container, scoped to the run."""

    t_start: float | None
    t_end: float | None
    deaths: tuple[Death, ...]
    #: the container's last stop fell inside the window: its exit code / OOMKilled are ours
    state_is_this_runs: bool
    #: container.json flags ignored because they predate the run, in a report's words
    stale: tuple[str, ...]
    #: the container was replaced during the run (a rollout): its ID changed
    replaced: bool
    #: the same container's restart count rose (Docker's restart policy restarted it)
    policy_restarts: int | None
    #: the spans in which the harness or the fault acted on the container
    actions: tuple[Span, ...]

    def acting_at(self, t: float) -> Span | None:
        """The act that holds ``t``: the one that began last (a revert inside a fault's
        tail is the revert's)."""
        holding = [s for s in self.actions if s.holds(t)]
        return max(holding, key=lambda s: s.t_start) if holding else None

    @property
    def engine_deaths(self) -> tuple[Death, ...]:
        return tuple(d for d in self.deaths if d.actor == "engine")

    @property
    def oom_kills(self) -> tuple[Death, ...]:
        return tuple(d for d in self.engine_deaths if d.oom)


def fault_kind(data: RunData) -> str | None:
    """The injected fault's kind: run.json ``fault.kind``, else the first fault event's data."""
    fault = data.run.fault
    if fault is not None and fault.kind is not None:
        return fault.kind
    for ev in data.timeline:
        if ev.source == "fault" and isinstance(ev.data.get("fault"), str):
            return str(ev.data["fault"])
    return None


def fault_node(data: RunData) -> str | None:
    """The node the fault acted on, from its own events (an upstream behind a gateway)."""
    for ev in data.timeline:
        if ev.source == "fault" and ev.kind in (EventKind.INJECT_START, EventKind.ACT):
            return ev.node
    return None


def _window(data: RunData) -> tuple[float | None, float | None]:
    times = [e.t for e in data.timeline]
    start = data.run.t_start if data.run.t_start is not None else min(times, default=None)
    end = data.run.t_end if data.run.t_end is not None else max(times, default=None)
    return start, end


def _epoch(value: float | str | None) -> float | None:
    if isinstance(value, str):
        return parse_rfc3339(value)
    return value


def _spans(data: RunData, kind: str | None) -> list[Span]:
    """The harness's and the fault's own acts on the container, as intervals."""
    tl = data.timeline
    _, t_end = _window(data)
    last = t_end if t_end is not None else max((e.t for e in tl), default=0.0)

    def pairs(start_kind: str, end_kind: str, sources: Iterable[str]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        open_t: float | None = None
        for ev in tl:
            if ev.source not in sources:
                continue
            if ev.kind == start_kind and open_t is None:
                open_t = ev.t
            elif ev.kind == end_kind and open_t is not None:
                out.append((open_t, ev.t))
                open_t = None
        if open_t is not None:
            out.append((open_t, last))
        return out

    spans: list[Span] = []
    spec = spec_of(kind)
    docker_kill = bool(data.run.fault and data.run.fault.params.get("docker_kill"))
    if kind in _DOCKER_ACTING or (kind == "kill" and docker_kill):
        what = spec.phrase(data.run.fault.params if data.run.fault else {}) if spec else "fault"
        spans += [Span("fault", f"the injected {kind} ({what})", a, b)
                  for a, b in pairs(EventKind.INJECT_START, EventKind.INJECT_END, ("fault",))]
    spans += [Span("harness", "the harness's revert of the fault", a, b)
              for a, b in pairs(EventKind.REVERT_START, EventKind.REVERT_END, ("fault",))]
    spans += [Span("harness", "the rollback", a, b)
              for a, b in pairs(EventKind.ROLLBACK_START, EventKind.ROLLBACK_DONE,
                                ("fault", "harness"))]
    for ev in tl:
        if ev.kind in (EventKind.HARNESS_INTERVENED, EventKind.START_AFTER_DEADLINE):
            spans.append(Span("harness", f"the harness ({ev.data.get('action') or ev.kind})",
                              ev.t, ev.t))
    return spans


def _attribute(die: Event, tl: list[Event], kind: str | None, spans: list[Span],
               oom: bool) -> tuple[Actor, str, tuple[str, ...]]:
    """Who ended the process that died at ``die.t``."""
    previous_die = max((e.t for e in tl if e.kind == EventKind.DOCKER_DIE and e.t < die.t),
                       default=float("-inf"))
    signals = [e for e in tl
               if e.kind == "docker_kill" and previous_die < e.t <= die.t
               and die.t - e.t <= SIGNAL_TO_DIE_S]
    sent = tuple(str(e.data.get("signal", "?")) for e in signals)
    spec = spec_of(kind)
    if signals:
        first = signals[0].t
        holding = [s for s in spans if s.holds(first)]
        span = max(holding, key=lambda s: s.t_start) if holding else None
        how = "docker kill" if len(sent) == 1 else "docker stop"
        signal_words = f"{how} (signal {' then '.join(sent)})"
        if span is not None:
            return span.actor, f"{span.what}: {signal_words}", sent
        return "docker_api", f"a signal sent through Docker's API outside the run's acts: " \
            f"{signal_words}", sent
    # no signal went through Docker: the harness's acts all do (stop, kill, rm, restart),
    # so this process ended by itself, by the kernel, or by the fault's own signal
    acts = [e.t for e in tl if e.source == "fault" and e.kind == EventKind.ACT and e.t <= die.t]
    earlier = [e for e in tl if e.kind == EventKind.DOCKER_DIE and acts and acts[0] <= e.t < die.t]
    if spec is not None and spec.kills_the_engine and acts and not earlier and not oom:
        return "fault", f"the injected {kind} ({die.t - acts[-1]:.1f} s after its act)", sent
    if oom:
        return "engine", "the kernel's OOM killer (Docker's oom event just before)", sent
    return "engine", "the engine's own exit: no signal was sent through Docker or the harness", \
        sent


def container_facts(data: RunData) -> ContainerFacts:
    """The node's container, as this run's evidence shows it (module docstring)."""
    kind = fault_kind(data)
    t_start, t_end = _window(data)
    tl = sorted(data.timeline, key=lambda e: e.t)
    spans = _spans(data, kind)
    deaths: list[Death] = []
    last_oom: float | None = None  # since the container last started
    for ev in tl:
        if ev.kind == EventKind.DOCKER_OOM:
            last_oom = ev.t
        if ev.kind == EventKind.DOCKER_START:
            last_oom = None
        if ev.kind != EventKind.DOCKER_DIE:
            continue
        oom = ev.data.get("oom_killed") is True or (
            last_oom is not None and 0 <= ev.t - last_oom <= OOM_TO_DIE_S)
        actor, by, sent = _attribute(ev, tl, kind, spans, oom)
        if oom and last_oom is not None and ev.t - last_oom > 1.0:
            by += f" — the kernel killed a process of the container {ev.t - last_oom:.1f} s " \
                "before it exited"
        code = ev.data.get("exit_code")
        deaths.append(Death(ev.t, code if isinstance(code, int) else None, oom, actor, by, sent))
    before, after = data.container.before, data.container.after
    finished = _epoch(after.finished_at)
    inside = (finished is not None and t_start is not None and t_end is not None
              and t_start <= finished <= t_end + ACTION_TAIL_S)
    stale: list[str] = []
    if not inside:
        for name, state in (("before", before), ("after", after)):
            if state.oom_killed:
                stale.append(f"container.json {name}.oom_killed = true predates this run "
                             "(the container's last stop is outside the run's window)")
                break
    replaced = bool(before.get("id") and after.get("id") and before.get("id") != after.get("id"))
    policy_restarts = None
    if not replaced and before.restart_count is not None and after.restart_count is not None:
        # `docker restart` and a daemon restart reset the count: only a rise is the policy's
        policy_restarts = max(0, after.restart_count - before.restart_count)
    return ContainerFacts(t_start, t_end, tuple(deaths), inside, tuple(stale), replaced,
                          policy_restarts, tuple(spans))
