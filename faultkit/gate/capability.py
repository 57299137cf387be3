"""The gate's capability comparison: what the candidate can serve against what the config
running now can, read from the engine itself beside each steady state (docs/gate.md,
"Capabilities").

A candidate can meet every objective at the gate's load and still serve less than the
config it replaces: a shorter context per request rejects the prompts that fit between the
two limits; a smaller KV cache holds fewer sequences at once, so long requests queue or are
preempted at a concurrency the current config carried. The limits probe adapts to the
candidate's own limits and cannot see either, so the gate compares the two configs'
figures:

- **context limit per request** (``/v1/models`` ``max_model_len``, llama.cpp's ``n_ctx``
  of one slot, or the inventory's ``context_limit``): any drop FAILs — it is exact, and
  every prompt between the two limits is refused after the promotion;
- **KV cache** (the engine's own statement to Prometheus: vLLM's ``cache_config_info``):
  below :data:`KV_RATIO_MIN` of the current's FAILs, with how many sequences of the
  current context limit each holds;
- **sequences at once**, where the engine serves a fixed number (llama.cpp's
  ``total_slots`` in ``/props``): any drop FAILs — the users beyond it queue.

A figure an engine does not state is shown as not read and judged on neither side.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass

import httpx

from faultkit.errors import FaultkitError
from faultkit.inventory import Node
from faultkit.probes.limits import ContextLimit, context_limit_regression, read_context_limit
from slo.kvcache import kv_capacity
from slo.prom import Prometheus

__all__ = ["KV_RATIO_MIN", "Capabilities", "capability_regressions", "context_limit_now",
           "read_capabilities"]

#: a KV cache below this share of the current config's is a regression: a 10 % band, so
#: that a rounding of the engine's memory profiling does not fail a config
KV_RATIO_MIN = 0.9


@dataclass(frozen=True)
class Capabilities:
    """What one config serves, as its engine states it (``None``: not read, and why)."""

    context_tokens: int | None
    context_source: str
    kv_cache_tokens: int | None
    kv_source: str
    #: sequences served at once, where the engine states a fixed number (llama.cpp's slots)
    sequences: int | None = None
    sequences_source: str = "not stated by the engine"

    def to_json(self) -> dict[str, object]:
        return asdict(self)


async def read_capabilities(node: Node, prometheus_url: str) -> Capabilities:
    """The serving config's capabilities on ``node`` now: its context limit from the engine
    (or the inventory), its KV cache from Prometheus' latest scrape of it."""
    limit = await _read_limit(node)
    context, context_source = ((limit.tokens, limit.source) if isinstance(limit, ContextLimit)
                               else (None, limit))
    # the inventory's override states the node's need, not the config's capability
    sequences = (limit.slots if isinstance(limit, ContextLimit) and node.context_limit is None
                 else None)

    def kv() -> tuple[int | None, str]:
        with Prometheus(prometheus_url) as prom:
            capacity, detail = kv_capacity(node, prom)
        return (capacity.tokens, capacity.source) if capacity else (None, f"not read: {detail}")

    kv_tokens, kv_source = await asyncio.to_thread(kv)
    return Capabilities(context, context_source, kv_tokens, kv_source, sequences,
                        f"{context_source}: total_slots" if sequences is not None
                        else "not stated by the engine")


async def context_limit_now(node: Node) -> tuple[int | None, str]:
    """The context limit per request ``node`` serves now and where it was read (``None``:
    not read, and why) — also what the gate gives the limits probe as the current
    config's limit (its ``--current-context-limit``)."""
    limit = await _read_limit(node)
    return (limit.tokens, limit.source) if isinstance(limit, ContextLimit) else (None, limit)


async def _read_limit(node: Node) -> ContextLimit | str:
    """The node's context limit as the engine (or the inventory) states it, or why not."""
    try:
        async with httpx.AsyncClient() as client:
            return await read_context_limit(node, client)
    except (FaultkitError, httpx.HTTPError) as exc:
        return f"not read: {exc}"


def capability_regressions(current: Capabilities, candidate: Capabilities) -> list[str]:
    """Why the candidate serves less than the current config, one sentence per capability
    (module docstring); empty when it does not, or when a side was not read."""
    found = []
    before, after = current.context_tokens, candidate.context_tokens
    if before is not None and after is not None and after < before:
        found.append(context_limit_regression(after, before))
    kv_before, kv_after = current.kv_cache_tokens, candidate.kv_cache_tokens
    if kv_before and kv_after is not None and kv_after < KV_RATIO_MIN * kv_before:
        limit = before or after
        held = (f": {kv_before // limit} → {kv_after // limit} sequences of the "
                f"{limit:,}-token limit at once" if limit else "")
        found.append(f"KV cache {kv_after:,} tokens vs {kv_before:,} on the current config "
                     f"(×{kv_after / kv_before:.2f}, below ×{KV_RATIO_MIN:g}){held}")
    seq_before, seq_after = current.sequences, candidate.sequences
    if seq_before is not None and seq_after is not None and seq_after < seq_before:
        found.append(f"sequences at once {seq_after} vs {seq_before} on the current config: "
                     f"users beyond {seq_after} at a time would queue")
    return found
