"""Speculative decoding, as an n-gram drafter does it (vLLM's ``ngram`` method, SGLang's
``NGRAM``): each decode step of a request drafts ``k`` tokens, one forward pass verifies
them, and the request emits the accepted prefix of the drafts plus one token of its own.

The model (docs/testbed.md, "Speculative decoding in the simulator"):

- **acceptance** — the chance that a draft token is accepted, per request, from its prompt:
  an n-gram drafter proposes what followed the last tokens earlier in the context, so it
  wins where the answer reuses the prompt. The simulator's text is not the prompt's, so
  the share of the prompt's word trigrams that recur in it stands for that reuse
  (:func:`recurring_trigrams`): ``floor + (ceiling - floor) * min(1, 2 * share)``. An
  extractive prompt (a passage and its repetition: share ≈ 0.5) drafts at the ceiling, a
  free one (share ≈ 0) at the floor;
- **accepted length** — the drafts are checked in order; the first rejected one ends the
  step's acceptance (:func:`accepted_drafts`). So a step emits ``1 + a`` tokens, ``a`` in
  ``0..k``, with mean ``(1 - α**(k+1)) / (1 - α)``;
- **cost** — every decoding sequence pays for its ``k`` drafted tokens in the verifying
  pass and for drafting them (:class:`~testbed.simnode.timing.TimingModel`), accepted or
  not. So speculation wins where acceptance is high and loses where it is low, as it does
  on a real engine.

Draws come from the request's own seeded generator: a rerun of the same request drafts
and accepts the same.
"""

from __future__ import annotations

import random
import re

__all__ = ["Drafter", "accepted_drafts", "recurring_trigrams"]

_WORD = re.compile(r"\S+")


def recurring_trigrams(text: str) -> float:
    """The share of ``text``'s word trigrams that appeared earlier in it (0 when it has
    none): what a prompt-lookup drafter can find."""
    words = _WORD.findall(text)
    seen: set[tuple[str, str, str]] = set()
    recurring = 0
    for gram in zip(words, words[1:], words[2:], strict=False):
        recurring += gram in seen
        seen.add(gram)
    total = max(len(words) - 2, 0)
    return recurring / total if total else 0.0


def accepted_drafts(rng: random.Random, acceptance: float, k: int) -> int:
    """How many of ``k`` drafts one verifying pass accepts: each in turn with probability
    ``acceptance``, until the first rejection."""
    accepted = 0
    while accepted < k and rng.random() < acceptance:
        accepted += 1
    return accepted


class Drafter:
    """A node's speculation settings: ``k`` drafts a step, acceptance between ``floor`` and
    ``ceiling``. ``k == 0``: no speculation (every step emits one token)."""

    def __init__(self, k: int, floor: float, ceiling: float) -> None:
        if k < 0 or not 0.0 <= floor <= ceiling <= 1.0:
            raise ValueError("need k >= 0 and 0 <= floor <= ceiling <= 1")
        self.k, self.floor, self.ceiling = k, floor, ceiling

    @property
    def enabled(self) -> bool:
        return self.k > 0

    def acceptance_of(self, prompt: str) -> float:
        """A request's per-draft acceptance, from its prompt (module docstring)."""
        share = min(1.0, 2.0 * recurring_trigrams(prompt))
        return self.floor + (self.ceiling - self.floor) * share
