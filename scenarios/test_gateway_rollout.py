"""gateway_rollout: roll a candidate config onto the gateway, then fail one of its upstreams
under load with whatever config then serves, and judge what its users lost.

A gateway config is wrong in two ways a readiness probe never shows, so both are tried:

* **it does not reach an upstream** (a wrong URL: ``gateway-bad-upstream``). LiteLLM's
  readiness endpoint answers 200 whatever its upstreams do; the rollout asks the
  candidate to try each upstream (``faultkit.probes.health.upstream_health``, LiteLLM's
  ``/health``) and fails it when an upstream it cannot reach answers its own health
  check. It must be **detected and rolled back** without a human; the upstream failure
  then runs on the restored config, which must hold the objective.
* **it serves, but its users pay for an upstream's failure** (retries off:
  ``gateway-no-retries``). The same upstream failure as ``test_upstream_failure
  [gateway-kill]`` (sim-vllm killed, held down 5 s) runs on the candidate, judged by the same
  objective that ``gateway-good`` meets there: at most
  :data:`~scenarios._gateway.LOST_MAX` users lost, none of them but the streams the dead
  upstream was serving (``lost_only_cut_streams``), routed around within
  :data:`~scenarios._gateway.ROUTE_AROUND_S_MAX`. Without retries, each request the
  gateway sends to the dead upstream before its cooldown is a user lost: that FAILs,
  the loss in the verdict beside the objective.

The candidate is put in place before the load starts (as ``faultkit gate`` does: the
gateway's own restart is not what is judged here, ``test_gateway_termination`` is) and
the previous config is restored after the run, whatever happened. What the rollout did
is the ``gateway_rollout`` event on the timeline and ``gateway_rollout.json``.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from faultkit import Experiment, Inventory
from faultkit.faults import make_fault
from faultkit.faults.rollout import Rollout
from scenarios._expect import rolled_back
from scenarios._gateway import (
    UPSTREAM_FAULTS,
    USERS_PROFILE,
    until_back_in_rotation,
    upstream_failure_checks,
    upstream_or_not_judgeable,
)
from slo.checks import Checks, check
from slo.types import CheckResult, Measurement

#: the upstream failure every candidate is tried under (test_upstream_failure[gateway-kill]'s):
#: the one whose attempts fail fast, where retries decide what users lose (a pause or a
#: partition hangs them instead, retries or not: docs/gateway.md)
UPSTREAM_FAULT = "kill"


def rollout_outcome(config: str, result: dict[str, Any]) -> Checks:
    """The candidate served and reached every upstream, or was detected failed and rolled
    back without a human. INCONCLUSIVE when the gateway could not be asked about its
    upstreams (a candidate that serves without that evidence is not known to be good)."""

    def fn(m: Measurement) -> CheckResult:
        expected = "serves and reaches every upstream, or detected failed and rolled back"
        seen = result.get("upstream_check") or {}
        if result.get("rolled_back") is True:
            ok, observed = rolled_back(config, result, m.t_effect)
            return CheckResult("rollout_safe", ok, expected, observed,
                               "detected and rolled back" if ok else observed)
        if result.get("ready") is not True:
            return CheckResult("rollout_safe", False, expected,
                               f"no rollout outcome recorded: {result}", "no outcome")
        if not seen.get("checked"):
            return CheckResult(
                "rollout_safe", False, expected,
                f"{config} serves; its upstreams could not be checked: {seen.get('detail')}",
                "the gateway did not say whether it reaches its upstreams", inconclusive=True)
        reached = ", ".join(seen.get("healthy") or [])
        return CheckResult("rollout_safe", True, expected,
                           f"{config} serves and reaches {reached}", "serves")

    return check(fn)


@pytest.mark.fault("rollout")
@pytest.mark.node_kind("gateway")
@pytest.mark.load_profile(USERS_PROFILE)
async def test_gateway_rollout(
    experiment: Experiment, faultkit_inventory: Inventory, candidate_config: str
) -> None:
    how = UPSTREAM_FAULTS[UPSTREAM_FAULT]
    upstream = upstream_or_not_judgeable(experiment, faultkit_inventory, how.kind)
    if experiment.dry_run:  # the plan of the run below is what --dry-run prints
        await experiment.run_fault(how.kind, hold_s=how.hold_s, params=how.params_dict(),
                                   on=upstream)
    rollout = cast(Rollout, make_fault("rollout", experiment.node, inventory=faultkit_inventory,
                                       config=candidate_config))
    await rollout.inject()
    try:
        result = dict(rollout.result)
        experiment.note("gateway_rollout", **result)
        experiment.run.write_json(experiment.run.path / "gateway_rollout.json", result)
        await experiment.run_fault(how.kind, hold_s=how.hold_s, params=how.params_dict(),
                                   on=upstream, after_revert=until_back_in_rotation(upstream))
    finally:
        await rollout.revert()
    verdict = experiment.check(
        rollout_outcome(candidate_config, result)
        & upstream_failure_checks(experiment, upstream, how)
    )
    assert verdict.passed, verdict.summary()
