"""Speculative decoding judged per workload class: does it pay for the requests a node
serves?

Speculation drafts tokens and verifies them in one pass: a request whose answer the
drafter predicts (repetitive, extractive text) emits several tokens a step, one whose
answer it cannot predict (free text) pays for drafts it throws away. So it is judged per
workload class (:data:`faultkit.load.prompts.WORKLOADS`), never globally
(docs/slo.md, "Speculative decoding, per workload"):

- the figure is each request's **TPOT** — time per output token after the first, what a
  streaming user feels — in one run with speculation and one without, same class, same
  load, same node;
- the **verdict** (:func:`judge_class`) compares the two medians by their ratio
  ``with / without``, with a 95 % bootstrap interval of that ratio (:data:`RESAMPLES`
  resamples of each side, seeded): **wins** when the whole interval is below
  ``1 - NOISE``, **loses** when it is above ``1 + NOISE``, else **no difference within
  noise** (also when either side has fewer than :data:`MIN_REQUESTS` timed requests:
  then there is nothing to tell apart);
- a node's declared workload (inventory ``workload``) decides: speculation is for it when
  it does not lose on that class (``mixed``: on the union of both classes' requests).

The acceptance rate (accepted / drafted tokens, the engine's own counters) explains a
verdict; it does not make one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from faultkit.load.stats import tpot_s
from faultkit.model.records import RequestRecord
from slo import uncertainty

__all__ = [
    "MIN_REQUESTS",
    "NOISE",
    "RESAMPLES",
    "ClassFigures",
    "ClassVerdict",
    "Outcome",
    "class_figures",
    "combined",
    "judge_class",
    "ratio_interval",
]

Outcome = Literal["wins", "loses", "no difference"]

#: a change of the median TPOT smaller than this share is noise on a shared machine
NOISE = 0.05
#: bootstrap resamples of each side for the ratio's interval
RESAMPLES = 2000
#: timed requests (two or more output tokens) each side needs before it is compared
MIN_REQUESTS = 8


@dataclass(frozen=True)
class ClassFigures:
    """One workload class on one config: its requests' TPOTs and what the engine counted
    (``None``: not counted — no speculation, or an engine without the counters)."""

    workload: str
    requests: int
    ok: int
    tpot_s: tuple[float, ...]
    output_tokens_per_s: float | None
    drafted_tokens: float | None = None
    accepted_tokens: float | None = None

    @property
    def tpot_p50_s(self) -> float | None:
        return statistics.median(self.tpot_s) if self.tpot_s else None

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted / drafted tokens (``None`` without drafts)."""
        if not self.drafted_tokens or self.accepted_tokens is None:
            return None
        return self.accepted_tokens / self.drafted_tokens

    def to_json(self) -> dict[str, Any]:
        """The figures without the per-request TPOTs (their median stands for them)."""
        data = asdict(self)
        del data["tpot_s"]
        data.update(timed=len(self.tpot_s), tpot_p50_s=self.tpot_p50_s,
                    acceptance_rate=self.acceptance_rate)
        return data


@dataclass(frozen=True)
class ClassVerdict:
    """Speculation on one workload class: the outcome, the ratio of the median TPOTs
    (with / without) and its interval, and why, in a sentence."""

    workload: str
    outcome: Outcome
    ratio: float | None
    low: float | None
    high: float | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def class_figures(workload: str, records: Sequence[RequestRecord], seconds: float,
                  drafted: float | None = None, accepted: float | None = None
                  ) -> ClassFigures:
    """The figures of ``records`` (one class, one config, a run of ``seconds``)."""
    ok = [r for r in records if r.status == "ok"]
    tpots = tuple(t for r in ok if (t := tpot_s(r)) is not None)
    tokens = sum(r.output_tokens or 0 for r in ok)
    return ClassFigures(workload=workload, requests=len(records), ok=len(ok), tpot_s=tpots,
                        output_tokens_per_s=tokens / seconds if seconds > 0 else None,
                        drafted_tokens=drafted, accepted_tokens=accepted)


def ratio_interval(with_spec: Sequence[float], without: Sequence[float], *,
                   resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """The ratio of the medians ``with_spec / without`` and its 95 % bootstrap interval
    (:func:`slo.uncertainty.ratio_interval`)."""
    return uncertainty.ratio_interval(with_spec, without, statistics.median,
                                      resamples=resamples, seed=seed)


def judge_class(with_spec: ClassFigures, without: ClassFigures) -> ClassVerdict:
    """Speculation on one class: wins, loses or no difference within noise (module
    docstring)."""
    workload = with_spec.workload
    short = [side for side, f in (("with", with_spec), ("without", without))
             if len(f.tpot_s) < MIN_REQUESTS]
    if short:
        return ClassVerdict(workload, "no difference", None, None, None,
                            f"too few timed requests {' and '.join(short)} speculation "
                            f"(fewer than {MIN_REQUESTS}): nothing to tell apart")
    ratio, low, high = ratio_interval(with_spec.tpot_s, without.tpot_s)
    span = f"TPOT ×{ratio:.2f} (95 % interval ×{low:.2f}–×{high:.2f})"
    rate = with_spec.acceptance_rate
    accepted = "" if rate is None else f", {rate:.0%} of drafted tokens accepted"
    if high < 1 - NOISE:
        return ClassVerdict(workload, "wins", ratio, low, high,
                            f"{span}: faster by more than {NOISE:.0%}{accepted}")
    if low > 1 + NOISE:
        return ClassVerdict(workload, "loses", ratio, low, high,
                            f"{span}: slower by more than {NOISE:.0%}{accepted}")
    return ClassVerdict(workload, "no difference", ratio, low, high,
                        f"{span}: within ±{NOISE:.0%} or not told apart{accepted}")


def combined(workload: str, parts: Sequence[ClassFigures]) -> ClassFigures:
    """Several classes' figures of one config as one (a ``mixed`` workload's requests)."""
    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    return ClassFigures(
        workload=workload, requests=sum(p.requests for p in parts),
        ok=sum(p.ok for p in parts),
        tpot_s=tuple(t for p in parts for t in p.tpot_s),
        output_tokens_per_s=total([p.output_tokens_per_s for p in parts]),
        drafted_tokens=total([p.drafted_tokens for p in parts]),
        accepted_tokens=total([p.accepted_tokens for p in parts]))
