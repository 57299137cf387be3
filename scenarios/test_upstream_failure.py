"""upstream_failure: one upstream of a gateway dies (SIGKILL; Docker restarts it) while
users go through the gateway. Judged on the gateway: how many users it lost, and how soon
it stopped sending them to the dead upstream.

The upstream killed is the one of the gateway's upstreams that comes back soonest (the
lowest ``ready_timeout_s`` of its serving config; the first listed on a tie: on the
testbed, ``sim-vllm``), among those whose allowlist permits ``kill``; the others keep
serving. Requests through the gateway record which upstream answered
(``RequestRecord.served_by``, LiteLLM's ``x-litellm-model-id``); ``slo.routing`` turns
them into **route_around_s**: from t_effect (Docker's ``die`` event of the upstream) to
the first 3 s stretch in which no gateway request failed on the dead upstream (or failed
naming none). The figures are in ``route_around.json`` in the run directory.

Objectives, from LiteLLM 1.108.7 as measured (docs/gateway.md, "Killing an upstream"):

* lost ≤ :data:`LOST_MAX` = 3. With ``num_retries: 2`` the losses
  are the streams the upstream was serving when it died (a started stream is never
  retried) plus, rarely, a request whose three attempts all landed on it before its
  cooldown: 2-3 lost per kill at ~6 req/s with two upstreams (three share the load here).
  Not the node's ``lost_max``: that would also cap ``test_kill[gateway]``, where every
  user of the gateway's own outage is lost.
* route_around_s ≤ :data:`ROUTE_AROUND_S_MAX` = the lab router's ``cooldown_time``
  (10 s) + 5 s: the gateway cools the upstream down at its 2nd failure (``allowed_fails:
  1``) and sends it nothing for the cooldown; a gateway that keeps retrying it past that
  has not routed around it.
"""

from __future__ import annotations

import math

import pytest

from faultkit.inventory import Inventory, Node
from faultkit.plugin import Experiment
from slo.checks import Checks, check, lost_at_most
from slo.routing import RouteAround, route_around
from slo.types import CheckResult, Measurement

#: the testbed gateway's cooldown_time (testbed/lab.py LAB_GATEWAY_POLICY) + a 5 s margin
ROUTE_AROUND_S_MAX = 15.0
#: no request may hit the dead upstream for this long for the gateway to have routed around
STRETCH_S = 3.0
#: users a gateway with 2 retries may lose per dead upstream: the worst measured at ~6 req/s
LOST_MAX = 3


def upstream_to_kill(inventory: Inventory, gateway: Node) -> Node | None:
    """The upstream that comes back soonest (module docstring); None without a survivor."""
    upstreams = [inventory.node(name) for name in gateway.upstreams]
    candidates = [n for n in upstreams if n.allows("kill") and n.docker is not None]
    if len(upstreams) < 2 or not candidates:
        return None

    def ready_timeout(node: Node) -> float:
        if not node.serving_config:
            return math.inf
        return inventory.serving_config(node.serving_config).ready_timeout_s

    return min(candidates, key=ready_timeout)


def routing_of(experiment: Experiment, upstream: Node) -> RouteAround:
    """How the gateway routed around ``upstream`` (``slo.routing``), written to the run
    directory as ``route_around.json``."""
    m = experiment.measurement
    assert m is not None
    result = route_around(
        experiment.run.ledger(), m.node, upstream.name, m.t_effect, m.t_window_end,
        stretch_s=STRETCH_S,
    )
    experiment.run.write_model(experiment.run.route_around_json, result)
    return result


def routed_around_within(result: RouteAround, seconds: float) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        upstream = result.upstream
        expected = f"no request fails on {upstream} for {STRETCH_S:g} s within {seconds:g} s"
        last = "-" if result.t_last_hit is None else f"+{result.t_last_hit - m.t_effect:.1f} s"
        observed = (
            f"route_around_s {result.route_around_s:.3f} s; "
            if result.route_around_s is not None else "never routed around; "
        ) + (
            f"{result.hits} requests hit {upstream} after t_effect (last {last}), "
            f"{result.served_by_upstream_after} served by it again, {result.unnamed} of "
            f"{result.requests} named no upstream"
        )
        if result.requests and result.unnamed == result.requests:
            return CheckResult("routed_around", False, expected, observed,
                               "no answer named its upstream: is the gateway's served_by "
                               "header configured?", inconclusive=True)
        ok = result.route_around_s is not None and result.route_around_s <= seconds
        why = (f"{result.route_around_s:.1f} s ≤ {seconds:g} s" if ok
               else f"still sending users to {upstream} {seconds:g} s after it died")
        return CheckResult("routed_around", ok, expected, observed, why)

    return check(fn)


@pytest.mark.fault("kill")
@pytest.mark.node_kind("gateway")
@pytest.mark.load_profile(
    "rate=6,concurrency=256,input_tokens=32,output_tokens=24,first_token_timeout_s=30,"
    "total_timeout_s=60,connect_timeout_s=2"
)
async def test_upstream_failure(experiment: Experiment, faultkit_inventory: Inventory) -> None:
    upstream = upstream_to_kill(faultkit_inventory, experiment.node)
    if upstream is None:
        raise experiment.not_judgeable(
            f"{experiment.node.name}: needs two upstreams, one of them killable"
        )
    await experiment.run_fault("kill", hold_s=0, on=upstream)
    routing = routing_of(experiment, upstream)
    experiment.note("route_around", **routing.to_json())
    verdict = experiment.check(
        lost_at_most(LOST_MAX) & routed_around_within(routing, ROUTE_AROUND_S_MAX)
    )
    assert verdict.passed, verdict.summary()
