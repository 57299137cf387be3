"""The context-limit probe: prompts at 50 %, 90 % and 100 % of a node's own limit, at the
node's concurrency, then one just over it (``scenarios/test_limits.py``) — and, when the
config the node served before this candidate had a larger limit (``current_limit``), one
prompt at that limit.

Two halves, so that a scenario can refuse to judge before its load starts:

- :func:`prepare_probe` reads the limit (:func:`faultkit.probes.limits.read_context_limit`), sends
  four small calibration prompts to learn how the node counts their tokens
  (:func:`faultkit.probes.limits.fit_prompt_tokens`) and plans the steps. It raises
  :class:`ProbeNotPossible` when the node names no limit or does not report
  ``usage.prompt_tokens``: the probe then cannot be judged (INCONCLUSIVE, never PASS).
- :func:`run_probe` sends each step's prompts at once and waits for every answer, step
  after step. A within-limit prompt must be answered in full (``ok``); the over-limit one
  must be a clean 4xx (an OpenAI-style error body). Anything else — a 5xx, a reset, a
  stream cut short, a 4xx inside the limit, an over-limit prompt served — is a finding.
  The prompt at the current config's limit is judged as the current config would answer
  it: in full. Over the node's own limit it is rejected — a finding that reads "rejected"
  when the rejection is clean, not as a crash; the over-limit step is still judged
  against the node's own limit.

The requests are the harness's own, not users': they are kept out of the run's ledger
(the background load's users are) and reported step by step in the fault result.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from faultkit.errors import FaultkitError
from faultkit.inventory import Node
from faultkit.load.generator import LoadGenerator
from faultkit.load.profile import LoadProfile, Target
from faultkit.load.prompts import synthetic_prompt
from faultkit.model.records import RequestRecord
from faultkit.probes.limits import (
    DEFAULT_FRACTIONS,
    ContextLimit,
    ContextLimitUnknown,
    ProbeStep,
    PromptFit,
    TokenCounter,
    fit_prompt_tokens,
    over_margin,
    plan_steps,
    read_context_limit,
    token_counter,
)

#: Output tokens of every probe request: enough to see the stream run, little enough that
#: the prompt gets nearly all of the context.
PROBE_OUTPUT_TOKENS = 8
#: Sequences sent together when neither the engine nor the inventory says how many the
#: node serves at once: two, so a limit-sized prompt never has the cache to itself.
DEFAULT_CONCURRENCY = 2
#: Calibration prompts per length (distinct prompts: the tokenizer's spread shows).
_CALIBRATION_REPEATS = 2


class ProbeNotPossible(FaultkitError):
    """The probe cannot be planned on this node; the message says why and what to set."""


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """What :func:`run_probe` will send: the limit, the token fit and the steps;
    ``current_limit`` is the current config's context limit when one was given."""

    limit: ContextLimit
    fit: PromptFit
    concurrency: int
    steps: tuple[ProbeStep, ...]
    current_limit: int | None = None


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step's answers: outcome (``ok`` or the error class) and HTTP status counts, the
    prompt tokens the node reported for the prompts it answered, and what was wrong."""

    step: ProbeStep
    outcomes: dict[str, int]
    statuses: dict[str, int]
    prompt_tokens: tuple[int, ...]
    problems: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        seen = self.prompt_tokens
        return {**self.step.to_json(), "outcomes": self.outcomes, "http_statuses": self.statuses,
                "prompt_tokens_seen": [min(seen), max(seen)] if seen else None,
                "problems": list(self.problems)}


@dataclass(slots=True)
class ProbeResult:
    plan: ProbePlan
    steps: list[StepResult] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [p for s in self.steps for p in s.problems]

    def to_json(self) -> dict[str, Any]:
        limit, fit = self.plan.limit, self.plan.fit
        return {
            "context_limit": limit.tokens, "limit_source": limit.source,
            "current_context_limit": self.plan.current_limit,
            "slots": limit.slots, "concurrency": self.plan.concurrency,
            "output_tokens": PROBE_OUTPUT_TOKENS,
            "tokens_per_word": round(fit.per_word, 4), "template_tokens": round(fit.overhead, 2),
            "fit_spread_tokens": round(fit.spread, 2),
            "steps": [s.to_json() for s in self.steps], "problems": self.problems,
        }


def _profile(words: int, requests: int, seed: int) -> LoadProfile:
    return LoadProfile(concurrency=requests, requests=requests, input_tokens=words,
                       output_tokens=PROBE_OUTPUT_TOKENS, seed=seed,
                       first_token_timeout_s=60.0, total_timeout_s=120.0,
                       reuse_connections=False)


async def _send(node: Node, words: int, requests: int, *, seed: int, name: str
                ) -> list[RequestRecord]:
    """``requests`` distinct prompts of ``words`` words at once; every answer awaited."""
    gen = LoadGenerator(Target.from_node(node), _profile(words, requests, seed),
                        id_prefix=f"limits-{name}-{os.urandom(2).hex()}")
    return (await gen.run()).records


async def calibrate(node: Node, limit: ContextLimit) -> PromptFit:
    """How the node counts the tokens of synthetic prompts: four calibration prompts (two of
    8 words, two of ``limit / 8``) and the fit of their ``usage.prompt_tokens``."""
    lengths = (8, max(16, limit.tokens // 8))
    samples: list[tuple[int, int]] = []
    for i, words in enumerate(lengths):
        records = await _send(node, words, _CALIBRATION_REPEATS, seed=900_001 + i, name="cal")
        for r in records:
            if r.status != "ok" or r.prompt_tokens is None:
                raise ProbeNotPossible(
                    f"node {node.name}: a {words}-word calibration prompt was "
                    f"{_describe(r)}; the probe needs the node to answer small prompts with "
                    "usage.prompt_tokens (stream_options.include_usage)")
            samples.append((words, r.prompt_tokens))
    try:
        return fit_prompt_tokens(samples)
    except ValueError as exc:
        raise ProbeNotPossible(f"node {node.name}: {exc}") from exc


async def prepare_probe(
    node: Node, *, concurrency: int | None = None,
    fractions: Sequence[float] = DEFAULT_FRACTIONS, current_limit: int | None = None,
) -> ProbePlan:
    """Read the limit, calibrate the prompt length on the node, plan the steps
    (:func:`~faultkit.probes.limits.plan_steps`; ``current_limit``: the context limit per
    request of the config the node served before this candidate, tokens)."""
    try:
        async with httpx.AsyncClient() as client:
            limit = await read_context_limit(node, client)
    except ContextLimitUnknown as exc:
        raise ProbeNotPossible(str(exc)) from exc
    fit = await calibrate(node, limit)
    n = concurrency or limit.slots or DEFAULT_CONCURRENCY
    try:
        steps = plan_steps(limit, fit, output_tokens=PROBE_OUTPUT_TOKENS, concurrency=n,
                           fractions=fractions, current_limit=current_limit)
    except ValueError as exc:
        raise ProbeNotPossible(f"node {node.name}: {exc}") from exc
    async with httpx.AsyncClient() as client:
        counter = await token_counter(node, client)
        if counter is not None:
            steps = [await exact_step(s, counter, fit, _target(s, limit)) for s in steps]
    return ProbePlan(limit, fit, n, tuple(steps), current_limit)


def _target(step: ProbeStep, limit: ContextLimit) -> int:
    """The prompt tokens a step aims at: its fraction of the room under its limit (the
    node's own, or the current config's), or just over the node's own limit."""
    if not step.within:
        return limit.tokens + over_margin(limit.tokens)
    bound = step.current_limit if step.current_limit is not None else limit.tokens
    return math.floor((bound - PROBE_OUTPUT_TOKENS) * step.fraction)


