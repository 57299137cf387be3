"""The catalogue of fault kinds: one :class:`FaultSpec` per kind, the one home of its facts.

:data:`FAULTS` maps each fault kind to its spec: the class implementing it
(``"module:Class"``, imported on first use by :func:`faultkit.faults.fault_class`), its
family, whether its requests *are* the fault, whether it kills the engine itself, what its
revert does and whether that revert is what brings the node back, how a report words it,
which diagnosis names it, and what it maps to on Kubernetes. :data:`ACTIONS` holds the
same facts for the scenarios that inject no fault but act on the node through the harness.
Faults, reports, docs and tests read these specs; nothing else restates them.

Dependency-free on purpose: the inventory validates allowlists and reports word their
sentences from it without importing the faults (and through them Docker).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

Family = Literal["process", "engine", "network", "memory", "requests", "rollout", "action"]
Phrase = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Everything the harness, its reports and its docs know about one kind.

    ``impact`` is how the node fared, as a report's headline says it (``was hung for``),
    and ``preposition`` joins it to the fault's phrase (``by a docker pause``). ``cause`` is
    the diagnosis this kind's effect is attributed to when the evidence shows it took
    effect (:mod:`reports.diagnosis` has one rule per cause).
    """

    #: ``"module:Class"`` implementing the fault; ``None`` for a harness action
    implementation: str | None
    family: Family
    #: the immediate cause in a report's words ("the engine was SIGKILLed by the harness")
    cause: str
    #: how a report names the fault with its parameters: ``a memory squeeze to 256m``
    phrase: Phrase
    impact: str = "was down for"
    preposition: str = "after"
    #: the load *is* the fault: an outage is not expected, and "no incident" is a finding
    request_level: bool = False
    #: the fault itself ends the engine's process: its exit 137 is the fault's doing
    kills_the_engine: bool = False
    #: True when reverting the fault brings the node back (unpause, reconnect, restore the
    #: limit); False when the revert is bookkeeping and the node recovers by itself or not
    #: at all (a kill: the restart policy; a rollout: its rollback; a request fault)
    revert_is_the_fix: bool = True
    #: what the revert does, for a report's recovery steps ("unpause")
    revert_words: str = ""
    #: the fault's own action restarts or restores the engine (``docker restart``,
    #: ``node_restart``, ``host_restart``, ``stop`` then start): that action, not a restart
    #: policy, is what brought the node back
    restores_itself: bool = False
    #: the Kubernetes counterpart (docs/kubernetes.md has the whole mapping)
    kubernetes: str = ""


def _signal(params: Mapping[str, Any]) -> str:
    return str(params.get("signal") or "SIGKILL")


def _with(template: str, key: str, fallback: str) -> Phrase:
    return lambda p: template.format(p[key]) if p.get(key) else fallback


def _kill(p: Mapping[str, Any]) -> str:
    return "a docker kill" if p.get("docker_kill") else f"a {_signal(p)} of its main process"


def _kill_process(p: Mapping[str, Any]) -> str:
    if p.get("match"):
        return f"a {_signal(p)} to the engine's processes matching /{p['match']}/"
    return "the engine's death inside its container"


def _stall(p: Mapping[str, Any]) -> str:
    if p.get("whole"):
        return "a SIGSTOP of every process of its container"
    if p.get("match"):
        return f"a SIGSTOP of the engine's processes matching /{p['match']}/"
    return "a SIGSTOP of the engine's processes"


def _partition(p: Mapping[str, Any]) -> str:
    mode = {"blackhole": " (packets dropped)", "refuse": " (disconnected)"}
    return "a network partition" + mode.get(str(p.get("mode")), "")


def _loss(p: Mapping[str, Any]) -> str:
    if isinstance(p.get("percent"), int | float):
        return f"{p['percent']:g} % packet loss"
    if isinstance(p.get("probability"), int | float):
        return f"{p['probability'] * 100:g} % packet loss"
    return "packet loss"


def _oversized(p: Mapping[str, Any]) -> str:
    if p.get("requests") and p.get("input_tokens"):
        return f"{p['requests']} prompts of {p['input_tokens']} tokens"
    return "oversized prompts"


