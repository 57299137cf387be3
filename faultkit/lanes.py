"""Lanes: split a scenario run into groups of nodes that can be tested side by side.

Two scenarios may run at the same time only if nothing one does can show in the other's
measurement. A fault on a node shows in that node's figures, and in the figures of every
gateway routing to it; so a gateway and its upstreams form one *group*, and every other
node is a group of its own (:func:`node_groups`). Scenarios that act on or load several
nodes at once (``node_restart``, ``contained_failure``: the ``exclusive`` marker) never run
beside anything: they get a pass of their own after the lanes. Two floods (``overload``)
never run at once either: they take the machine lock ``flood``
(:mod:`faultkit.runtime.machinelock`).

:func:`plan_lanes` packs the groups into at most ``lanes`` lanes, heaviest first onto the
lightest lane (longest-processing-time first). The weight of a node is how long its share
of the catalogue takes, relative to a simulated node (:data:`ENGINE_WEIGHT`, measured on
the testbed: docs/ci.md). Each lane is one ``pytest scenarios --node A,B -m "not
exclusive"`` process.

:func:`plan_passes` plans a whole catalogue run. There a gateway does not share a lane with
its upstreams (which would test them one after the other): the engines get the lanes, and
each group's gateways are a :class:`FollowPass` that starts when the last lane holding one
of their upstreams has ended — beside the lanes that share nothing with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from faultkit.inventory import Inventory, Node

__all__ = ["ENGINE_WEIGHT", "EXCLUSIVE_MARK", "HOST_WIDE_MARK", "LANE_STAGGER_S", "FollowPass",
           "Lane", "LanePlan", "node_groups", "plan_lanes", "plan_passes", "run_side_by_side"]

_T = TypeVar("_T")

#: the marker of scenarios that never run beside another one
EXCLUSIVE_MARK = "exclusive"

#: how long a node's share of the catalogue takes relative to a simulated node (1.0), from
#: the scenario time per node on the testbed (docs/ci.md: vllm 398 s, llama 252 s, the
#: simulated nodes 266-290 s, the gateway 119 s)
ENGINE_WEIGHT: Mapping[str, float] = {"vllm": 1.45, "llamacpp": 0.9, "sim": 1.0, "litellm": 0.4}


#: the marker of exclusive scenarios that act on every node of one Docker host and load only
#: the node under test (``node_restart``, ``host_restart``): a lane that holds every node
#: of its Docker hosts runs them itself (:attr:`Lane.host_wide`)
HOST_WIDE_MARK = "host_wide"


@dataclass(frozen=True)
class Lane:
    """The nodes one scenario process tests, and their summed weight. ``host_wide``: the
    nodes (one per Docker host, its first) whose ``host_wide`` scenarios this lane runs,
    because it holds every node of each of its Docker hosts; empty otherwise."""

    nodes: tuple[str, ...]
    weight: float
    host_wide: tuple[str, ...] = ()

    def node_option(self) -> str:
        """The value of ``--node`` for this lane's process."""
        return ",".join(self.nodes)

    def mark_expression(self) -> str:
        """The value of ``-m`` for this lane's process."""
        if self.host_wide:
            return f"not {EXCLUSIVE_MARK} or {HOST_WIDE_MARK}"
        return f"not {EXCLUSIVE_MARK}"


def node_groups(inventory: Inventory, names: Sequence[str] | None = None) -> list[list[str]]:
    """The inventory's nodes (or only ``names``) in groups that share nothing: a gateway
    joins the group of every upstream it routes to. Groups keep inventory order."""
    wanted = [n for n in inventory.nodes if names is None or n.name in names]
    parent = {n.name: n.name for n in wanted}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for node in wanted:
        for upstream in node.upstreams:
            if upstream in parent:
                parent[root(upstream)] = root(node.name)
    groups: dict[str, list[str]] = {}
    for node in wanted:
        groups.setdefault(root(node.name), []).append(node.name)
    return list(groups.values())


def _weight(node: Node) -> float:
    return ENGINE_WEIGHT.get(node.engine, 1.0)


def plan_lanes(
    inventory: Inventory, lanes: int, names: Sequence[str] | None = None
) -> list[Lane]:
    """At most ``lanes`` lanes over the node groups, balanced by weight; never an empty
    lane. ``lanes`` must be ≥ 1."""
    if lanes < 1:
        raise ValueError(f"lanes must be 1 or more, not {lanes}")
    by_name = {n.name: n for n in inventory.nodes}
    groups = sorted(
        node_groups(inventory, names),
        key=lambda g: -sum(_weight(by_name[n]) for n in g),
    )
    bins: list[tuple[list[str], float]] = [([], 0.0) for _ in range(min(lanes, len(groups)))]
    for group in groups:
        i = min(range(len(bins)), key=lambda k: bins[k][1])
        members, weight = bins[i]
        bins[i] = ([*members, *group], weight + sum(_weight(by_name[n]) for n in group))
    order = {n.name: i for i, n in enumerate(inventory.nodes)}
    return [
        Lane(tuple(sorted(members, key=order.__getitem__)), round(weight, 3))
        for members, weight in bins
    ]


@dataclass(frozen=True)
class FollowPass:
    """Gateways tested in one process once the lanes ``after`` (indices into
    :attr:`LanePlan.lanes`: those that test their upstreams) have ended."""

    nodes: tuple[str, ...]
    after: tuple[int, ...]

    def node_option(self) -> str:
        """The value of ``--node`` for this pass's process."""
        return ",".join(self.nodes)

    def mark_expression(self) -> str:
        """The value of ``-m`` for this pass's process."""
        return f"not {EXCLUSIVE_MARK}"


