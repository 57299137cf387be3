"""What the gateway scenarios share: which upstream to fail, with which fault, and how the
gateway routed around it (``test_upstream_failure``, ``test_gateway_rollout``).

The figures come from the gateway's users' ledger: ``RequestRecord.served_by`` (LiteLLM's
``x-litellm-model-id``: which upstream answered) and ``RequestRecord.gateway_retries``
(``x-litellm-attempted-retries``: how often the gateway retried before it). The
gateway's own counters (``litellm_deployment_*_total`` by ``model_id``) stay in
``prometheus.json``, the other side of the story (docs/gateway.md, "Metrics").
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from faultkit import Event, EventKind, Experiment, Inventory, Node, RequestRecord
from slo.checks import Checks, check, lost_at_most
from slo.routing import RouteAround, route_around
from slo.types import CheckResult, Measurement

#: no request may hit the dead upstream for this long for the gateway to have routed around
STRETCH_S = 3.0
#: the testbed gateway's cooldown_time (testbed/lab.py LAB_GATEWAY_POLICY) + a 5 s margin
ROUTE_AROUND_S_MAX = 15.0
#: how long after the upstream is back the run waits for the gateway to send it traffic
#: again: the lab router's cooldown_time (10 s) + 10 s (a cooldown set at the last
#: failure, just before the upstream came back, and a margin)
BACK_IN_ROTATION_WAIT_S = 20.0
#: users lost per failed upstream beyond the streams it was serving that a gateway with
#: retries may lose: a request whose every attempt landed on the dead upstream before its
#: cooldown (LiteLLM picks each attempt anew): 1 in 12 kills on the lab and on loopback
#: (docs/gateway.md); without retries it was 2-3 every time
OTHER_LOST_MAX = 1
#: users a gateway with 2 retries may lose per failed upstream: the worst measured (docs/
#: gateway.md: 2-3 per kill at ~6 req/s over two upstreams; three share the load here)
LOST_MAX = 3


@dataclass(frozen=True, slots=True)
class UpstreamFault:
    """How one upstream is failed: the fault kind, its parameters and hold, and whether a
    gateway is expected to route around it (a hang shorter than the router's ``timeout``
    fails no attempt, so LiteLLM has nothing to cool the upstream down for)."""

    kind: str
    hold_s: float
    params: tuple[tuple[str, Any], ...] = ()
    routes_around: bool = True

    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)


#: the upstream failures of ``test_upstream_failure``, by test id
UPSTREAM_FAULTS: dict[str, UpstreamFault] = {
    # `docker kill` (SIGKILL), held down 5 s, then started: down ~7.8 s in all. Not a kill
    # that Docker's restart policy undoes: sim-vllm is back from that in 2.6-2.8 s, often
    # before the gateway's second failed attempt (its cooldown, allowed_fails 1), and no
    # 3 s stretch fits in such an outage, so whether it routed around cannot be judged
    # (slo.routing, outage_s: judging it would read "kept sending users there", a false
    # FAIL). Held shorter than the cooldown (10 s): an outage that outlasts it gets more
    # attempts once the cooldown ends (measured: 8 s held, down 10.8 s, a user lost at 8.4 s)
    "kill": UpstreamFault("kill", 5.0, (("docker_kill", True),)),
    # docker pause for 8 s: connections are accepted, nothing answers
    "pause": UpstreamFault("pause", 8.0, routes_around=False),
    # every packet dropped in its netns for 8 s (`partition mode=blackhole`): its name still
    # resolves, its address is still there, and nothing answers, so, like a pause, no attempt
    # fails within the router's 30 s timeout and nothing is routed around. Not `mode=refuse`
    # (a disconnect): that takes the name out of Docker's DNS at once, and a gateway that
    # resolves for each new connection (AIOHTTP_TTL_DNS_CACHE=0) fails those fast and cools
    # it down while its kept-alive connections hang: routed around or not by the state of
    # its connection pool, which no run controls
    "partition": UpstreamFault("partition", 8.0, (("mode", "blackhole"),),
                               routes_around=False),
}


#: the gateway's users in its scenarios: open loop at 6 req/s (one LiteLLM worker serves
#: about 8 here), short streams, timeouts long enough to wait out a hung upstream
USERS_PROFILE = ("rate=6,concurrency=256,input_tokens=32,output_tokens=24,"
                 "first_token_timeout_s=30,total_timeout_s=60,connect_timeout_s=2")


def upstream_or_not_judgeable(experiment: Experiment, inventory: Inventory, fault: str
                              ) -> Node:
    """:func:`upstream_to_fail` for the experiment's gateway; without one the run cannot
    be judged (INCONCLUSIVE, saying what the gateway lacks)."""
    upstream = upstream_to_fail(inventory, experiment.node, fault)
    if upstream is None:
        raise experiment.not_judgeable(
            f"{experiment.node.name}: needs two upstreams, one of them allowing {fault}")
    return upstream


def upstream_to_fail(inventory: Inventory, gateway: Node, fault: str = "kill") -> Node | None:
    """The upstream that comes back soonest (the lowest ``ready_timeout_s`` of its serving
    config, the first listed on a tie: ``sim-vllm`` on the testbed) among those whose
    allowlist permits ``fault``; None without a second upstream to survive it."""
    upstreams = [inventory.node(name) for name in gateway.upstreams]
    candidates = [n for n in upstreams if n.allows(fault) and n.docker is not None]
    if len(upstreams) < 2 or not candidates:
        return None

    def ready_timeout(node: Node) -> float:
        if not node.serving_config:
            return math.inf
        return inventory.serving_config(node.serving_config).ready_timeout_s

    return min(candidates, key=ready_timeout)


def t_back_of(events: list[Event], upstream: str) -> float | None:
    """When ``upstream`` served again: its last ``ready`` event (a kill: the fault waited
    for readiness), else its last ``revert_end`` (a pause or partition is over when it is
    reverted); None when neither was recorded."""
    mine = [e for e in events if e.node == upstream and e.source == "fault"]
    for kind in (EventKind.READY, EventKind.REVERT_END):
        times = [e.t for e in mine if e.kind == kind]
        if times:
            return max(times)
    return None


def served_again(
    records: list[RequestRecord], node: str, upstream: str, since: float
) -> bool:
    """A request of gateway ``node`` arriving at or after ``since`` was served by
    ``upstream``."""
    return any(
        r.node == node and r.status == "ok" and r.served_by == upstream
        and (r.t_scheduled if r.t_scheduled is not None else r.t_invoke) >= since
        for r in records
    )


def until_back_in_rotation(
    upstream: Node, wait_s: float = BACK_IN_ROTATION_WAIT_S
) -> Callable[[Experiment], Awaitable[None]]:
    """For ``run_fault(after_revert=…)``: keep the load on until the gateway's users are
    served by ``upstream`` again after it came back (``t_back_of``), at most ``wait_s``
    seconds after that (the run then reports no back-in-rotation figure)."""

    async def wait(experiment: Experiment) -> None:
        t_back = t_back_of(experiment.events, upstream.name) or time.time()
        deadline = t_back + wait_s
        while time.time() < deadline:
            records = experiment.load.records if experiment.load else []
            if served_again(records, experiment.node.name, upstream.name, t_back):
                return
            await asyncio.sleep(0.5)

    return wait


def cut_streams(
    records: list[RequestRecord], node: str, upstream: str, t_effect: float, t_back: float | None
) -> int:
    """Gateway ``node``'s requests that ``upstream`` was serving when it failed: failed,
    naming it, ended at or after ``t_effect`` and arrived before ``t_back`` (or any time,
    without it). A started stream is never retried: no gateway setting saves these."""
    return sum(
        1 for r in records
        if r.node == node and r.kind != "probe" and r.status != "ok" and r.served_by == upstream
        and r.t_end >= t_effect
        and (t_back is None or _arrival(r) < t_back)
    )


def _arrival(r: RequestRecord) -> float:
    return r.t_scheduled if r.t_scheduled is not None else r.t_invoke


def lost_only_cut_streams(cut: int, upstream: str, other_max: int = OTHER_LOST_MAX) -> Checks:
    """No user was lost but the streams ``upstream`` was serving when it failed (``cut``),
    and at most ``other_max`` whose every attempt landed on it (:data:`OTHER_LOST_MAX`):
    the other attempts on it were retried elsewhere. A gateway without retries fails it
    (each request it sends there before the cooldown is a user lost)."""

    def fn(m: Measurement) -> CheckResult:
        other = max(0, m.lost_total - cut)
        classes = ", ".join(f"{k}={v}" for k, v in m.lost_by_class.items()) or "none"
        observed = (f"{m.lost_total} lost ({classes}): {min(cut, m.lost_total)} streams cut by "
                    f"{upstream}, {other} other")
        ok = other <= other_max
        why = (f"{other} ≤ {other_max} lost besides the streams it had started" if ok
               else f"{other} users lost that a retry elsewhere would have served "
                    f"(> {other_max})")
        return CheckResult(
            "lost_only_cut_streams", ok,
            f"no user lost but the streams {upstream} was serving (and ≤ {other_max} whose "
            "every attempt landed on it)", observed, why)

    return check(fn)


def retries_after(records: list[RequestRecord], node: str, t_effect: float) -> dict[str, int]:
    """What the gateway's answers said of its retries, from ``t_effect`` on: requests
    answered after at least one retry, and retries in all (``x-litellm-attempted-retries``);
    ``reported``: answers that carried the header at all."""
    mine = [
        r for r in records
        if r.node == node and r.kind != "probe"
        and (r.t_scheduled if r.t_scheduled is not None else r.t_invoke) >= t_effect
    ]
    said = [r.gateway_retries for r in mine if r.gateway_retries is not None]
    return {
        "retried_requests": sum(1 for n in said if n > 0),
        "retries": sum(said),
        "reported": len(said),
    }


def routing_of(experiment: Experiment, upstream: Node) -> RouteAround:
    """How the gateway routed around ``upstream`` (``slo.routing``), written to the run
    directory as ``route_around.json`` with the retries its answers reported
    (:func:`retries_after`), and noted on the timeline."""
    m = experiment.measurement
    assert m is not None
    ledger = experiment.run.ledger()
    result = route_around(
        ledger, m.node, upstream.name, m.t_effect, m.t_window_end,
        stretch_s=STRETCH_S, t_back=t_back_of(experiment.events, upstream.name),
    )
    figures = {**result.to_json(), **retries_after(ledger, m.node, m.t_effect)}
    experiment.run.write_json(experiment.run.route_around_json, figures)
    experiment.note("route_around", **figures)
    return result


def routed_around_within(result: RouteAround, seconds: float) -> Checks:
    """The gateway stopped sending users to the failed upstream, while it was down, within
    ``seconds`` of ``t_effect``. INCONCLUSIVE when no answer named an upstream."""

    def fn(m: Measurement) -> CheckResult:
        upstream = result.upstream
        expected = f"no request hits {upstream} for {STRETCH_S:g} s within {seconds:g} s"
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
        if result.outage_too_short:
            return CheckResult(
                "routed_around", False, expected, observed + f"; down {result.outage_s:.1f} s",
                f"{upstream} was down {result.outage_s:.1f} s, shorter than the "
                f"{STRETCH_S:g} s stretch routing is judged over: hold it down longer",
                inconclusive=True)
        ok = (
            result.route_around_s is not None
            and result.route_around_s <= seconds
            and result.routed_while_down is True
        )
        if ok:
            why = f"{result.route_around_s:.1f} s ≤ {seconds:g} s"
        elif result.route_around_s is not None and result.routed_while_down is False:
            why = f"kept sending users to {upstream} until it came back"
        else:
            why = f"still sending users to {upstream} {seconds:g} s after it failed"
        return CheckResult("routed_around", ok, expected, observed, why)

    return check(fn)


def upstream_failure_checks(
    experiment: Experiment, upstream: Node, how: UpstreamFault
) -> Checks:
    """What a gateway is judged by after ``upstream`` failed (``how``): at most
    :data:`LOST_MAX` users lost, none but the streams it was serving (the retries' job),
    and, where the fault fails attempts (``how.routes_around``), routed around within
    :data:`ROUTE_AROUND_S_MAX`. Writes ``route_around.json`` (:func:`routing_of`)."""
    routing = routing_of(experiment, upstream)
    m = experiment.measurement
    assert m is not None
    cut = cut_streams(experiment.run.ledger(), m.node, upstream.name, m.t_effect,
                      routing.t_back)
    checks = lost_at_most(LOST_MAX) & lost_only_cut_streams(cut, upstream.name)
    if how.routes_around:
        checks = checks & routed_around_within(routing, ROUTE_AROUND_S_MAX)
    return checks