#: how many word counts :func:`exact_step` may try before it settles for the best so far
_MAX_TRIES = 40


async def exact_step(step: ProbeStep, count: TokenCounter, fit: PromptFit, target: int
                     ) -> ProbeStep:
    """The step with its words set by the node's own tokenizer: within the limit, the most
    words whose every prompt (request indices 0..requests-1) holds at most ``target``
    tokens; over it, the fewest words whose prompt holds at least ``target``."""

    async def counts(words: int) -> list[int]:
        return [await count(synthetic_prompt(words, seed=step.seed, index=k))
                for k in range(step.requests)]

    def fits(found: list[int]) -> bool:
        return max(found) <= target if step.within else min(found) >= target

    words, found = step.words, await counts(step.words)
    for _ in range(_MAX_TRIES):  # move towards the boundary in fitted jumps, then by one
        worst = max(found) if step.within else min(found)
        jump = max(1, math.floor(abs(target - worst) / fit.per_word / 2))
        if fits(found):
            nxt = words + jump if step.within else words - jump
        else:
            nxt = words - jump if step.within else words + jump
        nxt = max(1, nxt)
        nxt_found = await counts(nxt)
        if fits(found) != fits(nxt_found) and jump == 1:  # the boundary is between them
            if fits(nxt_found):
                words, found = nxt, nxt_found
            break
        words, found = nxt, nxt_found
    if not fits(found):
        return step  # the tokenizer never agreed with the plan: keep the fit's (safe) words
    planned = max(found) if step.within else min(found)
    return step.replace(words=words, planned_tokens=planned, exact=True)