def _node_restart(p: Mapping[str, Any]) -> str:
    if p.get("all_containers"):
        return "a restart of every container on its Docker host"
    return "a restart of the inventory nodes' containers on its Docker host"


class _Fares(TypedDict, total=False):
    """How a node fares under a family of kinds (the :class:`FaultSpec` fields they share)."""

    impact: str
    preposition: str
    request_level: bool
    revert_is_the_fix: bool
    kills_the_engine: bool
    restores_itself: bool


#: the fault ends the engine's process; its revert only waits for the node's supervision
_KILLS: _Fares = {"kills_the_engine": True, "revert_is_the_fix": False}
#: the fault's own act brings the engine back (a restart); its revert only waits
_RESTARTS: _Fares = {"revert_is_the_fix": False, "restores_itself": True}
#: a fault that slows the network path rather than cutting it
_DEGRADED: _Fares = {"impact": "was degraded for", "preposition": "under"}
#: requests that are the fault, or a harness action: no outage expected, nothing to revert
_IMPAIRED_BY: _Fares = {"impact": "was impaired for", "preposition": "by",
                        "request_level": True, "revert_is_the_fix": False}
_IMPAIRED_UNDER: _Fares = {**_IMPAIRED_BY, "preposition": "under"}

#: fault kind → its spec
FAULTS: dict[str, FaultSpec] = {
    "kill": FaultSpec(
        "faultkit.faults.process:Kill", "process",
        cause="the engine's main process was killed by the injected fault",
        phrase=_kill, **_KILLS,
        kubernetes="container crash, restarted in place (docker_kill: a pod delete)"),
    "kill_process": FaultSpec(
        "faultkit.faults.engine:KillProcess", "engine",
        cause="the engine's processes were killed inside the container by the injected fault",
        phrase=_kill_process, **_KILLS,
        kubernetes="the node agent signals the engine's processes in the pod"),
    "stop": FaultSpec(
        "faultkit.faults.process:Stop", "process",
        cause="the container was stopped by the injected fault (docker stop)",
        phrase=lambda p: "a docker stop", revert_words="start the container",
        kubernetes="scale the workload to 0 and back"),
    "restart": FaultSpec(
        "faultkit.faults.process:Restart", "process",
        cause="the container was restarted by the injected fault (docker restart)",
        phrase=lambda p: "a docker restart", **_RESTARTS,
        kubernetes="a crash in place, or a pod delete"),
    "pause": FaultSpec(
        "faultkit.faults.process:Pause", "process",
        cause="the engine was frozen by the injected pause (cgroup freezer)",
        phrase=lambda p: "a docker pause", impact="was hung for", preposition="by",
        revert_words="unpause",
        kubernetes="no API: the node agent writes cgroup.freeze; liveness turns it into a kill"),
    "stall": FaultSpec(
        "faultkit.faults.stall:Stall", "engine",
        cause="the engine's processes were stopped by the injected stall (SIGSTOP)",
        phrase=_stall, impact="was hung for", preposition="by",
        revert_words="SIGCONT the stopped processes",
        kubernetes="no API: the node agent signals the engine's processes in the pod"),
    "node_restart": FaultSpec(
        "faultkit.faults.process:NodeRestart", "process",
        cause="the node's containers were restarted by the injected node restart",
        phrase=_node_restart, **_RESTARTS,
        kubernetes="cordon + the Eviction API"),
    "host_restart": FaultSpec(
        "faultkit.faults.host:HostRestart", "process",
        cause="the whole Docker host was restarted by the injected host restart",
        phrase=lambda p: "a restart of its whole Docker host", **_RESTARTS,
        revert_words="wait for the host and its nodes to come back",
        kubernetes="the cloud's or the BMC's reboot call"),
    "partition": FaultSpec(
        "faultkit.faults.partition:Partition", "network",
        cause="the node was cut off the network by the injected partition",
        phrase=_partition, impact="was unreachable for", preposition="during",
        revert_words="reconnect / remove the partition",
        kubernetes="a readiness gate set False (refuse), a NetworkPolicy (blackhole)"),
    "loss": FaultSpec(
        "faultkit.faults.network:Loss", "network",
        cause="packets to and from the node were dropped by the injected loss",
        phrase=_loss, **_DEGRADED, revert_words="remove packet loss",
        kubernetes="tc/iptables in the pod's netns"),
    "bandwidth": FaultSpec(
        "faultkit.faults.network:Bandwidth", "network",
        cause="the node's bandwidth was limited by the injected fault",
        phrase=_with("a bandwidth limit of {}", "rate", "a bandwidth limit"), **_DEGRADED,
        revert_words="remove the bandwidth limit", kubernetes="tc tbf in the pod's netns"),
    "latency": FaultSpec(
        "faultkit.faults.network:Latency", "network",
        cause="latency was added to the node's network path by the injected fault",
        phrase=_with("{} ms of added latency", "delay_ms", "added latency"), **_DEGRADED,
        revert_words="remove added latency", kubernetes="tc netem in the pod's netns"),
    "memory_squeeze": FaultSpec(
        "faultkit.faults.memory:MemorySqueeze", "memory",
        cause="the container's memory limit was squeezed by the injected fault",
        phrase=_with("a memory squeeze to {}", "limit", "a memory squeeze"),
        revert_words="restore the memory limit", kubernetes="the pod's resize subresource"),
    "oversized_context": FaultSpec(
        "faultkit.faults.requests:OversizedContext", "requests",
        cause="prompts longer than the node serves were sent by the injected fault",
        phrase=_oversized, **_IMPAIRED_BY,
        kubernetes="the same requests through the Service"),
    "flood": FaultSpec(
        "faultkit.faults.requests:Flood", "requests",
        cause="more requests than the node serves were sent by the injected flood",
        phrase=_with("a request flood at {} req/s", "rate", "a request flood"),
        **_IMPAIRED_UNDER,
        kubernetes="the same requests through the Service"),
    "rollout": FaultSpec(
        "faultkit.faults.rollout:Rollout", "rollout",
        cause="a candidate serving config was rolled out",
        phrase=_with("rolling out {}", "config", "a rollout"),
        revert_is_the_fix=False, revert_words="end of the rollout",
        kubernetes="patch the Deployment's pod template; rollout undo"),
}

