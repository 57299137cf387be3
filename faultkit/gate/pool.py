"""A gate across a pool of identical nodes: ``faultkit gate --node A --pool B [--pool C …]``.

A gate on one node runs its scenarios one after another — each holds a baseline, its fault
and the ``recovery_hold_s`` that recovery is defined by, and two faults on one node at once
would spoil both measurements. Where the candidate will serve on several nodes of one
engine and one current config (a pool behind a gateway, a second host), the gate rolls it
onto every one of them and splits its scenarios among them: each scenario runs once, on one
node, with exactly the checks it has on a single node, and the nodes' scenario runs go on
side by side (one ``pytest`` per node, like the CI lanes: :mod:`faultkit.lanes`). Each
node's steady state is measured and judged as on a single node, at the same time.

This module holds the pool's pure parts — which nodes may form a pool
(:func:`pool_problems`), how the scenarios are split (:func:`split_scenarios`), the merged
JUnit file and exit code — and :func:`collect_gate_scenarios`, which asks pytest for a
node's gate scenarios. :mod:`.gate` acts. Definitions: docs/definitions.md, "The gate
across a pool".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, cast

from faultkit.errors import FaultkitError
from faultkit.faults.rollout import Rollout
from faultkit.gate.steady import SteadyPhase
from faultkit.inventory import Inventory, Node

T = TypeVar("T")

__all__ = [
    "FAULT_SCENARIO_S",
    "SCENARIO_S",
    "SOAK_OVERHEAD_S",
    "PoolNode",
    "collect_gate_scenarios",
    "combined_exit",
    "expected_share_s",
    "gathered",
    "measured_seconds",
    "node_of",
    "pool_problems",
    "scenario_cost",
    "scenario_key",
    "scenario_weight",
    "soak_seconds",
    "split_scenarios",
]

#: how long each gate scenario takes on a simulated node, in seconds (the lab,
#: ``bench/gate_pool.py``: bad_input 12.8, limits 13.8, oom 14.0, kill 16.0, engine_death
#: 17.0; a partition 21-31 — its 8 s cut, recovery, the hold, and draining the requests the
#: cut left hanging; an engine stall about 60: its hold past the 30 s detection objective,
#: the backlog it released and the recovery hold; the overload's flood 25-27, the catalogue's
#: runs of it). The split only needs their relative lengths.
SCENARIO_S: Mapping[str, float] = {
    "test_bad_input": 13.0, "test_limits": 14.0, "test_oom": 14.0, "test_kill": 16.0,
    "test_engine_death": 17.0, "test_partition": 25.0, "test_engine_stall": 60.0,
    "test_overload": 27.0,
}
#: a gate scenario not in :data:`SCENARIO_S`
FAULT_SCENARIO_S = 16.0
#: what test_soak takes beyond its ``--soak-s`` (its warm-up, baseline and report)
SOAK_OVERHEAD_S = 11.0


def scenario_weight(test_id: str, soak_s: float) -> float:
    """How long the split expects the scenario ``…::test_kill[n]`` to take (seconds)."""
    function = test_id.rsplit("::", 1)[-1].split("[", 1)[0]
    if function == "test_soak":
        return soak_s + SOAK_OVERHEAD_S
    return SCENARIO_S.get(function, FAULT_SCENARIO_S)


def soak_seconds(pytest_args: Sequence[str], default: float) -> float:
    """The last ``--soak-s`` among the scenario run's arguments (the gate puts its own
    first), for the split's weights; ``default`` without one."""
    value = default
    for flag, arg in itertools.pairwise(pytest_args):
        if flag == "--soak-s":
            with contextlib.suppress(ValueError):
                value = float(arg)
    return value


