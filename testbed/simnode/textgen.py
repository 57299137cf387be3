"""Token counting and deterministic pseudo-text (no tokenizer available: a documented rule).

Token rule: every run of up to 8 word characters, and every other non-space character,
is one token (``"hello world"`` → 2, ``"word " * 3000`` → 3000, long words cost more).
A chat request adds 4 tokens per message plus 3 for the assistant turn, roughly what a
Llama-3 chat template adds. A ``prompt`` given as a list of token ids counts its length.

Output text: token ``i`` of a request is a word drawn from a fixed vocabulary by a hash of
the prompt, the seed and ``i``: same request → same text.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

_TOKEN_RE = re.compile(r"\w{1,8}|[^\w\s]")

VOCAB: tuple[str, ...] = tuple(
    " " + w
    for w in [
        "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
        "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but",
        "have", "an", "they", "you", "were", "her", "she", "there", "one", "all", "we", "can",
        "has", "been", "if", "more", "when", "will", "would", "who", "so", "no", "model",
        "token", "cache", "block", "batch", "queue", "node", "engine", "stream", "latency",
        "memory", "graph", "tensor", "kernel", "layer", "weight", "prompt", "answer", "signal",
        "metric", "probe", "fault",
    ]
)
#: the vocabulary pre-encoded as JSON string literals (hot path of streaming)
VOCAB_JSON: tuple[str, ...] = tuple(json.dumps(w) for w in VOCAB)


def count_text_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def count_prompt_tokens(prompt: Any) -> int:
    """``/v1/completions`` prompt: a string, a list of token ids, or a one-element list of those.

    Raises ``ValueError`` with a client-facing message for anything else.
    """
    if isinstance(prompt, str):
        return count_text_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return count_prompt_tokens(prompt[0])
    raise ValueError("prompt must be a string or a list of token ids")


def count_chat_tokens(messages: Any) -> int:
    """Tokens of a chat ``messages`` list after the (simulated) chat template."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    total = 3
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError("each message must be an object with a role")
        content = m.get("content")
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        total += 4 + count_text_tokens(str(content or ""))
    return total


def prompt_text(payload: dict[str, Any], *, chat: bool) -> str:
    """The request's prompt as text: the chat messages' contents joined, or the completion
    prompt (token ids as their numbers)."""
    if chat:
        parts = []
        for m in payload.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content
                                   if isinstance(p, dict))
            parts.append(str(content or ""))
        return " ".join(parts)
    prompt = payload.get("prompt")
    return prompt if isinstance(prompt, str) else " ".join(map(str, prompt or []))


def request_seed(payload_key: str, seed: int) -> int:
    return zlib.crc32(payload_key.encode("utf-8", "replace")) ^ (seed * 2654435761 & 0xFFFFFFFF)


def token_index(seed: int, i: int) -> int:
    """Vocabulary index of output token ``i`` for a request seed."""
    return ((seed ^ (i * 40503)) * 2654435761 >> 7) % len(VOCAB)


def natural_length(seed: int) -> int:
    """How many tokens the "model" wants to say before EOS (8–135)."""
    return 8 + seed % 128


def text_of(seed: int, n: int) -> str:
    return "".join(VOCAB[token_index(seed, i)] for i in range(n))