#: Scenario kinds that are harness actions, not faults (the experiment's ``run_action``):
#: ``bad_input`` sends malformed requests, ``context_limits`` (``test_limits``) prompts
#: sized to the node's own context limit (:mod:`faultkit.probes.context`), ``soak``
#: (``test_soak``) sustained load at the node's declared capacity.
ACTIONS: dict[str, FaultSpec] = {
    "bad_input": FaultSpec(None, "action", cause="malformed requests were sent by the harness",
                           phrase=lambda p: "malformed requests", **_IMPAIRED_BY),
    "context_limits": FaultSpec(
        None, "action", cause="prompts at and past the node's context limit were sent",
        phrase=lambda p: "prompts at and past its context limit", **_IMPAIRED_BY),
    "soak": FaultSpec(
        None, "action", cause="sustained load at the node's declared capacity",
        phrase=lambda p: "sustained load at its declared capacity",
        **_IMPAIRED_UNDER),
}

#: Scenario kinds that are harness actions (kept as a tuple: allowlists list them)
ACTION_KINDS: tuple[str, ...] = tuple(ACTIONS)

#: Every kind a node's allowlist may name ("*" allows all of them).
FAULT_KINDS: tuple[str, ...] = (*FAULTS, *ACTIONS)


def spec_of(kind: str | None) -> FaultSpec | None:
    """The spec of a fault or harness-action kind; ``None`` for none or an unknown kind."""
    if kind is None:
        return None
    return FAULTS.get(kind) or ACTIONS.get(kind)


def kinds_of(family: Family) -> frozenset[str]:
    """Every fault kind of one family (``network``: partition, loss, bandwidth, latency)."""
    return frozenset(k for k, s in FAULTS.items() if s.family == family)


def fault_phrase(kind: str | None, params: Mapping[str, Any]) -> str:
    """The fault in a few words: ``a SIGKILL of its main process``, ``30 % packet loss``."""
    spec = spec_of(kind)
    if spec is None:
        return "the fault" if kind is None else f"the {kind} fault"
    return spec.phrase(params)
