"""limits: the node's own context limit, probed while real traffic runs.

The limit is read from the engine — ``/v1/models`` ``max_model_len`` (vLLM, SGLang, the
simulator), llama.cpp's ``/props`` ``n_ctx`` of one slot — or the inventory's
``context_limit``. Prompts at about 50 %, 90 % and 100 % of it (minus the output) go out
at the node's concurrency (llama.cpp's slots, the inventory's ``max_concurrency``, else
2), then one prompt just over it (:mod:`faultkit.probes.context`). Every prompt inside the
limit must be answered in full and the one over it cleanly rejected (4xx), and the node
must not crash nor its users notice. The cliff sits exactly at the configured maximum, so
a config whose memory holds short prompts but not long ones fails here, whatever its
``max_model_len`` is.

Adapting to the node's own limit, the probe alone would pass a candidate that serves a
shorter context per request than the config it replaces. With ``--current-context-limit
TOKENS`` (the limit of the config the node served before this candidate) the check
``current_limit_served`` compares the two: when the current config's limit is the
larger, one prompt sized to it (minus the output, as the 100 % step) goes out after the
others and must be answered in full, as the current config answers it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from faultkit import Experiment, Node
from faultkit.probes.context import ProbeNotPossible, ProbeResult, prepare_probe, run_probe
from faultkit.probes.limits import context_limit_regression
from scenarios._expect import node_not_crashed
from slo.checks import Checks, check, lost_at_most
from slo.kvcache import KvCapacity, kv_capacity
from slo.profiles import profile_for
from slo.prom import Prometheus
from slo.soak import preemptions_during
from slo.types import CheckResult, Measurement


def steps_answered(probe: list[ProbeResult], within: bool) -> Checks:
    name, expected = (("prompts_within_limit_answered",
                       "every prompt at 50/90/100 % of the limit answered in full")
                      if within else
                      ("prompt_over_limit_rejected_cleanly",
                       "the prompt over the limit answered with a clean 4xx"))

    def fn(m: Measurement) -> CheckResult:
        if not probe:  # the action raised before it returned: nothing to judge
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="no probe result", why="the probe did not run",
                               inconclusive=True)
        steps = [s for s in probe[0].steps
                 if s.step.within is within and s.step.current_limit is None]
        problems = [p for s in steps for p in s.problems]
        observed = "; ".join(f"{s.step.name}: {s.outcomes or 'none'}" for s in steps)
        return CheckResult(name=name, passed=bool(steps) and not problems, expected=expected,
                           observed=observed or "no step ran",
                           why=problems[0] if problems else "as expected")

    return check(fn)


def current_limit_served(probe: list[ProbeResult], candidate: int, current: int) -> Checks:
    """The candidate serves a prompt at the current config's context limit (``current``
    tokens per request) as that config does: answered in full. A candidate whose own limit
    (``candidate``) is at least as large passes without a request; one that rejects or
    fails the prompt FAILs with :func:`~faultkit.probes.limits.context_limit_regression`."""
    name = "current_limit_served"
    expected = (f"a prompt at the current config's context limit ({current:,} tokens) "
                "answered in full")

    def fn(m: Measurement) -> CheckResult:
        if candidate >= current:
            return CheckResult(name=name, passed=True, expected=expected,
                               observed=f"the candidate's limit {candidate:,} ≥ the current "
                                        f"config's {current:,}", why="as expected")
        steps = [s for s in probe[0].steps if s.step.current_limit is not None] if probe else []
        if not steps:
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="no probe result" if not probe else "no step ran",
                               why="the probe did not send the prompt at the current "
                                   "config's limit", inconclusive=True)
        step = steps[0]
        observed = ("; ".join(step.problems) if step.problems else
                    f"{step.step.name} step (~{step.step.planned_tokens} prompt tokens): "
                    f"answered in full")
        return CheckResult(name=name, passed=step.passed, expected=expected, observed=observed,
                           why="as expected" if step.passed
                           else context_limit_regression(candidate, current))

    return check(fn)


def no_preemption(counted: list[tuple[float | None, str]], concurrency: int) -> Checks:
    """No running request preempted while ``concurrency`` prompts near the limit ran."""
    name = "no_preemption_at_the_limit"
    expected = f"no preemption while {concurrency} prompts near the context limit run at once"

    def fn(m: Measurement) -> CheckResult:
        if not counted:
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="not counted", why="the probe did not run",
                               inconclusive=True)
        preempted, detail = counted[0]
        if preempted is None:
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="not counted", why=detail, inconclusive=True)
        why = ("as expected" if not preempted else
               f"the engine preempted {preempted:g} running request(s): its KV cache holds "
               f"fewer than {concurrency} sequences of the context limit, and every "
               "preempted request is computed again")
        return CheckResult(name=name, passed=not preempted, expected=expected,
                           observed=f"{preempted:g} preemption(s)", why=why)

    return check(fn)


def kv_cache_holds(stated: list[tuple[KvCapacity | None, str]], limit_tokens: int,
                   concurrency: int) -> Checks:
    """The engine's KV cache holds ``concurrency`` sequences of ``limit_tokens``."""
    name = "kv_cache_holds_the_concurrency"
    expected = f"a KV cache for {concurrency} sequences of {limit_tokens} tokens"

    def fn(m: Measurement) -> CheckResult:
        capacity, detail = stated[0] if stated else (None, "the KV cache was not read")
        if capacity is None:
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="not stated", why=detail, inconclusive=True)
        holds = capacity.sequences(limit_tokens)
        observed = f"{capacity.tokens} tokens: {holds} sequence(s) ({capacity.source})"
        why = ("as expected" if holds >= concurrency else
               f"the KV cache holds {capacity.tokens} tokens, {holds} sequence(s) of the "
               f"{limit_tokens}-token limit, fewer than the node's {concurrency}: long "
               "prompts beyond that wait in the queue or are preempted")
        return CheckResult(name=name, passed=holds >= concurrency, expected=expected,
                           observed=observed, why=why)

    return check(fn)


