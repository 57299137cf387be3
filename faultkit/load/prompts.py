"""Deterministic synthetic prompts of a requested length.

Approximation: one *token* ≈ one short, common English word preceded by a space. For the
BPE/SentencePiece tokenizers of Llama, Qwen, Mistral and GPT-style models each word below
is a single token (``" the"``, ``" time"``…), so a prompt of N words tokenizes to about N
tokens (within a few percent, plus the chat template's own tokens, ~5–15 for chat
requests). Exact counts, when the server reports them, are in ``RequestRecord.prompt_tokens``.

Each prompt starts with its request index so that two requests never share a long common
prefix (prefix caching would otherwise make every prompt after the first nearly free).
The text depends only on ``(seed, index, n_tokens)``: the words are drawn from SHAKE-128
of ``"seed:index"`` (one byte a word, bytes past the word list skipped), which costs a
request about 2 µs where a seeded ``random.Random`` cost 8 µs — the load client builds one
prompt per request (``bench/load_client.py``). A longer prompt of the same request extends
a shorter one.

Workload classes (:data:`WORKLOADS`, docs/load.md "Workload classes"): what a request
asks for decides what speculative decoding can do for it, so a load profile names its
class and every request's class is in the ledger (``RequestRecord.workload``):

- ``free`` — free text: the prompt above, words drawn at random; nothing in it predicts
  the answer;
- ``extractive`` — repetitive/extractive text: a passage, then the instruction to repeat
  it, then the passage again (as a quoting, editing or summarising-by-extraction request
  carries the text its answer reuses). Half of the prompt's n-grams recur in it: an
  n-gram (prompt-lookup) drafter finds its proposals there.
"""

from __future__ import annotations

import hashlib

__all__ = ["MIXED", "WORDS", "WORKLOADS", "synthetic_prompt", "workload_of", "workload_prompt"]

#: the workload classes, in the order ``mixed`` alternates them
WORKLOADS: tuple[str, ...] = ("free", "extractive")
#: a profile's workload that alternates :data:`WORKLOADS` request by request
MIXED = "mixed"
#: between an extractive prompt's passage and its repetition
_REPEAT = "repeat it"

#: Short words that are one token in common LLM tokenizers (with a leading space).
WORDS: tuple[str, ...] = tuple(
    """the of and to in is it you that he was for on are as with his they at be this
    have from or one had by word but not what all were we when your can said there use
    an each which she do how their if will up other about out many then them these so
    some her would make like him into time has look two more write go see number no way
    could people my than first water been call who oil its now find long down day did get
    come made may part over new sound take only little work know place year live me back
    give most very after thing our just name good sentence man think say great where help
    through much before line right too mean old any same tell boy follow came want show
    also around form three small set put end does another well large must big even such
    because turn here why ask went men read need land different home us move try kind hand
    picture again change off play spell air away animal house point page letter mother
    answer found study still learn should world high every near add food between own below
    country plant last school father keep tree never start city earth eye light thought
    head under story saw left few while along might close something seem next hard open
    example begin life always those both paper together got group often run""".split()  # noqa: SIM905
)


def synthetic_prompt(n_tokens: int, *, seed: int, index: int) -> str:
    """A prompt of about ``n_tokens`` tokens, the same for the same ``(seed, index)``."""
    if n_tokens < 1:
        raise ValueError(f"input_tokens must be >= 1 (got {n_tokens})")
    return " ".join([str(index), *_words(n_tokens - 1, seed, index)])


def workload_of(workload: str, index: int) -> str:
    """The class of request number ``index`` under a profile's ``workload`` (a class of
    :data:`WORKLOADS`, or :data:`MIXED`: alternating them)."""
    if workload == MIXED:
        return WORKLOADS[index % len(WORKLOADS)]
    if workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {', '.join((*WORKLOADS, MIXED))} "
                         f"(got {workload!r})")
    return workload


def workload_prompt(workload: str, n_tokens: int, *, seed: int, index: int) -> str:
    """Request ``index``'s prompt under ``workload`` (:func:`workload_of`): about
    ``n_tokens`` tokens, the same for the same ``(workload, seed, index)``."""
    if workload_of(workload, index) == "free":
        return synthetic_prompt(n_tokens, seed=seed, index=index)
    if n_tokens < 1:
        raise ValueError(f"input_tokens must be >= 1 (got {n_tokens})")
    half = max((n_tokens - 3) // 2, 1)
    passage = " ".join(_words(half, seed, index))
    return f"{index} {passage} {_REPEAT} {passage}"


def _words(k: int, seed: int, index: int) -> list[str]:
    """``k`` words drawn from SHAKE-128 of ``"seed:index"`` (module docstring)."""
    key = f"{seed}:{index}".encode()
    want = k + k // 8 + 16
    while True:  # SHAKE is an XOF: a longer digest extends the shorter one
        picks = hashlib.shake_128(key).digest(want).translate(None, _PAST_WORDS)
        if len(picks) >= k:
            break
        want *= 2
    return list(map(WORDS.__getitem__, picks[:k]))


#: digest bytes that name no word (the list has fewer than 256): skipped, so every word is
#: equally likely
_PAST_WORDS = bytes(range(len(WORDS), 256))
