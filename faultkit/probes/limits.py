"""A node's context limit, read from the engine, and the prompts that probe it.

:func:`read_context_limit` asks the engine what one sequence may hold (prompt + output):

- vLLM, SGLang and the simulator: ``GET /v1/models`` → the served model's ``max_model_len``;
- llama.cpp: ``GET /props`` → ``default_generation_settings.n_ctx``, the context of *one
  slot* (``-c`` divided by ``-np``), and ``total_slots``, how many sequences it serves at
  once;
- any engine: the inventory's ``context_limit`` (and ``max_concurrency``) override both.

The probe (``context_limits`` fault, ``scenarios/test_limits.py``) needs prompts of a given
number of *tokens*, but it can only write words (:func:`faultkit.load.prompts.synthetic_prompt`).
:func:`fit_prompt_tokens` fits how the node's own tokenizer and chat template count them,
from the ``usage.prompt_tokens`` of a few calibration requests; :func:`plan_steps` turns a
limit and that fit into the probe's steps (docs/definitions.md, "Context limit").

:func:`context_limit_regression` is the one sentence that says a candidate config serves a
shorter context per request than the config it replaces: the limits probe's
``current_limit_served`` check and the gate's capability comparison
(:mod:`faultkit.gate.capability`) both write it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from faultkit.errors import NodeError
from faultkit.inventory import Node

#: Engines whose ``/v1/models`` cards carry ``max_model_len``.
_MODEL_CARD_ENGINES = frozenset({"vllm", "sglang", "sim"})
#: The fractions of the limit (minus the output) the probe fills, in order.
DEFAULT_FRACTIONS: tuple[float, ...] = (0.5, 0.9, 1.0)


class ContextLimitUnknown(NodeError):
    """The engine did not say how long a sequence may be, and the inventory does not either."""


@dataclass(frozen=True, slots=True)
class ContextLimit:
    """What one sequence may hold (prompt + output tokens), and where that figure came from.

    ``slots`` is how many sequences the node serves at once when the engine or the
    inventory says (llama.cpp's ``total_slots``); None when it does not.
    """

    tokens: int
    source: str
    slots: int | None = None


async def read_context_limit(node: Node, client: httpx.AsyncClient) -> ContextLimit:
    """The node's context limit: the inventory's override, else the engine's own answer.

    Raises :class:`ContextLimitUnknown` naming the endpoint that failed and the inventory
    field that would answer instead."""
    if node.context_limit is not None:
        return ContextLimit(node.context_limit, "inventory context_limit", node.max_concurrency)
    headers = {"Authorization": f"Bearer {key}"} if (key := node.api_key()) else {}
    if node.engine == "llamacpp":
        body = await _get_json(node, client, "/props", headers)
        limit = _llamacpp_limit(body)
    elif node.engine in _MODEL_CARD_ENGINES:
        body = await _get_json(node, client, "/v1/models", headers)
        limit = _model_card_limit(body, node.model)
    else:
        raise ContextLimitUnknown(
            f"node {node.name}: faultkit cannot read a context limit from engine "
            f"{node.engine!r}; set context_limit (tokens per sequence) on the node in the "
            "inventory"
        )
    if limit is None:
        raise ContextLimitUnknown(
            f"node {node.name}: the engine's answer names no context limit; set context_limit "
            "(tokens per sequence) on the node in the inventory"
        )
    if node.max_concurrency is not None:
        return ContextLimit(limit.tokens, limit.source, node.max_concurrency)
    return limit


async def _get_json(
    node: Node, client: httpx.AsyncClient, path: str, headers: dict[str, str]
) -> Any:
    url = node.base_url + path
    try:
        response = await client.get(url, headers=headers, timeout=10.0)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ContextLimitUnknown(
            f"node {node.name}: GET {url} failed ({type(exc).__name__}: {exc}); the node must "
            "serve it, or set context_limit (tokens per sequence) on the node in the inventory"
        ) from exc


def _model_card_limit(body: Any, model: str) -> ContextLimit | None:
    """``max_model_len`` of the card whose id is ``model`` (else of the only card)."""
    cards = body.get("data") if isinstance(body, dict) else None
    if not isinstance(cards, list):
        return None
    chosen = [c for c in cards if isinstance(c, dict) and c.get("id") == model]
    if not chosen and len(cards) == 1 and isinstance(cards[0], dict):
        chosen = cards
    value = chosen[0].get("max_model_len") if chosen else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return ContextLimit(value, "/v1/models max_model_len")
    return None


def _llamacpp_limit(body: Any) -> ContextLimit | None:
    """``n_ctx`` of one slot and the number of slots, from llama-server's ``/props``."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if not isinstance(n_ctx, int) or isinstance(n_ctx, bool) or n_ctx <= 0:
        return None
    slots = body.get("total_slots")
    ok_slots = isinstance(slots, int) and not isinstance(slots, bool) and slots > 0
    return ContextLimit(n_ctx, "/props n_ctx (one slot)", slots if ok_slots else None)


#: counts the prompt tokens of one chat message's text as a chat completion would
TokenCounter = Callable[[str], Awaitable[int]]


async def token_counter(node: Node, client: httpx.AsyncClient) -> TokenCounter | None:
    """The engine's own tokenizer for a user message, chat template included, or None when
    the engine offers none the probe knows (or it does not answer):

    - vLLM and the simulator's vLLM personality: ``POST /tokenize`` with ``messages``
      (``count``);
    - llama.cpp: ``POST /apply-template`` (the templated prompt), then ``POST /tokenize``
      of it with the special tokens (BOS), as a chat completion tokenizes it.
    """
    headers = {"Authorization": f"Bearer {key}"} if (key := node.api_key()) else {}

    async def post(path: str, body: dict[str, Any]) -> Any:
        response = await client.post(node.base_url + path, json=body, headers=headers,
                                     timeout=10.0)
        response.raise_for_status()
        return response.json()

    async def vllm(text: str) -> int:
        body = await post("/tokenize", {"model": node.model, "add_generation_prompt": True,
                                        "messages": [{"role": "user", "content": text}]})
        return int(body["count"])

    async def llamacpp(text: str) -> int:
        templated = await post("/apply-template",
                               {"messages": [{"role": "user", "content": text}]})
        body = await post("/tokenize", {"content": templated["prompt"], "add_special": True})
        return len(body["tokens"])

    count: TokenCounter | None = None
    if node.engine == "llamacpp":
        count = llamacpp
    elif node.engine == "vllm" or (node.engine == "sim" and node.personality == "vllm"):
        count = vllm
    if count is None:
        return None
    try:
        await count("probe")
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return count


#: the least margin of a planned prompt, as a fraction of its fitted tokens (PromptFit.margin)
MARGIN_FLOOR = 0.01


@dataclass(frozen=True, slots=True)
class PromptFit:
    """How many prompt tokens the node counts for a synthetic prompt of ``w`` words:
    about ``per_word * w + overhead``; ``spread`` is the largest miss of that line on the
    calibration requests (tokens), so a prompt planned ``spread`` below a bound stays
    under it."""

    per_word: float
    overhead: float
    spread: float
    #: the longest calibration prompt (words): the spread grows beyond it as sqrt(words)
    longest: int = 1

    def margin(self, words: int) -> int:
        """Tokens a prompt of ``words`` words may miss the fit by: the calibration's spread,
        grown as the square root of the length beyond the longest calibration prompt, and
        never under :data:`MARGIN_FLOOR` of the prompt's fitted tokens.

        The floor is for the fit's slope: it is learnt on prompts of ``limit / 8`` words
        and carried to the whole limit, eight times further, where an error of a few
        thousandths of a token per word is tens of tokens — and four calibration prompts
        often miss the line by 0 or 1, a spread that promises nothing. Measured on the
        simulator's SGLang personality (no tokenizer endpoint; words over 8 letters count
        2): with the spread alone, 24 of 60 calibrations planned a 100 % prompt over the
        limit (the lab's own: 4,090 tokens of 4,088); with a 1 % floor, 0 of 80.
        Engines whose tokenizer the probe can ask are made exact afterwards
        (:func:`faultkit.probes.context.exact_step`)."""
        grown = self.spread * math.sqrt(max(1.0, words / max(1, self.longest)))
        return math.ceil(max(grown, MARGIN_FLOOR * self.tokens_for(words)))

    def words_for(self, tokens: float) -> int:
        """The most words whose prompt the fit puts at or under ``tokens`` (at least 1)."""
        return max(1, math.floor((tokens - self.overhead) / self.per_word))

    def tokens_for(self, words: int) -> float:
        return self.per_word * words + self.overhead


def fit_prompt_tokens(samples: Sequence[tuple[int, int]]) -> PromptFit:
    """Least squares of reported prompt tokens on words, from ``(words, prompt_tokens)``.

    Needs at least two distinct word counts; raises ValueError otherwise, or when the fit
    is not increasing (a node that does not count its prompt tokens)."""
    if len({w for w, _ in samples}) < 2:
        raise ValueError("need prompt_tokens for at least two different prompt lengths")
    n = len(samples)
    mean_w = sum(w for w, _ in samples) / n
    mean_t = sum(t for _, t in samples) / n
    sww = sum((w - mean_w) ** 2 for w, _ in samples)
    swt = sum((w - mean_w) * (t - mean_t) for w, t in samples)
    per_word = swt / sww
    if per_word <= 0:
        raise ValueError(f"prompt tokens do not grow with the prompt: {list(samples)}")
    overhead = mean_t - per_word * mean_w
    spread = max(abs(t - (per_word * w + overhead)) for w, t in samples)
    return PromptFit(per_word, overhead, spread, max(w for w, _ in samples))


@dataclass(frozen=True, slots=True)
class ProbeStep:
    """One step of the probe: ``requests`` prompts of ``words`` words at once (prompt seed
    ``seed``, request indices 0..requests-1), planned to hold ``planned_tokens`` prompt
    tokens — the longest of them for a within-limit step, exactly when ``exact`` (counted
    by the node's own tokenizer), else by the fit; ``within`` says whether prompt + output
    fits the limit (must be answered) or not (must be a clean 4xx).

    ``current_limit`` is set on the one step sized to the *current* config's context limit
    (the config the node served before this candidate) instead of the node's own, which
    is smaller: ``within`` is then True of that limit — the current config answers such a
    prompt in full, and so must the candidate."""

    name: str
    fraction: float
    words: int
    planned_tokens: int
    requests: int
    within: bool
    seed: int = 0
    exact: bool = False
    current_limit: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "fraction": self.fraction, "words": self.words,
                "planned_tokens": self.planned_tokens, "requests": self.requests,
                "within": self.within, "seed": self.seed, "exact": self.exact,
                "current_limit": self.current_limit}

    def replace(self, **changes: Any) -> ProbeStep:
        return dataclasses.replace(self, **changes)


