"""How many sequences of the context limit the engine's KV cache holds, in its own words.

vLLM states its KV cache in the labels of ``vllm:cache_config_info`` (an info gauge):
``kv_cache_size_tokens`` in recent releases (0.32: 2048 for 4 MiB of the lab's tiny
model), else ``num_gpu_blocks`` × ``block_size`` (older releases; the simulator). A KV
cache of ``T`` tokens holds ``T // limit`` sequences of a ``limit``-token context at once;
vLLM prints the same figure at start-up ("Maximum concurrency for N tokens per request")
and, since 0.11, as the label ``kv_cache_max_concurrency``. A sequence the cache cannot
hold waits in the queue or, when running ones grow, is preempted and computed again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from faultkit.inventory import Node
from slo.errors import PrometheusError
from slo.profiles import NodeQueries
from slo.prom import Prometheus

__all__ = ["KvCapacity", "kv_capacity", "kv_tokens_from_labels"]


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """The engine's KV cache in tokens, and which labels said so."""

    tokens: int
    source: str

    def sequences(self, limit_tokens: int) -> int:
        """Sequences of ``limit_tokens`` (prompt + output) the cache holds at once."""
        return self.tokens // limit_tokens


def kv_tokens_from_labels(metric: str, labels: Mapping[str, str]) -> KvCapacity | None:
    """The KV cache's size from an info gauge's labels; ``None`` when they do not say."""
    try:
        if tokens := labels.get("kv_cache_size_tokens"):
            return KvCapacity(int(tokens), f"{metric} kv_cache_size_tokens={tokens}")
        blocks, size = labels.get("num_gpu_blocks"), labels.get("block_size")
        if blocks and size:
            return KvCapacity(int(blocks) * int(size),
                              f"{metric} num_gpu_blocks={blocks} x block_size={size}")
    except ValueError:  # "None", or another word where a number belongs
        return None
    return None


def kv_capacity(node: Node, prom: Prometheus) -> tuple[KvCapacity | None, str]:
    """The node's KV cache as its engine reports it to Prometheus now; ``(None, why)`` when
    the engine states none, the node is not scraped or Prometheus did not answer."""
    queries = NodeQueries.for_node(node)
    metric = queries.profile.cache_config if queries else None
    series = queries.series(metric) if queries else None
    if metric is None or series is None:
        return None, (f"engine {node.profile_engine} states no KV cache size" if queries
                      else "the node is not scraped")
    try:
        samples = prom.query(series)
    except PrometheusError as exc:
        return None, f"Prometheus: {exc}"
    found = [c for s in samples if (c := kv_tokens_from_labels(metric.name, s.labels))]
    if len(found) != 1:
        return None, (f"{series}: {len(samples)} series, {len(found)} with a KV cache size "
                      "(expected one)")
    return found[0], found[0].source