def pool_problems(inventory: Inventory, node: Node, pool: Sequence[str]) -> list[str]:
    """Why ``pool`` (node names) cannot share ``node``'s gate; empty when it can.

    A pool's nodes run the same engine (and simulated personality) and serve the same
    config now: otherwise a scenario's verdict on one of them says nothing about the
    others, and the current config's steady state and baselines would not be one config's.
    Each must allow the rollout fault, and be named once.
    """
    problems: list[str] = []
    seen = {node.name}
    for name in pool:
        if name in seen:
            problems.append(f"--pool {name}: named twice (or the gate's own --node)")
            continue
        seen.add(name)
        try:
            other = inventory.node(name)
        except Exception as exc:  # InventoryError: its message names the nodes there are
            problems.append(f"--pool {name}: {exc}".splitlines()[0])
            continue
        if not other.allows("rollout"):
            problems.append(f"--pool {name}: the node does not allow the rollout fault "
                            "(protected, or 'rollout' missing from its faults allowlist)")
        if (other.engine, other.personality) != (node.engine, node.personality):
            problems.append(
                f"--pool {name}: runs {_engine(other)}, {node.name} runs {_engine(node)}: "
                "a pool's nodes run one engine")
        if other.serving_config != node.serving_config:
            problems.append(
                f"--pool {name}: serves {other.serving_config!r}, {node.name} serves "
                f"{node.serving_config!r}: a pool's nodes serve one config")
    return problems


def _engine(node: Node) -> str:
    return f"{node.engine} ({node.personality})" if node.personality else str(node.engine)


def node_of(test_name: str, nodes: Collection[str]) -> str | None:
    """Which of ``nodes`` the test ``test_kill[sim-vllm-h2]`` runs on: the longest name its
    parameter starts with (``sim-vllm-h2-refuse`` is sim-vllm-h2's, not sim-vllm's)."""
    param = test_name.split("[", 1)[1] if "[" in test_name else ""
    return max((n for n in nodes if param.startswith(n)), key=len, default=None)


def scenario_key(test_id: str, node: str) -> str:
    """``…::test_kill[sim-vllm-h2]`` on node ``sim-vllm-h2`` → ``…::test_kill[{node}]``:
    the same scenario on every node of the pool has the same key."""
    return test_id.replace(f"[{node}", "[{node}", 1)


#: {node: {``test_kill[{node}]``: seconds}}: how long each scenario took on each node in
#: earlier gates (:func:`measured_seconds`)
Measured = Mapping[str, Mapping[str, float]]


def _short(key: str) -> str:
    return key.rsplit("::", 1)[-1]


def scenario_cost(key: str, node: str, soak_s: float, measured: Measured) -> float:
    """How long scenario ``key`` (:func:`scenario_key`) is expected to take on ``node``: what
    it took there in the newest earlier gate that ran it (``measured``), else
    :func:`scenario_weight`. The soak is always its ``--soak-s`` + overhead (an earlier
    gate may have had another)."""
    seconds = measured.get(node, {}).get(_short(key))
    if seconds is None or _short(key).startswith("test_soak["):
        return scenario_weight(key, soak_s)
    return seconds


def split_scenarios(
    collected: Mapping[str, Sequence[str]], soak_s: float, measured: Measured | None = None
) -> dict[str, list[str]]:
    """Each gate scenario onto one node: ``{node: [its pytest ids]}``.

    ``collected`` holds every node's gate scenarios (pytest ids, in pytest's order), the
    gate's own node first. A scenario is keyed across nodes by :func:`scenario_key`; each
    key goes to one node that has it, longest first, onto the node where it would end
    soonest (its work so far plus :func:`scenario_cost` there: the longest-processing-time
    rule, with a node's own measured durations when an earlier gate left them — a partition
    on a second Docker host takes 31 s, on this one 21 s; ties to the earlier node). Each
    node's ids keep pytest's order.
    """
    measured = measured or {}
    nodes = list(collected)
    keyed = {n: {scenario_key(t, n): t for t in collected[n]} for n in nodes}
    keys: list[str] = []
    for n in nodes:
        keys += [k for k in keyed[n] if k not in keys]

    def cost(key: str, node: str) -> float:
        return scenario_cost(key, node, soak_s, measured)

    def longest(key: str) -> float:
        return max(cost(key, n) for n in nodes if key in keyed[n])

    load = dict.fromkeys(nodes, 0.0)
    chosen: dict[str, set[str]] = {n: set() for n in nodes}
    for key in sorted(keys, key=longest, reverse=True):  # stable: pytest's order among equals
        has_it = [n for n in nodes if key in keyed[n]]
        target = min(has_it, key=lambda n: (load[n] + cost(key, n), nodes.index(n)))
        load[target] += cost(key, target)
        chosen[target].add(key)
    return {n: [t for k, t in keyed[n].items() if k in chosen[n]] for n in nodes}


