"""How sure a judged figure is: 95 % intervals from the evidence itself
(docs/definitions.md, "Uncertainty").

- a **percentile** of per-request values (a TTFT or E2E p95): the bootstrap — the
  percentile of :data:`RESAMPLES` resamples of the requests, with replacement, seeded so a
  re-render gives the same interval; the interval is their 2.5th to 97.5th percentile;
- a **ratio of two statistics** (a candidate's median TPOT over the current config's):
  the same bootstrap, each side resampled on its own;
- a **proportion** (an error ratio, k failed of n): the Wilson score interval, which stays
  inside [0, 1] and is honest at k = 0 (0 failures in 300 requests is not "0 % for sure");
- **borderline**: a figure whose interval holds its objective's limit — the evidence cannot
  tell whether it met it (:func:`straddles`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from faultkit.load.stats import percentile

__all__ = [
    "RESAMPLES",
    "Interval",
    "percentile_interval",
    "ratio_interval",
    "straddles",
    "wilson_interval",
]

#: bootstrap resamples per interval
RESAMPLES = 1000
#: the normal quantile of a two-sided 95 % interval
Z95 = 1.959964

Interval = tuple[float, float]


def _bounds(values: list[float]) -> Interval:
    values.sort()
    return values[int(0.025 * len(values))], values[max(int(0.975 * len(values)) - 1, 0)]


def percentile_interval(values: Sequence[float], q: float, *, resamples: int = RESAMPLES,
                        seed: int = 0) -> Interval | None:
    """The 95 % bootstrap interval of the ``q``-th percentile of ``values`` (``None``
    without values)."""
    if not values:
        return None
    rng = random.Random(seed)
    stats = [percentile(rng.choices(values, k=len(values)), q) for _ in range(resamples)]
    return _bounds([s for s in stats if s is not None])


def ratio_interval(numerator: Sequence[float], denominator: Sequence[float],
                   stat: Callable[[Sequence[float]], float], *, resamples: int = RESAMPLES,
                   seed: int = 0) -> tuple[float, float, float]:
    """``stat(numerator) / stat(denominator)`` and its 95 % bootstrap interval, each side
    resampled on its own."""
    rng = random.Random(seed)
    ratio = stat(numerator) / stat(denominator)
    ratios = [stat(rng.choices(numerator, k=len(numerator)))
              / stat(rng.choices(denominator, k=len(denominator))) for _ in range(resamples)]
    low, high = _bounds(ratios)
    return ratio, low, high


def wilson_interval(k: int, n: int) -> Interval | None:
    """The 95 % Wilson score interval of a proportion ``k / n`` (``None`` for ``n = 0``)."""
    if n <= 0:
        return None
    p, z2 = k / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def straddles(interval: Interval | None, limit: float) -> bool:
    """Whether ``interval`` holds ``limit``: the figure is borderline against it."""
    return interval is not None and interval[0] <= limit <= interval[1]