def over_margin(limit: int) -> int:
    """How far over the limit the rejected prompt is planned: 1 % of it, at least 8 tokens,
    so that the fit's own error cannot bring it back under."""
    return max(8, math.ceil(limit * 0.01))


def plan_steps(
    limit: ContextLimit,
    fit: PromptFit,
    *,
    output_tokens: int,
    concurrency: int,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    current_limit: int | None = None,
) -> list[ProbeStep]:
    """The probe's steps: each fraction of ``limit − output`` at ``concurrency`` prompts at
    once, then one prompt just over the limit — and, when ``current_limit`` (the current
    config's context limit) is larger than ``limit``, one prompt sized to
    ``current_limit − output`` as the 100 % step is (:data:`CURRENT_STEP`), last.

    A within-limit prompt is planned the fit's margin (:meth:`PromptFit.margin`) under its
    bound, so the 100 % step is the longest prompt the fit can promise to fit; the
    over-limit prompt is planned :func:`over_margin` (plus the margin) over the whole
    limit *without* counting the output, which every engine rejects (llama.cpp would
    otherwise accept it and cut the answer short). :func:`faultkit.probes.context.prepare_probe`
    then makes the words exact where the node can count tokens itself.
    Raises ValueError when the output alone does not leave room for a prompt."""
    room = limit.tokens - output_tokens
    if room < 2:
        raise ValueError(f"output_tokens {output_tokens} leaves no room for a prompt in a "
                         f"context of {limit.tokens}")
    steps: list[ProbeStep] = []
    for i, fraction in enumerate(fractions):
        words = _words_within(fit, math.floor(room * fraction))
        steps.append(ProbeStep(f"{round(fraction * 100)}%", fraction, words,
                               round(fit.tokens_for(words)), concurrency, within=True,
                               seed=STEP_SEED + i))
    over = limit.tokens + over_margin(limit.tokens)
    words = math.ceil((over - fit.overhead) / fit.per_word)
    words = math.ceil((over + fit.margin(words) - fit.overhead) / fit.per_word)
    steps.append(ProbeStep("over", round(over / limit.tokens, 3), words,
                           round(fit.tokens_for(words)), 1, within=False,
                           seed=STEP_SEED + len(fractions)))
    if current_limit is not None and current_limit > limit.tokens:
        words = _words_within(fit, current_limit - output_tokens)
        steps.append(ProbeStep(CURRENT_STEP, 1.0, words, round(fit.tokens_for(words)), 1,
                               within=True, seed=STEP_SEED + len(fractions) + 1,
                               current_limit=current_limit))
    return steps


def _words_within(fit: PromptFit, target: int) -> int:
    """The most words whose prompt the fit promises, margin included, at or under ``target``."""
    return fit.words_for(target - fit.margin(fit.words_for(target)))


#: the name of the step sized to the current config's context limit (:func:`plan_steps`)
CURRENT_STEP = "current"


def context_limit_regression(candidate: int, current: int) -> str:
    """Why a candidate whose context limit per request (``candidate`` tokens) is below the
    current config's (``current``) serves less than it: every prompt between the two is
    refused after the promotion."""
    return (f"context limit per request {candidate:,} tokens vs {current:,} on the current "
            "config: prompts between them would be rejected")


#: the prompt seed of the probe's first step (each step has its own: no shared prefix)
STEP_SEED = 910_001
