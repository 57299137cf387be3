"""soak: sustained open-loop load of distinct prompts at the node's declared capacity.

For ``--soak-s`` seconds (``faultkit gate --soak-s``, default 60; without it ``pytest
scenarios`` deselects this scenario) the users' load is open-loop Poisson arrivals at the
node's ``capacity_rps`` (default: its background rate), every prompt distinct and a
quarter of the node's context limit long (:mod:`faultkit.probes.limits`; 128 tokens when it
cannot be read), 32 output tokens. Meanwhile the container's anonymous memory is sampled
every second through its Docker API, and afterwards Prometheus is asked for the engine's
preemption (SGLang: retraction) counter. The soak fails on a crash or restart, an SLO
breach over the soak (error ratio, TTFT p95), a rising preemption rate, or a memory trend
that reaches the container's limit within the node's ``soak_horizon_h`` (default 24 h).
The rules are in :mod:`slo.trend` and docs/definitions.md ("Soak"); the projection is in
``run.json`` ``fault.result`` and the incident report.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

import httpx
import pytest

from faultkit import Experiment, Node
from faultkit.docker.host import docker_host
from faultkit.probes.context import ProbeNotPossible, calibrate
from faultkit.probes.limits import ContextLimitUnknown, read_context_limit
from faultkit.runtime.memwatch import MemoryWatch
from scenarios._expect import node_not_crashed
from slo.checks import Checks, check, window_checks
from slo.profiles import profile_for
from slo.prom import Prometheus
from slo.soak import SoakFindings, judge_memory, judge_preemptions
from slo.types import CheckResult, Measurement

#: the soak's prompts when the context limit cannot be read (words)
FALLBACK_PROMPT_TOKENS = 128
OUTPUT_TOKENS = 32


async def soak_prompt_words(node: Node) -> tuple[int, int]:
    """(words, tokens) of the soak's prompts: a quarter of the node's context limit (minus
    the output), 32..1024 tokens, in words as the node's tokenizer counts them
    (:func:`faultkit.probes.context.calibrate`); 128 words when the limit cannot be read."""
    try:
        async with httpx.AsyncClient() as client:
            limit = await read_context_limit(node, client)
        fit = await calibrate(node, limit)
    except (ContextLimitUnknown, ProbeNotPossible):
        return FALLBACK_PROMPT_TOKENS, FALLBACK_PROMPT_TOKENS
    tokens = max(32, min(1024, (limit.tokens - OUTPUT_TOKENS) // 4))
    return fit.words_for(tokens - fit.margin(fit.words_for(tokens))), tokens


def memory_holds(found: list[SoakFindings]) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        name, expected = "memory_not_heading_for_limit", "no memory trend reaching the limit"
        trend = found[0].memory if found else None
        if trend is None:
            why = found[0].memory_why if found else "the soak did not run"
            return CheckResult(name=name, passed=False, expected=expected,
                               observed="not watched", why=why, inconclusive=True)
        projected = ("not rising" if trend.seconds_to_limit_low is None else
                     f"limit in {trend.seconds_to_limit_low / 3600:.2f} h at the lower bound")
        return CheckResult(name=name, passed=not trend.reaches_limit, expected=expected,
                           observed=f"{trend.samples} samples, {projected}", why=trend.why)

    return check(fn)


def preemptions_steady(found: list[SoakFindings]) -> Checks:
    def fn(m: Measurement) -> CheckResult:
        if not found:
            return CheckResult(name="preemptions_not_rising", passed=False,
                               expected="no rising preemption rate", observed="not captured",
                               why="the soak did not run", inconclusive=True)
        trend = found[0].preemptions
        return CheckResult(
            name="preemptions_not_rising", passed=trend is not None and not trend.rising,
            expected="no rising preemption rate",
            observed=trend.why if trend else found[0].preemptions_why,
            why=trend.why if trend else found[0].preemptions_why,
            inconclusive=trend is None)

    return check(fn)


@pytest.mark.gate
@pytest.mark.soak
@pytest.mark.fault("soak")
@pytest.mark.node_kind("engine")
async def test_soak(experiment: Experiment, node: Node, faultkit_soak_s: float | None) -> None:
    seconds = faultkit_soak_s
    assert seconds is not None  # deselected without --soak-s (the plugin's collection)
    rate = node.capacity_rps or experiment.load_profile.rate or 10.0
    words, tokens = await soak_prompt_words(node)
    profile = experiment.load_profile.replace(
        rate=rate, input_tokens=words, output_tokens=OUTPUT_TOKENS,
        seed=int.from_bytes(os.urandom(3), "big"), duration_s=None, requests=None)
    horizon_s = node.soak_horizon_h * 3600
    found: list[SoakFindings] = []

    async def action(exp: Experiment) -> dict[str, Any]:
        watch = (MemoryWatch(docker_host(node.docker.host), node.docker.container)
                 if node.docker is not None else None)
        t_from = time.time()
        async with watch if watch is not None else contextlib.nullcontext():
            await asyncio.sleep(seconds)
        findings = SoakFindings(t_from, time.time())
        if watch is not None:
            judge_memory(findings, watch.samples, len(watch.errors), horizon_s=horizon_s)
        else:
            findings.memory_why = "the node has no Docker access: memory not watched"
        await asyncio.sleep(2 * exp.inventory.prometheus.scrape_interval_s)  # the last scrape
        with Prometheus(exp.inventory.prometheus.url) as prom:
            await asyncio.to_thread(judge_preemptions, findings, node, prom)
        found.append(findings)
        return {"soak": findings.to_json(), "rate": rate, "prompt_words": words,
                "prompt_tokens_planned": tokens, "seconds": seconds}

    await experiment.run_action(
        "soak", action, load_profile=profile,
        describe=f"{seconds:g} s of open-loop load at {rate:g} req/s of distinct "
                 f"~{tokens}-token prompts",
        params={"seconds": seconds, "rate": rate, "prompt_tokens": tokens},
    )
    checks = (node_not_crashed(experiment) & window_checks(experiment.slo, window="fault")
              & memory_holds(found))
    if profile_for(node).preemptions is not None:  # llama.cpp has no such counter
        checks = checks & preemptions_steady(found)
    verdict = experiment.check(checks)
    assert verdict.passed, verdict.summary()
