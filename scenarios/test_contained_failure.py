"""contained_failure: kill one node while every other node takes load. The failure must stay
contained: the other nodes lose nothing and keep their latency objectives.

A gateway that routes to the killed node is not a neighbour: it depends on that node, and
what it loses then is what ``test_upstream_failure`` measures and judges."""

from __future__ import annotations

import pytest

from faultkit import Experiment, Node
from slo.checks import Checks, check
from slo.measure import window_slis
from slo.types import CheckResult, Measurement


def neighbours_unaffected(experiment: Experiment, others: list[Node]) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        end = m.t_recovered or m.t_window_end
        records = experiment.run.ledger()
        rows = []
        failed = 0
        for other in others:
            sli = window_slis([r for r in records if r.node == other.name], m.t_effect, end)
            failed += sli.failed
            rows.append(
                f"{other.name}: {sli.failed}/{sli.requests} failed, TTFT p95 "
                f"{'—' if sli.ttft_p95_s is None else f'{sli.ttft_p95_s:.3f} s'}"
            )
        return CheckResult(
            name="neighbours_unaffected",
            passed=failed == 0 and bool(others),
            expected="no failed request on any other node during the outage",
            observed="; ".join(rows) or "no other nodes",
            why="the failure stayed contained"
            if failed == 0
            else f"{failed} requests failed elsewhere",
        )

    return check(fn)


@pytest.mark.exclusive
@pytest.mark.per_docker_host
@pytest.mark.fault("kill")
async def test_contained_failure(experiment: Experiment, faultkit_inventory) -> None:  # type: ignore[no-untyped-def]
    victim = experiment.node.name
    others = [
        n for n in faultkit_inventory.nodes if n.name != victim and victim not in n.upstreams
    ]
    if not others:
        pytest.skip("needs at least two nodes in the inventory")
    await experiment.run_fault("kill", hold_s=0, neighbours=others)
    verdict = experiment.check(neighbours_unaffected(experiment, others))
    assert verdict.passed, verdict.summary()


@pytest.mark.slow
@pytest.mark.exclusive
@pytest.mark.per_docker_host
@pytest.mark.fault("host_restart")
async def test_contained_failure_across_hosts(experiment: Experiment, faultkit_inventory) -> None:  # type: ignore[no-untyped-def]
    """A whole Docker host restarts (test_host_restart) while every node on the *other*
    hosts takes load: they must lose nothing. Runs for each host that is not this machine."""
    from scenarios.test_host_restart import restart_command

    victim = experiment.node
    assert victim.docker is not None
    command = restart_command(victim.docker.host)
    if command is None:
        pytest.skip(f"no way to restart {victim.docker.host} (this machine, or "
                    "FAULTKIT_HOST_RESTART_COMMAND unset)")
    others = [n for n in faultkit_inventory.nodes
              if n.docker is not None and n.docker.host != victim.docker.host
              and not set(n.upstreams) & {victim.name}]
    if not others:
        pytest.skip("needs a node on another Docker host")
    await experiment.run_fault("host_restart", hold_s=0, neighbours=others,
                               params={"command": command})
    verdict = experiment.check(neighbours_unaffected(experiment, others))
    assert verdict.passed, verdict.summary()
