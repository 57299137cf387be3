"""What a soak found, from its evidence: the container's memory trend and the engine's
preemption counter over the soak (``scenarios/test_soak.py``; rules in :mod:`slo.trend`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from faultkit.inventory import Node
from faultkit.runtime.memwatch import MemorySample
from slo.errors import PrometheusError
from slo.profiles import NodeQueries
from slo.prom import Prometheus
from slo.trend import (
    DAY_S,
    CounterTrend,
    MemoryTrend,
    counter_trend,
    increase_within,
    memory_trend,
)


@dataclass(slots=True)
class SoakFindings:
    """The soak's window (epoch s), its memory trend (None: not watched) and its
    preemption trend (None: the engine has no such counter, ``preemptions_why`` says)."""

    t_from: float
    t_to: float
    memory: MemoryTrend | None = None
    memory_why: str = ""
    preemptions: CounterTrend | None = None
    preemptions_why: str = ""
    memory_samples: list[tuple[float, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "t_from": self.t_from, "t_to": self.t_to,
            "memory": self.memory.to_json() if self.memory else None,
            "memory_why": self.memory_why,
            "preemptions": self.preemptions.to_json() if self.preemptions else None,
            "preemptions_why": self.preemptions_why,
            "memory_samples": [[round(t, 3), b] for t, b in self.memory_samples],
        }


def judge_memory(findings: SoakFindings, samples: Sequence[MemorySample], errors: int,
                 *, horizon_s: float = DAY_S) -> None:
    """Fit the anonymous memory samples into ``findings.memory``."""
    points = [(s.t, s.anon) for s in samples if s.anon is not None]
    findings.memory_samples = [(t, int(b)) for t, b in points]
    if not points:
        findings.memory_why = (f"no memory sample ({errors} failed)" if errors else
                               "Docker reported no anonymous memory for the container")
        return
    limit = next((s.limit for s in reversed(samples) if s.limit), None)
    findings.memory = memory_trend(points, limit, horizon_s=horizon_s)
    findings.memory_why = findings.memory.why


def _preemption_samples(node: Node, prom: Prometheus, t_from: float, t_to: float
                        ) -> tuple[list[tuple[float, float]] | None, str]:
    """The engine's preemption (SGLang: retraction) counter, summed over its series, in
    ``[t_from, t_to]`` at 1 s steps, and the PromQL series it came from; ``(None, why)``
    when the engine has no such counter, the node is not scraped or Prometheus did not
    answer."""
    queries = NodeQueries.for_node(node)
    series = queries.series(queries.profile.preemptions) if queries else None
    if series is None:
        return None, (f"engine {node.profile_engine} exposes no preemption counter"
                      if queries else "the node is not scraped")
    try:
        result = prom.query_range(f"sum({series})", t_from, t_to, 1.0)
    except PrometheusError as exc:
        return None, f"Prometheus: {exc}"
    return (result[0].values if result else []), series


def judge_preemptions(findings: SoakFindings, node: Node, prom: Prometheus) -> None:
    """The engine's preemption (SGLang: retraction) counter over the soak, halves compared."""
    points, why = _preemption_samples(node, prom, findings.t_from, findings.t_to)
    if points is None:
        findings.preemptions_why = why
        return
    findings.preemptions = counter_trend(points, findings.t_from, findings.t_to)
    findings.preemptions_why = findings.preemptions.why


def preemptions_during(node: Node, prom: Prometheus, t_from: float, t_to: float
                       ) -> tuple[float | None, str]:
    """How often the engine preempted (SGLang: retracted) a running request in
    ``[t_from, t_to]`` (epoch s), from its counter in Prometheus; ``(None, why)`` when the
    engine has no such counter, the node is not scraped or Prometheus did not answer."""
    points, series = _preemption_samples(node, prom, t_from, t_to)
    if points is None:
        return None, series
    increase = increase_within(points, t_from, t_to)
    if increase is None:
        return None, f"fewer than 2 samples of {series} in the window"
    return increase, f"{increase:g} in the window"