@dataclass(frozen=True)
class LanePlan:
    """A whole catalogue run: ``lanes`` side by side, each of ``followers`` as soon as the
    lanes it waits for have ended; then the ``alone`` nodes' scenarios in one process; then
    the exclusive scenarios (on every node) in another."""

    lanes: tuple[Lane, ...]
    alone: tuple[str, ...]
    followers: tuple[FollowPass, ...] = ()

    def passes_after_lanes(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The passes that run alone once the lanes and followers have ended, in order:
        (label, ``--node`` value or "" for every node, the rest of the pytest selection)."""
        passes: list[tuple[str, str, tuple[str, ...]]] = []
        if self.alone:
            passes.append(("alone", ",".join(self.alone), ("-m", f"not {EXCLUSIVE_MARK}")))
        keywords = self.exclusive_keywords()
        passes.append(("exclusive", "", ("-m", EXCLUSIVE_MARK,
                                         *(("-k", keywords) if keywords else ()))))
        return passes

    def exclusive_keywords(self) -> str | None:
        """The value of ``-k`` for the exclusive pass: not the ``host_wide`` scenarios a
        lane ran (their parameter is the node's name: ``test_node_restart[sim-vllm-h2]``);
        None when no lane ran any."""
        done = [name for lane in self.lanes for name in lane.host_wide]
        if not done:
            return None
        return f"not ({HOST_WIDE_MARK} and ({' or '.join(f'[{n}]' for n in done)}))"


def plan_passes(
    inventory: Inventory, lanes: int, alone_engines: Collection[str] = ()
) -> LanePlan:
    """The nodes whose engine is in ``alone_engines`` are kept out of the lanes and tested
    after them. The other engines are planned in at most ``lanes`` lanes
    (:func:`plan_lanes`); the other gateways follow the lanes of their upstreams
    (:class:`FollowPass`: one per group of gateways that share an upstream).

    Which engines must run alone is a property of the machine, not of the engines: on the
    2-core testbed vLLM's, llama.cpp's and LiteLLM's figures are CPU-bound, and which of
    them may share the machine is measured (docs/ci.md)."""
    alone = tuple(n.name for n in inventory.nodes if n.engine in alone_engines)
    together = [n for n in inventory.nodes if n.engine not in alone_engines]
    engines = [n.name for n in together if not n.upstreams]
    planned = tuple(_with_whole_hosts(inventory, lane)
                    for lane in (plan_lanes(inventory, lanes, engines) if engines else ()))
    lane_of = {name: i for i, lane in enumerate(planned) for name in lane.nodes}
    followers = []
    for group in node_groups(inventory, [n.name for n in together]):
        gateways = tuple(name for name in group if name not in lane_of)
        if gateways:
            after = sorted({lane_of[name] for name in group if name in lane_of})
            followers.append(FollowPass(gateways, tuple(after)))
    return LanePlan(lanes=planned, alone=alone, followers=tuple(followers))


def _with_whole_hosts(inventory: Inventory, lane: Lane) -> Lane:
    """``lane`` with :attr:`Lane.host_wide` set when it holds every inventory node of each
    Docker host of its nodes: a restart of such a host shows in no other lane."""
    hosts: dict[str, list[str]] = {}
    for node in inventory.nodes:
        hosts.setdefault(node.host_key, []).append(node.name)
    mine = {n.host_key for n in inventory.nodes if n.name in lane.nodes}
    if any(not set(hosts[h]) <= set(lane.nodes) for h in mine):
        return lane
    return Lane(lane.nodes, lane.weight, tuple(hosts[h][0] for h in sorted(mine)))


#: seconds between the starts of two lanes: five pytest processes that import, collect and
#: start their first scenario at the same instant starved each other's load clients on two
#: cores (a request sent 0.44 s late, the scenario INCONCLUSIVE: docs/ci.md)
LANE_STAGGER_S = 4.0


def run_side_by_side(
    plan: LanePlan, run: Callable[[str, str, str], _T], *, stagger_s: float = LANE_STAGGER_S
) -> list[tuple[str, _T]]:
    """Run the plan's lanes and followers: ``run(label, node_option, mark_expression)`` in a
    thread each, lane ``i`` (from 0, the heaviest first) ``i × stagger_s`` after the first,
    each follower as soon as the lanes it waits for have ended (not the others). Labels are
    ``lane-1``, … and ``after-1``, …; the results come back in that order, once all have
    ended. The ``alone`` and exclusive passes are the caller's."""
    labels = [f"lane-{i + 1}" for i in range(len(plan.lanes))]
    labels += [f"after-{i + 1}" for i in range(len(plan.followers))]

    def lane_at(i: int) -> _T:
        time.sleep(i * stagger_s)
        lane = plan.lanes[i]
        return run(labels[i], lane.node_option(), lane.mark_expression())

    with ThreadPoolExecutor(max_workers=max(1, len(labels))) as pool:
        lanes = [pool.submit(lane_at, i) for i in range(len(plan.lanes))]

        def follow(i: int) -> _T:
            follower = plan.followers[i]
            for lane in follower.after:
                lanes[lane].exception()  # ended, whichever way
            return run(f"after-{i + 1}", follower.node_option(), follower.mark_expression())

        followers: list[Future[_T]] = [pool.submit(follow, i)
                                       for i in range(len(plan.followers))]
        return [(label, f.result()) for label, f in zip(labels, [*lanes, *followers],
                                                        strict=True)]
