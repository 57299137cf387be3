"""The recovery of a restarted engine, in phases, each dated from evidence.

When the node's container started again during the run after the fault took effect (a
kill, an engine death, an OOM kill, a rollout, a cold start, a node or host restart — or,
in a postmortem, an outage nobody injected), its way back is cut at these milestones,
those the run has evidence for, in time order:

==================  ====================================================================
milestone           evidence
==================  ====================================================================
the fault's effect  ``measurement.json`` ``t_effect``
process reaped      Docker's first ``die`` from then on (``docker_die``)
container started   Docker's next ``start`` (the restart policy's, or the harness's)
engine initialised  the engine's first start-up line, dated by Docker (``startup_log``)
weights loaded      the engine's weights-loaded line, dated by Docker
API server started  the engine's "server started" line, dated by Docker
``/health`` 200     the observer's first ``health_ok`` after the start
first token         the fault's ``first_token`` event (a tiny chat request served)
steady state        ``measurement.json`` ``t_recovered``
==================  ====================================================================

A phase runs from one milestone to the next; a milestone without evidence is left out,
and its phase merges into the next (the report says which evidence each phase rests on).
The way back ends at the steady state: a milestone after it (a first-token probe sent
after the users' own requests were answered again) is not part of it.
Detection (``t_effect`` → ``t_detect``) runs beside them and is given apart. The engine's
lines are matched in the start-up log Docker timestamped (``container.json``
``startup_log``), so their times do not depend on each engine's own log format.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from faultkit.model.events import EventKind
from reports.evidence import fault_kind, fault_node
from reports.load import RunData
from reports.server_estimate import steady_state_basis

#: an engine's first line of its own initialisation, once its process started (vLLM's engine
#: core, SGLang's weight loading, llama.cpp's model loader, the simulator)
ENGINE_INIT_RE = re.compile(
    r"Initializing a V1 LLM engine|simnode \w+ personality|Load weight begin"
    r"|llama_model_loader: loaded meta data|load_model: loading model")
#: an engine's line once its weights are loaded (vLLM, SGLang, llama.cpp, the simulator)
WEIGHTS_LOADED_RE = re.compile(
    r"Model loading took|Loading weights took|Loading model weights took|Load weight end"
    r"|main: model loaded|load_tensors: .*buffer size")
#: an engine's line once it serves (vLLM's API server, SGLang, llama.cpp)
ENGINE_READY_RE = re.compile(
    r"Starting vLLM (?:API )?server|Application startup complete|fired up and ready"
    r"|server is listening on")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z\s(.*)$")


@dataclass(frozen=True, slots=True)
class Phase:
    """From one milestone to the next (epoch seconds) and the evidence of its end."""

    name: str
    t_start: float
    t_end: float
    evidence: str

    @property
    def duration_s(self) -> float:
        return self.t_end - self.t_start


def _stamped(line: str) -> tuple[float, str] | None:
    """``(epoch seconds, text)`` of a line Docker timestamped (RFC 3339 with nanoseconds)."""
    m = _STAMP.match(line)
    if m is None:
        return None
    whole = datetime.fromisoformat(m.group(1) + "+00:00").timestamp()
    return whole + float(f"0.{m.group(2) or '0'}"), m.group(3)


def _first_line(data: RunData, pattern: re.Pattern[str], after: float) -> float | None:
    for line in (data.container.startup_log or "").splitlines():
        stamped = _stamped(line)
        if stamped is not None and stamped[0] >= after and pattern.search(stamped[1]):
            return stamped[0]
    return None


def _times(data: RunData, kind: str, after: float, until: float = math.inf,
           source: str | None = None) -> list[float]:
    """When the node's ``kind`` events (of ``source``, if given) happened in
    ``[after, until]``, oldest first."""
    node = data.run.node
    return [e.t for e in data.timeline if e.kind == kind and after <= e.t <= until
            and (source is None or e.source == source)
            and (node is None or e.node in (None, node))]


def _first(times: list[float]) -> float | None:
    return times[0] if times else None


#: kinds whose node comes back as the same engine restarting; a rollout's way back is its
#: rollback (the recovery steps), not the candidate's start
RESTARTING_KINDS = frozenset({"kill", "kill_process", "stop", "restart", "node_restart",
                              "host_restart", "memory_squeeze", "oversized_context"})


def recovery_phases(data: RunData) -> list[Phase]:
    """The phases of a restarted engine's way back (module docstring); empty when the
    node's container did not start again after the fault took effect, the fault was on
    another node (a gateway's upstream) or of another kind, or the run was not measured."""
    m = data.measurement
    kind = fault_kind(data)
    other = fault_node(data)
    # nothing injected (a postmortem's outage): the node's own start after it is its way back
    if (m is None or m.t_effect is None or (kind is not None and kind not in RESTARTING_KINDS)
            or (other is not None and other != data.run.node)):
        return []
    end = m.t_recovered if m.t_recovered is not None else m.t_window_end
    starts = _times(data, EventKind.DOCKER_START, m.t_effect, end)
    if not starts:
        return []
    started = starts[-1]  # the start the node came back from (a loop restarts it again)
    deaths = _times(data, EventKind.DOCKER_DIE, m.t_effect, started)
    died = deaths[-1] if deaths else None
    init = _first_line(data, ENGINE_INIT_RE, started)
    weights = _first_line(data, WEIGHTS_LOADED_RE, init if init is not None else started)
    ready = _first_line(data, ENGINE_READY_RE, weights if weights is not None else started)
    health = _first(_times(data, EventKind.HEALTH_OK, started, source="observer"))
    token = _first(_times(data, EventKind.FIRST_TOKEN, started, source="fault"))
    loop = len(deaths) - 1
    milestones: list[tuple[float | None, str, str]] = [
        (died, f"a restart loop ({loop} more death(s) and restart(s))"
         if loop > 0 else "until the container exited",
         "Docker's die events" if loop > 0 else "Docker's die"),
        (started, "until it started again",
         "Docker's start (the restart policy's, the harness's or the fault's)"),
        (init, "until the engine initialised", "the engine's first start-up line"),
        (weights, "until the weights were loaded", "the engine's weights-loaded line"),
        (ready, "until the API server started", "the engine's server-started line"),
        (health, "until /health 200", "the observer's first health_ok"),
        (token, "until the first token", "the fault's first_token probe"),
        (m.t_recovered, "until steady state",
         f"measurement.json t_recovered ({steady_state_basis(m)})"),
    ]
    phases: list[Phase] = []
    t_prev = m.t_effect
    for t, name, evidence in milestones:
        # the users' own requests answered again before a later milestone (the first-token
        # probe is sent only once /health says 200): it is not on the node's way back
        if t is None or t < t_prev or (m.t_recovered is not None and t > m.t_recovered):
            continue
        phases.append(Phase(name, t_prev, t, evidence))
        t_prev = t
    return phases


def slowest(phases: list[Phase]) -> Phase | None:
    """The longest phase (the one to attack first), None without phases."""
    return max(phases, key=lambda p: p.duration_s, default=None)
