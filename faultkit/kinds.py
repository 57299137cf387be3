"""The catalogue of fault kinds: the one list every other place derives from.

:data:`FAULTS` maps each fault kind to the class implementing it (``"module:Class"``,
imported on first use by :func:`faultkit.faults.fault_class`). :data:`FAULT_KINDS` is what
an inventory node's ``faults:`` allowlist may name: every fault, plus the scenarios that
inject no fault but act on the node through the harness (:data:`ACTION_KINDS`).

Dependency-free on purpose: the inventory validates allowlists against it without
importing the faults (and through them Docker).
"""

from __future__ import annotations

#: fault kind → "module:Class" implementing it
FAULTS: dict[str, str] = {
    "kill": "faultkit.faults.process:Kill",
    "kill_process": "faultkit.faults.engine:KillProcess",
    "stop": "faultkit.faults.process:Stop",
    "restart": "faultkit.faults.process:Restart",
    "pause": "faultkit.faults.process:Pause",
    "node_restart": "faultkit.faults.process:NodeRestart",
    "host_restart": "faultkit.faults.host:HostRestart",
    "partition": "faultkit.faults.partition:Partition",
    "loss": "faultkit.faults.network:Loss",
    "bandwidth": "faultkit.faults.network:Bandwidth",
    "latency": "faultkit.faults.network:Latency",
    "memory_squeeze": "faultkit.faults.memory:MemorySqueeze",
    "oversized_context": "faultkit.faults.requests:OversizedContext",
    "flood": "faultkit.faults.requests:Flood",
    "rollout": "faultkit.faults.rollout:Rollout",
}

#: Scenario kinds that are harness actions, not faults (``Experiment.run_action``): the
#: ``bad_input`` scenario sends malformed requests, ``context_limits`` (``test_limits``)
#: prompts sized to the node's own context limit (:mod:`faultkit.context_probe`), ``soak``
#: (``test_soak``) sustained load at the node's declared capacity.
ACTION_KINDS: tuple[str, ...] = ("bad_input", "context_limits", "soak")

#: Every kind a node's allowlist may name ("*" allows all of them).
FAULT_KINDS: tuple[str, ...] = (*FAULTS, *ACTION_KINDS)