def expected_share_s(ids: Sequence[str], node: str, soak_s: float,
                     measured: Measured | None = None) -> float:
    """How long the split expects ``node``'s share (pytest ids) to take, in seconds."""
    return sum(scenario_cost(scenario_key(t, node), node, soak_s, measured or {})
               for t in ids)


def measured_seconds(gates_root: Path, nodes: Collection[str], *, newest: int = 20
                     ) -> dict[str, dict[str, float]]:
    """How long each gate scenario took on each of ``nodes`` in the ``newest`` earlier gate
    directories under ``gates_root`` (``gate-<stamp>-…/junit.xml``), the newest first:
    ``{node: {"test_kill[{node}]": seconds}}``. Only scenarios that passed count (a failure
    may end early). A test name belongs to the longest node name its parameter starts with
    (``sim-vllm-h2-refuse`` is sim-vllm-h2's, not sim-vllm's). Unreadable files are
    skipped: the split then falls back on :data:`SCENARIO_S`."""
    found: dict[str, dict[str, float]] = {n: {} for n in nodes}
    gates = sorted(gates_root.glob("gate-*/junit.xml"), key=lambda p: p.parent.name,
                   reverse=True)[:newest]
    for junit in gates:
        try:
            cases = list(ET.parse(junit).getroot().iter("testcase"))
        except (OSError, ET.ParseError):
            continue
        for case in cases:
            name, seconds = case.get("name") or "", case.get("time")
            if seconds is None or any(case.find(t) is not None
                                      for t in ("failure", "error", "skipped")):
                continue
            node = node_of(name, nodes)
            if node is None:
                continue
            try:
                found[node].setdefault(scenario_key(name, node), float(seconds))
            except ValueError:
                continue
    return found


async def collect_gate_scenarios(argv: Sequence[str]) -> list[str]:
    """The pytest ids ``argv`` (a ``pytest … -m gate --node N`` command without
    ``--collect-only``) would run. Raises :class:`FaultkitError` with pytest's last lines
    when collection fails (the gate then restores every node and exits 1 with that line)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, "--collect-only", "-q", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    lines = out.decode(errors="replace").splitlines()
    if proc.returncode not in (0, 5):  # 5: nothing collected
        tail = " | ".join(line for line in lines[-5:] if line.strip())
        raise FaultkitError(f"collecting the gate scenarios failed (pytest exit "
                           f"{proc.returncode}): {tail}")
    return [line.strip() for line in lines if "::" in line and not line.startswith(" ")]


def combined_exit(codes: Sequence[int]) -> int:
    """The pool's pytest exit code: the first that is neither 0 nor 1 (an error, an
    interruption, nothing collected), else 1 if any run had a failure, else 0."""
    odd = [c for c in codes if c not in (0, 1)]
    if odd:
        return odd[0]
    return max(codes, default=5)


@dataclass
class PoolNode:
    """One node the gate rolls the candidate onto: its steady-state phase and rollout."""

    node: Node
    steady: SteadyPhase
    rollout: Rollout
    #: the pytest ids of the gate scenarios this node runs (a pool splits them)
    scenarios: list[str] = field(default_factory=list)
    #: how long the split expected that share to take (:func:`expected_share_s`)
    expected_s: float | None = None

    def to_json(self, junit_xml: Path | None) -> dict[str, object]:
        """One entry of gate.json's ``pool`` (docs/run-directory.md, "The gate directory")."""
        return {"node": self.node.name, "rollout": dict(self.rollout.result),
                "steady_state": self.steady.to_json(), "scenarios": list(self.scenarios),
                "expected_s": self.expected_s, "junit_xml": str(junit_xml) if junit_xml else None}


async def gathered(*aws: Awaitable[T]) -> list[T]:
    """Await all of ``aws`` side by side — each runs to its end even when another raises —
    then raise the first exception, if any."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for item in results:
        if isinstance(item, BaseException):
            raise item
    return cast(list[T], results)
