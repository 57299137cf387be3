"""Measurement against ground truth: run one experiment on a simulated node and compare what
faultkit measured with what really happened, from evidence faultkit's measurement never reads.

The evidence is independent of the code under test:

- the simulator's **truth file** (``$FAULTKIT_HOME/state/sim/<node>/truth.jsonl``): every
  request it accepted and finished, by the client's request id, and the moments it was
  ready;
- **Docker's event stream**, queried here directly (container *and* network events);
- **Prometheus' own ``ALERTS`` series**: the sample at which an alert for the node first
  reads ``firing``.

:func:`run_trial` runs the real scenario path (:class:`faultkit.experiment.Experiment`) and
returns a :class:`Trial` with the measured figures, the truth and the errors. The
integration test (``tests/integration/test_measure_truth.py``) asserts the bounds;
``bench/measurement_truth.py`` repeats trials and writes the table in docs/measurement-truth.md.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from faultkit.experiment import Experiment
from faultkit.inventory import Inventory, Node
from faultkit.load import LoadProfile
from faultkit.model.events import EventKind
from faultkit.model.records import RequestRecord
from faultkit.rundir import RunDir
from faultkit.runtime.loopwatch import LoopStall
from slo.prom import Prometheus
from slo.types import Measurement
from testbed import host2
from testbed.truth_sources import (
    carried_over,
    docker_events,
    event_time,
    first_alert_firing,
    first_page,
    host_deaths,
    truth_events,
)

#: The experiments the truth table covers: name → (fault kind, params, hold seconds).
TRIALS: dict[str, tuple[str, dict[str, Any], float]] = {
    "kill": ("kill", {}, 0.0),
    # the engine's process killed inside the container (its pattern: the node's own)
    "engine-death": ("kill_process", {}, 0.0),
    "pause": ("pause", {}, 4.0),
    "partition-refuse": ("partition", {"mode": "refuse"}, 4.0),
    "partition-blackhole": ("partition", {"mode": "blackhole"}, 4.0),
    "rollout-never-ready": ("rollout", {"config": "sim-vllm-bad-maxlen"}, 0.0),
    "memory-squeeze": ("memory_squeeze", {}, 4.0),
    # the second host's whole Docker engine, and every container on it, ends at once
    "host-restart": ("host_restart", {"command": host2.RESTART_COMMAND}, 0.0),
}

#: Load of a trial: enough arrivals that the truth file pins each moment to ~40 ms.
TRUTH_LOAD = LoadProfile(
    rate=25.0,
    reuse_connections=False,
    concurrency=256,
    input_tokens=16,
    output_tokens=16,
    connect_timeout_s=2.0,
    first_token_timeout_s=15.0,
    total_timeout_s=20.0,
)


@dataclass
class Trial:
    """One trial: measured figures, the truth, and their differences (seconds)."""

    name: str
    run_dir: str
    measured: dict[str, Any]
    truth: dict[str, Any]
    errors: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: the harness's event-loop stalls during the run (``loop-stalls.json``), one line each:
    #: evidence about the harness, for a trial whose figures are off
    loop_stalls: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- the trial


def _truth_moments(
    name: str, node: Node, t0: float, t_end: float, t_act: float | None = None
) -> tuple[float | None, float | None, list[str]]:
    """(true t_effect, true t_recovered, problems) for trial ``name``."""
    docker = docker_events(node, t0, t_end)
    truth = truth_events(node, t0)
    problems: list[str] = []

    def docker_first(kind: str, actions: tuple[str, ...], after: float = t0) -> float | None:
        times = [event_time(e) for e in docker
                 if e.get("Type") == kind and e.get("Action") in actions
                 and event_time(e) >= after]
        return min(times) if times else None

    def ready_after(t: float | None) -> float | None:
        if t is None:
            return None
        times = [e["t"] for e in truth if e["event"] == "ready" and e["t"] > t]
        return min(times) if times else None

    accepted = sorted(e["t"] for e in truth if e["event"] == "request_accepted")
    effect: float | None
    recovered: float | None
    if name in ("kill", "engine-death", "host-restart"):
        # The SIGKILL ends the server at once; Docker writes ``die`` after the reap, 70–160
        # ms later on an idle machine and over 0.8 s later under load. The death lies
        # between the act (what the trial injected, just before the signal) and ``die``:
        # its truth is the server's last sign of life in between, else the act. A host's
        # death is its container's ``die`` on this machine.
        # An engine core's death is the simulator's own record of it (``engine_core_died``):
        # its API server answers with errors for a moment before it exits.
        die = (min(host_deaths(t0, t_end), default=None) if name == "host-restart"
               else docker_first("container", ("die",)))
        core_died = [e["t"] for e in truth if e["event"] == "engine_core_died"
                     and t_act is not None and e["t"] >= t_act]
        alive = [e["t"] for e in truth if t_act is not None and die is not None
                 and t_act <= e["t"] <= die]
        if name == "engine-death" and core_died:
            effect = min(core_died)
        else:
            effect = max([*alive, t_act]) if t_act is not None and die is not None else die
        recovered = ready_after(die)
    elif name == "pause":
        effect = docker_first("container", ("pause",))
        # Docker's ``unpause`` lets the process run again; the node is back when it answers
        # its readiness endpoint again, which on a busy machine comes after it has taken in
        # the requests queued during the pause (up to 0.78 s after ``unpause``: the
        # measurement dates the recovery by the first readiness answer it gets)
        unpaused = docker_first("container", ("unpause",))
        answers = [e["t"] for e in truth if e["event"] == "health_ok"
                   and e["t"] >= (unpaused if unpaused is not None else math.inf)]
        recovered = min(answers, default=None)
    elif name in ("partition-refuse", "partition-blackhole"):
        # the gap in what the server accepted is the truth: a blackhole leaves no Docker
        # event, and Docker's ``disconnect`` is written when its operation ends, 0.1 s and
        # more after the cut (faultkit/faults/cutwatch.py), so it is no truth for a refuse
        gaps = [(a, b) for a, b in itertools.pairwise(accepted) if b - a > 1.0]
        effect, recovered = (gaps[0][0], gaps[0][1]) if gaps else (None, None)
    elif name == "rollout-never-ready":
        effect = docker_first("container", ("kill", "die", "stop", "destroy"))
        dead = [e["t"] for e in truth if e["event"] == "dead" and e["t"] > (effect or t0)]
        recovered = ready_after(max(dead) if dead else effect)
    elif name == "memory-squeeze":
        # the lower limit applied, or the kernel's OOM kill under it if Docker reports that
        # first (its ``update`` is written when the call returns, which can be after the kill)
        effect = docker_first("container", ("update", "oom"))
        deaths = [event_time(e) for e in docker
                  if e.get("Action") == "die" and event_time(e) >= (effect or t0)]
        recovered = ready_after(max(deaths)) if deaths else None
        if not deaths:
            problems.append("the squeeze did not kill the engine (no die event)")
    else:
        raise ValueError(f"unknown trial {name!r}")
    if effect is None:
        problems.append("no independent evidence of the fault taking effect")
    if recovered is None:
        problems.append("no independent evidence of recovery")
    return effect, recovered, problems


#: A request the server finished this soon before its process died may not have reached
#: the client: the bytes were still being written when the kernel killed it.
DELIVERY_RACE_S = 0.1
#: Docker stamps a death (``die``, ``oom``) when it learns of it, after the kernel killed the
#: process: a memory squeeze's server finished a request 0.104 s before Docker's ``oom``
#: event and its client still got a reset. The race is measured back from the death *event*
#: over both.
DEATH_EVENT_LAG_S = 0.1
#: Docker's events that date a process's death: ``oom`` is the kernel's OOM kill itself,
#: and ``die`` comes when Docker has reaped the container — 0.17 s later in a CI run
#: whose request, finished 5 ms before the OOM kill, fell outside the race window when it
#: was measured from ``die``
DEATH_ACTIONS = ("oom", "die")
#: ``kill`` with one of these signals is a death too: Docker sends SIGKILL when it removes
#: a container (a rollout), and the kernel ends the process there — in a run beside the
#: scratch vLLM starting, the simulator finished a request 9 ms before that ``kill`` and
#: 100 ms before ``die``; the client saw its last chunk cut off
SIGKILL_SIGNALS = frozenset({"9", "KILL", "SIGKILL"})


@dataclass(frozen=True)
class Cut:
    """When a network cut took a node's established connections away, as closely as
    evidence independent of the measurement dates it: no earlier than ``first_path`` and
    no later than ``last_path``."""

    first_path: float
    last_path: float


def refuse_cuts(effect: float | None, events: list[dict[str, Any]]) -> list[Cut]:
    """The cut of a ``partition mode=refuse``: from the server's last accepted request
    before its gap (``effect``) to Docker's ``disconnect`` event, which is written when the
    operation has ended. New connections fail from the first moment, but a stream already
    open can outlive it while Docker tears the endpoint down (on the second host, whole
    responses reach their clients up to 0.2 s after a new connection was reset). A request
    the server finished inside that window is undecidable; after it, lost."""
    if effect is None:
        return []
    disconnects = [event_time(e) for e in events
                   if e.get("Type") == "network" and e.get("Action") == "disconnect"
                   and event_time(e) >= effect]
    return [Cut(effect, min(disconnects, default=effect))]


def death_moments(events: list[dict[str, Any]]) -> list[float]:
    """When the node's process died, by Docker's events (see :data:`DEATH_ACTIONS`)."""
    return [event_time(e) for e in events if e.get("Action") in DEATH_ACTIONS or (
        e.get("Action") == "kill"
        and ((e.get("Actor") or {}).get("Attributes") or {}).get("signal") in SIGKILL_SIGNALS)]


def truth_lost(
    ledger: list[RequestRecord],
    node: Node,
    t0: float,
    effect: float,
    recovered: float,
    deaths: list[float],
    cuts: list[Cut] | None = None,
) -> tuple[int, int]:
    """Users lost by the server's own record: arrivals in [effect, recovered] (or in flight
    at ``effect``) that the server never finished, or accepted before a network cut and
    finished only after it (``cuts``: its connection was gone) — and how many more are
    *undecidable*: finished within :data:`DELIVERY_RACE_S` (+ :data:`DEATH_EVENT_LAG_S`)
    before a death event, or inside a cut's window give or take :data:`DELIVERY_RACE_S`
    (delivered or not).

    Called with the *measured* window, whose edges are checked against truth separately:
    this checks the per-request classification exactly (a window edge 0.1 s off moves a
    few requests at 25 req/s, which is the window's error, not the classification's)."""
    events = truth_events(node, t0)
    finished = {e["id"]: e["t"] for e in events if e["event"] == "request_finished"}
    accepted = {e["id"]: e["t"] for e in events if e["event"] == "request_accepted"}
    ours = [r for r in ledger if r.node == node.name and r.kind != "probe"]
    # in flight at ``effect`` includes a request the effect itself ended (t_end = effect)
    span = [r for r in ours
            if effect <= r.arrival <= recovered or r.t_invoke < effect <= r.t_end]

    def cut_off(request_id: str) -> bool:
        """Accepted before a cut and finished only after it: its connection was gone."""
        t_accepted, t_finished = accepted.get(request_id), finished[request_id]
        return t_accepted is not None and any(
            t_accepted < cut.last_path and t_finished >= cut.last_path + DELIVERY_RACE_S
            for cut in cuts or ())

    def racing_one(t: float) -> bool:
        return (any(0 <= death - t <= DELIVERY_RACE_S + DEATH_EVENT_LAG_S for death in deaths)
                or any(cut.first_path - DELIVERY_RACE_S < t < cut.last_path + DELIVERY_RACE_S
                       for cut in cuts or ()))

    lost = sum(1 for r in span if r.id not in finished or cut_off(r.id))
    racing = sum(1 for r in span if r.id in finished and not cut_off(r.id)
                 and racing_one(finished[r.id]))
    return lost, racing


async def run_trial(name: str, inventory: Inventory, runs_dir: Path, node_name: str = "sim-vllm"
                    ) -> Trial:
    """Run trial ``name`` (a key of :data:`TRIALS`) on ``node_name`` and compare with truth."""
    kind, params, hold = TRIALS[name]
    node = inventory.node(node_name)
    if kind == "kill_process":
        params = {**params, "match": node.engine_process_pattern}
    exp = Experiment(
        scenario=f"truth-{name}", node=node, inventory=inventory,
        run=RunDir.create(runs_dir, f"truth-{name}", node.name), load_profile=TRUTH_LOAD,
    )
    t0 = time.time()
    try:
        m: Measurement = await exp.run_fault(kind, hold_s=hold, baseline_s=3.0, params=params)
    finally:
        exp.finalize()
    t_end = time.time()
    acts = [e.t for e in exp.run.timeline() if e.source == "fault" and e.kind == EventKind.ACT]
    effect, recovered, problems = _truth_moments(name, node, t0, t_end, min(acts, default=None))
    prom = Prometheus(inventory.prometheus.url)
    # the node alerts are evaluated at Prometheus's global interval (the lab's scrape
    # interval: testbed.prometheus.scrape_config), the burn-rate alerts at the SLO groups'
    alert = first_alert_firing(prom, node, effect or t0, t_end,
                               inventory.prometheus.scrape_interval_s,
                               inventory.prometheus.slo_evaluation_interval_s)
    carried = carried_over(prom, node, effect or t0, t_end,
                           inventory.prometheus.scrape_interval_s)
    paged = first_page(inventory, node, effect or t0, t_end, carried)
    ledger = exp.run.ledger()
    lost: int | None = None
    racing = 0
    if m.t_recovered is not None:
        deaths = (host_deaths(t0, t_end) if kind == "host_restart"
                  else death_moments(docker_events(node, t0, t_end)))
        # a refuse tears the path down, not the server: what the server finished once the
        # path was gone never reached its client (a blackhole's streams may survive on TCP
        # retransmission, so its finishes stay the server's word)
        cuts = (refuse_cuts(effect, docker_events(node, t0, t_end))
                if name == "partition-refuse" else [])
        lost, racing = truth_lost(ledger, node, t0, m.t_effect, m.t_recovered, deaths, cuts)

    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a - b, 3)

    return Trial(
        name=name,
        run_dir=str(exp.run.path),
        measured={
            "t_effect": m.t_effect, "effect_evidence": m.effect_evidence,
            "t_recovered": m.t_recovered, "t_detect": m.t_detect,
            "detect_signal": m.detect_signal, "detection_s": m.detection_s,
            "recovery_s": m.recovery_s, "lost": m.lost_total,
            "inconclusive": m.inconclusive, "harness_intervened": m.harness_intervened,
            "t_paged": m.paging.t_paged if m.paging else None,
            "paging_finding": m.paging.finding if m.paging else None,
            "paging_route": m.paging.route if m.paging else None,
        },
        truth={"t_effect": effect, "t_recovered": recovered, "t_alert_firing": alert,
               "lost": lost, "lost_undecidable": racing, "t_paged": paged},
        errors={
            "t_effect": diff(m.t_effect, effect),
            "t_recovered": diff(m.t_recovered, recovered),
            "t_detect_vs_alerts": (
                diff(m.t_detect, alert) if m.detect_signal == "alert" else None
            ),
            "t_paged": diff(m.paging.t_paged if m.paging else None, paged),
            # 0 when the measured count is the truth's, give or take the undecidable ones
            "lost": None if lost is None else float(
                0 if lost <= m.lost_total <= lost + racing
                else m.lost_total - lost - (racing if m.lost_total > lost else 0)
            ),
        },
        problems=problems,
        loop_stalls=[LoopStall.from_json(stall).summary()
                     for stall in exp.run.read_json(exp.run.loop_stalls_json, default=[])],
    )