async def run_probe(node: Node, plan: ProbePlan) -> ProbeResult:
    """Send every step in turn (its prompts at once) and judge each step's answers."""
    result = ProbeResult(plan)
    for step in plan.steps:
        records = await _send(node, step.words, step.requests, seed=step.seed, name=step.name)
        result.steps.append(judge_step(step, records, plan.limit))
        await asyncio.sleep(0)
    return result


def judge_step(step: ProbeStep, records: Sequence[RequestRecord], limit: ContextLimit
               ) -> StepResult:
    """A within-limit step passes when every prompt was answered in full; the over-limit
    step when its prompt got a 4xx with an OpenAI-style error body; the step at the
    current config's limit when its prompt was answered in full, as that config answers
    it (a clean 4xx reads "rejected")."""
    outcomes = Counter("ok" if r.status == "ok" else (r.error_class or r.status) for r in records)
    statuses = Counter(str(r.http_status) for r in records if r.http_status is not None)
    seen = tuple(r.prompt_tokens for r in records if r.prompt_tokens is not None)
    where = f"{step.name} step (~{step.planned_tokens} prompt tokens, limit {limit.tokens})"
    if step.current_limit is not None:
        where = (f"{step.name} step (~{step.planned_tokens} prompt tokens, the current "
                 f"config's limit {step.current_limit}, the node's {limit.tokens})")
    problems: list[str] = []
    if len(records) != step.requests:
        problems.append(f"{where}: {len(records)} of {step.requests} requests accounted for")
    for r in records:
        if step.current_limit is not None and r.status != "ok":
            answer = f"rejected ({_describe(r)})" if _clean_4xx(r) else _describe(r)
            problems.append(f"{where}: a prompt the current config answers was {answer}")
        elif step.within and r.status != "ok":
            problems.append(f"{where}: a prompt inside the limit was {_describe(r)}")
        elif not step.within and not _clean_4xx(r):
            problems.append(f"{where}: a prompt over the limit was {_describe(r)} "
                            "(expected a clean 4xx)")
    return StepResult(step, dict(outcomes), dict(statuses), seen, tuple(problems))


def _clean_4xx(r: RequestRecord) -> bool:
    code = r.http_status
    return r.status == "fail" and r.error_body and code is not None and 400 <= code < 500


def _describe(r: RequestRecord) -> str:
    if r.status == "ok":
        return f"answered {r.http_status or 200} ({r.output_tokens} tokens)"
    status = f"HTTP {r.http_status}" if r.http_status is not None else "no answer"
    detail = f": {r.error_detail[:120]}" if r.error_detail else ""
    return f"{status}, {r.error_class or r.status}{detail}"