@pytest.mark.gate
@pytest.mark.fault("context_limits")
@pytest.mark.node_kind("engine")
async def test_limits(experiment: Experiment, node: Node,
                      faultkit_current_context_limit: int | None) -> None:
    current = faultkit_current_context_limit
    try:
        plan = await prepare_probe(node, concurrency=node.max_concurrency,
                                   current_limit=current)
    except ProbeNotPossible as exc:
        raise experiment.not_judgeable(str(exc)) from None
    probe: list[ProbeResult] = []
    counted: list[tuple[float | None, str]] = []
    counts_preemptions = profile_for(node).preemptions is not None
    states_kv_cache = profile_for(node).cache_config is not None
    stated: list[tuple[KvCapacity | None, str]] = []

    async def action(exp: Experiment) -> dict[str, Any]:
        if states_kv_cache:
            with Prometheus(exp.inventory.prometheus.url) as prom:
                stated.append(await asyncio.to_thread(kv_capacity, exp.node, prom))
        t_from = time.time()
        probe.append(await run_probe(exp.node, plan))
        result = probe[0].to_json()
        if stated:
            result["kv_cache_tokens"] = stated[0][0].tokens if stated[0][0] else None
        if counts_preemptions:
            t_to = time.time()
            await asyncio.sleep(2 * exp.inventory.prometheus.scrape_interval_s)  # last scrape
            with Prometheus(exp.inventory.prometheus.url) as prom:
                counted.append(await asyncio.to_thread(
                    preemptions_during, exp.node, prom, t_from - 1.0,
                    t_to + 2 * exp.inventory.prometheus.scrape_interval_s))
            result["preemptions"] = counted[0][0]
        return result

    steps = ", ".join(f"{s.name} ~{s.planned_tokens} tokens x{s.requests}" for s in plan.steps)
    await experiment.run_action(
        "context_limits", action,
        describe=f"prompts sized to the context limit {plan.limit.tokens} "
                 f"({plan.limit.source}): {steps}",
        params={"context_limit": plan.limit.tokens, "concurrency": plan.concurrency,
                **({"current_context_limit": current} if current is not None else {})},
    )
    checks = (steps_answered(probe, within=True) & steps_answered(probe, within=False)
              & node_not_crashed(experiment) & lost_at_most(0))
    if current is not None:
        checks = checks & current_limit_served(probe, plan.limit.tokens, current)
    if counts_preemptions:  # llama.cpp has no such counter
        checks = checks & no_preemption(counted, plan.concurrency)
    if states_kv_cache:  # vLLM (and the simulator's vLLM personality)
        checks = checks & kv_cache_holds(stated, plan.limit.tokens, plan.concurrency)
    verdict = experiment.check(checks)
    assert verdict.passed, verdict.summary()
