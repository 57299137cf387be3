"""Trends over a soak (``test_soak``): is memory climbing towards the container's limit, is
the preemption rate rising? Pure functions; docs/definitions.md, "Soak", states the rules.

**Memory.** A least-squares line through the container's anonymous memory over the soak,
its first ``warmup_fraction`` left out (allocators, caches and the first requests fill
memory once; that is not a leak). The alarm needs all of:

- the slope's lower 95 % bound is above zero (``slope − 2 × standard error``): noise
  around a flat line never trips it;
- memory rose by at least :data:`MIN_RISE_BYTES` or 0.1 % of the limit over the fitted
  stretch: a slope of a few bytes per second is not a trend worth a FAIL;
- the rise is steady, not slowing down: the slope over the last third of the fitted
  stretch is at least :data:`STEADY_RATIO` of the slope over its first third. A ramp that
  slows down is a warm-up (allocator caches, a server filling its pools: the real vLLM
  node grew 5.8 MiB/s, then 2.3 MiB/s, over a 30 s soak), which a soak of minutes cannot
  project a day ahead; a leak grows at the rate of its load;
- at the lower-bound slope, the line reaches the limit within ``horizon_s`` (default 24 h).

The projection (seconds to the limit) is reported at the fitted slope and at its lower bound.

A restart inside the soak (the process killed at its limit, or crashed, and started again)
frees its memory at once: the series falls by more than half (:data:`RESTART_DROP`) between
two samples. One line through both sides would read a leak that reached its limit as "not
rising", so the series is cut there and each stretch is judged on its own (its own warm-up
left out): the first stretch that reaches the limit decides, else the longest one.

**Preemptions.** A counter's increase over the soak's second half against its first,
decided by a test, not by the raw counts: under a steady rate each of the ``n`` events of
the soak falls in either half with probability ½, so the second half's count is
Binomial(n, ½). The rate is rising when all of:

- the second half counts at least :data:`MIN_RISING` and more than 1.5× the first (a rise
  worth a FAIL);
- a count at least that large would come from a steady rate with probability below
  :data:`RISING_ALPHA` (one-sided exact binomial test): a steady rate reads "rising" in at
  most 1 % of soaks. "0 in the first half, 3 in the second" has p = 0.125: not rising;
  0 and 7 (p = 0.008) is.

A steady rate is not "rising" (its cost shows in the TTFT objective instead).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slo.capture import counter_increase

#: the smallest rise over the fitted stretch that can count as a trend (bytes)
MIN_RISE_BYTES = 4 * 2**20
#: the smallest second-half increase of a preemption counter that can count as rising
MIN_RISING = 3.0
#: the chance a steady preemption rate may have of reading "rising" (one-sided)
RISING_ALPHA = 0.01
#: the part of the soak left out of the memory fit
WARMUP_FRACTION = 0.25
#: the last third's slope over the first third's at or above which a rise counts as steady
STEADY_RATIO = 0.5
#: a fall to below this fraction of the previous sample is a restart that cuts the series
RESTART_DROP = 0.5
DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class MemoryTrend:
    samples: int
    t_from: float | None
    t_to: float | None
    slope_bps: float | None  # bytes per second
    slope_low_bps: float | None  # lower 95 % bound
    rise_bytes: float | None  # the fitted line's rise over the stretch
    last_bytes: float | None  # the fitted line at t_to
    limit_bytes: int | None
    horizon_s: float
    seconds_to_limit: float | None  # at the fitted slope (None: not rising, or no limit)
    seconds_to_limit_low: float | None  # at the lower-bound slope
    reaches_limit: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def memory_trend(
    points: Sequence[tuple[float, float]],
    limit_bytes: int | None,
    *,
    horizon_s: float = DAY_S,
    warmup_fraction: float = WARMUP_FRACTION,
) -> MemoryTrend:
    """The trend of ``(t, bytes)`` points towards ``limit_bytes`` (module docstring): each
    stretch between restarts judged on its own, the first that reaches the limit deciding,
    else the longest."""
    stretches = _between_restarts(sorted(points))
    trends = [_stretch_trend(p, limit_bytes, horizon_s=horizon_s,
                             warmup_fraction=warmup_fraction) for p in stretches]
    chosen = next((t for t in trends if t.reaches_limit),
                  max(trends, key=lambda t: t.samples))
    if len(stretches) == 1:
        return chosen
    cut = (f"memory fell by over half {len(stretches) - 1} time(s) (a restart): "
           "stretches judged apart; ")
    return dataclasses.replace(chosen, why=cut + chosen.why)


def _between_restarts(points: Sequence[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """``points`` (sorted by time) cut where memory falls below :data:`RESTART_DROP` of the
    sample before it."""
    stretches: list[list[tuple[float, float]]] = [[]]
    for point in points:
        last = stretches[-1][-1] if stretches[-1] else None
        if last is not None and point[1] < RESTART_DROP * last[1]:
            stretches.append([])
        stretches[-1].append(point)
    return stretches


def _stretch_trend(
    points: Sequence[tuple[float, float]],
    limit_bytes: int | None,
    *,
    horizon_s: float,
    warmup_fraction: float,
) -> MemoryTrend:
    """The trend of one stretch without a restart."""
    if len(points) >= 2:
        t_cut = points[0][0] + (points[-1][0] - points[0][0]) * warmup_fraction
        points = [p for p in points if p[0] >= t_cut]
    if len(points) < 5:
        return MemoryTrend(len(points), None, None, None, None, None, None, limit_bytes,
                           horizon_s, None, None, False,
                           f"{len(points)} memory samples after the warm-up: too few to fit")
    n = len(points)
    t0 = points[0][0]
    xs = [t - t0 for t, _ in points]
    ys = [b for _, b in points]
    fitted = _fit(xs, ys)
    assert fitted is not None  # five or more points at distinct times
    slope, intercept, stderr = fitted
    low = slope - 2 * stderr
    last = intercept + slope * xs[-1]
    rise = slope * (xs[-1] - xs[0])
    to_limit = to_limit_low = None
    if limit_bytes:
        room = max(0.0, limit_bytes - last)
        to_limit = room / slope if slope > 0 else None
        to_limit_low = room / low if low > 0 else None
    min_rise = max(MIN_RISE_BYTES, 0.001 * limit_bytes) if limit_bytes else MIN_RISE_BYTES
    if not limit_bytes:
        reaches, why = False, "the container has no memory limit to reach"
    elif low <= 0:
        reaches, why = False, "memory is not rising (the slope's lower 95 % bound is ≤ 0)"
    elif rise < min_rise:
        reaches, why = False, (f"memory rose {rise / 2**20:.1f} MiB over the fit, under the "
                               f"{min_rise / 2**20:.1f} MiB that count as a trend")
    elif (thirds := _thirds_slopes(xs, ys)) is not None and thirds[1] < STEADY_RATIO * thirds[0]:
        reaches, why = False, (f"memory rose, slowing down ({thirds[0] / 2**10:.1f} KiB/s in "
                               f"the fit's first third, {thirds[1] / 2**10:.1f} KiB/s in its "
                               "last): a warm-up, not a steady leak")
    else:
        assert to_limit_low is not None
        reaches = to_limit_low <= horizon_s
        why = (f"memory rises {slope / 2**10:.1f} KiB/s (≥ {low / 2**10:.1f} KiB/s): the "
               f"limit in {_duration(to_limit_low)} at the lower bound, "
               + ("within" if reaches else "beyond") + f" the {_duration(horizon_s)} horizon")
    return MemoryTrend(n, points[0][0], points[-1][0], slope, low, rise, last, limit_bytes,
                       horizon_s, to_limit, to_limit_low, reaches, why)


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float, float] | None:
    """Least squares: (slope, intercept, the slope's standard error); None for fewer than
    two distinct times."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if not sxx:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    residual = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    stderr = math.sqrt(residual / (n - 2) / sxx) if n > 2 else math.inf
    return slope, intercept, stderr


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    fitted = _fit(xs, ys)
    return None if fitted is None else fitted[0]


def _thirds_slopes(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares slopes of the first and the last third (by time) of the points."""
    third = (xs[-1] - xs[0]) / 3
    first = [(x, y) for x, y in zip(xs, ys, strict=True) if x <= xs[0] + third]
    last = [(x, y) for x, y in zip(xs, ys, strict=True) if x >= xs[-1] - third]
    a = _slope([x for x, _ in first], [y for _, y in first])
    b = _slope([x for x, _ in last], [y for _, y in last])
    return None if a is None or b is None else (a, b)


@dataclass(frozen=True, slots=True)
class CounterTrend:
    first_half: float | None
    second_half: float | None
    rising: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def counter_trend(points: Sequence[tuple[float, float]], t_from: float, t_to: float
                  ) -> CounterTrend:
    """A counter's increase in ``[t_from, mid]`` against ``[mid, t_to]`` (resets counted
    as a restart from zero), from ``(t, value)`` samples."""
    mid = (t_from + t_to) / 2
    first = increase_within(points, t_from, mid)
    second = increase_within(points, mid, t_to)
    if first is None or second is None:
        return CounterTrend(first, second, False, "too few samples in one half of the soak")
    p = steady_chance(round(first), round(second))
    rising = second >= MIN_RISING and second > 1.5 * first and p < RISING_ALPHA
    why = (f"{first:g} in the first half, {second:g} in the second "
           f"(p = {p:.3g} under a steady rate): " + ("rising" if rising else "not rising"))
    return CounterTrend(first, second, rising, why)


def steady_chance(first: int, second: int) -> float:
    """The chance that a steady rate puts at least ``second`` of the ``first + second``
    events in the second of two equal halves: the one-sided exact binomial tail,
    P(X ≥ second) for X ~ Binomial(n, ½)."""
    n = first + second
    if n <= 0 or second <= 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(second, n + 1)) / (1 << n)


def increase_within(points: Sequence[tuple[float, float]], a: float, b: float
                    ) -> float | None:
    """A counter's increase over ``[a, b]`` from its ``(t, value)`` samples there, a reset
    counted as a restart from zero (:func:`slo.capture.counter_increase`); ``None`` with
    fewer than two samples inside."""
    inside = sorted(p for p in points if a <= p[0] <= b)
    return counter_increase(inside) if len(inside) >= 2 else None


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.0f} s"
