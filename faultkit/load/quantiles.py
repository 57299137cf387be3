"""Exact percentiles of a sample too large to hold, by radix selection over passes.

:func:`faultkit.load.stats.percentile` sorts the whole sample. A soak ledger's ITL sample
is ~30 values per request (3·10⁸ for 10 M requests), so :class:`StreamingDistribution`
finds the same order statistics without holding the sample. It sees the values in chunks,
once per *pass* over the ledger file:

1. Pass 1 counts the values, sums them, keeps min and max, and builds a histogram of the
   top 16 bits of each value's *order key* (the float's bits, mapped so that unsigned
   integer order is float order). While there are at most :data:`HOLD_MAX` values it
   also keeps them, and is then done after this pass.
2. The ranks the percentiles need (``lo`` and ``hi`` of each) fall in a few histogram
   bins. Each further pass keeps only the values in those bins: it gathers them when
   they are at most :data:`GATHER_MAX` in all (and selects the ranks from them: done), or
   else histograms their next 16 bits. After 4 such steps the key is fully known.

Typical ledgers need 2 or 3 passes; memory is at most ``GATHER_MAX`` values plus 0.5 MiB
per histogram, whatever the sample size. The result is *exactly* ``stats.distribution``'s
``count``, ``min``, ``max`` and percentiles (same ranks, same interpolation, same float
operations). ``mean`` is the sum of per-chunk numpy sums over the count: it can differ
from ``sum(sorted(values)) / n`` in the last bits (≤ 1e-12 relative for latencies).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from faultkit.load.stats import PERCENTILES, Distribution

__all__ = ["GATHER_MAX", "HOLD_MAX", "StreamingDistribution", "exact_percentiles", "interpolate"]

#: Pass 1 keeps the values while there are at most this many (16 MiB)...
HOLD_MAX = 1 << 21
#: ...and a later pass gathers the values of the wanted bins when they are at most this
#: many (64 MiB): the memory bound of one distribution.
GATHER_MAX = 1 << 23
_DIGIT = 16
_SIGN = np.uint64(1 << 63)
_LOW63 = np.uint64((1 << 63) - 1)

F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]


def order_keys(values: F64) -> U64:
    """uint64 keys whose unsigned order is the float order (no NaN in ``values``)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    negative = bits >> np.uint64(63)
    if not negative.any():
        return bits ^ _SIGN
    return bits ^ (negative * _LOW63 | _SIGN)


def _raw_to_key() -> npt.NDArray[np.intp]:
    """The top 16 bits of a float's order key, indexed by the top 16 bits of the float."""
    raw = np.arange(1 << _DIGIT, dtype=np.intp)
    return np.where(raw < 0x8000, raw ^ 0x8000, ~raw & 0xFFFF)


_RAW_TO_KEY = _raw_to_key()
_LITTLE = sys.byteorder == "little"


def _raw_top(values: F64) -> npt.NDArray[np.uint16]:
    """The top 16 bits (sign, exponent, 4 mantissa bits) of each float, as uint16."""
    if _LITTLE:  # a strided view of the high half-word: no shift, no copy
        top: npt.NDArray[np.uint16] = values.view(np.uint16)[3::4]
        return top
    return (values.view(np.uint64) >> np.uint64(48)).astype(np.uint16)


def key_value(key: int) -> float:
    """The float of one order key (the inverse of :func:`order_keys`)."""
    k = np.uint64(key)
    bits = k ^ _SIGN if k >= _SIGN else ~k
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def _ranks(n: int, qs: Sequence[float]) -> list[tuple[int, int, float]]:
    """``(lo, hi, frac)`` of each percentile, as ``stats.percentile`` computes them."""
    out = []
    for q in qs:
        pos = (n - 1) * q / 100.0
        lo = math.floor(pos)
        out.append((lo, min(lo + 1, n - 1), pos - lo))
    return out


def interpolate(ordered: dict[int, float], rank: tuple[int, int, float]) -> float:
    """``ordered[lo] + (ordered[hi] − ordered[lo]) × frac``: stats.percentile's formula."""
    lo, hi, frac = rank
    return ordered[lo] + (ordered[hi] - ordered[lo]) * frac


def exact_percentiles(values: F64, qs: Sequence[float]) -> list[float | None]:
    """``[stats.percentile(values, q) for q in qs]``, exactly, by partial partitioning."""
    n = len(values)
    if n == 0:
        return [None] * len(qs)
    ranks = _ranks(n, qs)
    kth = sorted({k for lo, hi, _ in ranks for k in (lo, hi)})
    part = np.partition(values, kth)
    ordered = {k: float(part[k]) for k in kth}
    return [interpolate(ordered, r) for r in ranks]


class StreamingDistribution:
    """``stats.distribution`` of values fed over several passes, in bounded memory.

    Protocol: ``while d.needs_pass: d.begin_pass(); feed every chunk; d.end_pass()``, then
    :meth:`result`. Every pass must feed the same values (in any order and chunking).
    """

    def __init__(self) -> None:
        self.qs = PERCENTILES
        self.count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._pass = 0
        self._done = False
        self._held: list[F64] | None = []  # pass 1: every value while few
        self._held_n = 0
        self._hist: npt.NDArray[np.int64] | None = None
        self._ordered: dict[int, float] = {}  # rank -> value, once known
        # ranges still being narrowed: key prefix (of _plen bits) -> (values below, count)
        self._ranges: dict[int, tuple[int, int]] = {}
        self._want: dict[int, int] = {}  # unresolved rank -> its range's prefix
        self._plen = 0
        self._gather = False
        self._gathered: list[U64] = []
        self._prefixes: U64 = np.zeros(0, dtype=np.uint64)  # active prefixes, sorted
        #: by the raw top 16 bits of a float: may it fall in an active range?
        self._top_raw = np.zeros(1 << _DIGIT, dtype=bool)

    @property
    def needs_pass(self) -> bool:
        return not self._done

    def begin_pass(self) -> None:
        self._pass += 1
        if self._pass > 1:
            total = sum(count for _, count in self._ranges.values())
            self._gather = total <= GATHER_MAX
            size = len(self._ranges) << _DIGIT
            self._hist = None if self._gather else np.zeros(size, dtype=np.int64)
            self._gathered = []
            order = sorted(self._ranges)
            self._prefixes = np.array(order, dtype=np.uint64)
            top = np.zeros(1 << _DIGIT, dtype=bool)
            top[[p >> (self._plen - _DIGIT) for p in order]] = True
            self._top_raw = top[_RAW_TO_KEY]
        else:
            self._hist = np.zeros(1 << _DIGIT, dtype=np.int64)

    def feed(self, values: F64) -> None:
        """One chunk of the sample (float64, no NaN)."""
        if len(values) == 0:
            return
        values = np.ascontiguousarray(values, dtype=np.float64)
        top = _raw_top(values)
        if self._pass == 1:
            self._feed_first(values, top)
            return
        # only the few values whose top 16 bits can hold a wanted rank get a full key
        keys = order_keys(values[self._top_raw[top]])
        prefix = keys >> np.uint64(64 - self._plen)
        where = np.searchsorted(self._prefixes, prefix)
        np.minimum(where, len(self._prefixes) - 1, out=where)
        hit = self._prefixes[where] == prefix
        keys, where = keys[hit], where[hit]
        if self._gather:
            self._gathered.append(keys)
        else:
            assert self._hist is not None
            digit = (keys >> np.uint64(64 - self._plen - _DIGIT)) & np.uint64(0xFFFF)
            index = (where.astype(np.intp) << _DIGIT) | digit.astype(np.intp)
            self._hist += np.bincount(index, minlength=len(self._hist))

    def _feed_first(self, values: F64, top: npt.NDArray[np.uint16]) -> None:
        self.count += len(values)
        self._sum += float(values.sum())
        self._min = min(self._min, float(values.min()))
        self._max = max(self._max, float(values.max()))
        assert self._hist is not None
        # histogram of the raw top bits, moved to key order: no per-value key needed
        self._hist[_RAW_TO_KEY] += np.bincount(top, minlength=1 << _DIGIT)
        if self._held is not None:
            self._held_n += len(values)
            if self._held_n <= HOLD_MAX:
                self._held.append(np.array(values, dtype=np.float64))
            else:
                self._held = None

    def end_pass(self) -> None:
        if self._pass == 1:
            self._end_first()
        elif self._gather:
            self._end_gather()
        else:
            self._end_histogram()

    def _end_first(self) -> None:
        n = self.count
        if n == 0:
            self._done = True
            return
        ranks = sorted({k for lo, hi, _ in _ranks(n, self.qs) for k in (lo, hi)})
        if self._held is not None:
            held = np.concatenate(self._held)
            part = np.partition(held, ranks)
            self._ordered = {k: float(part[k]) for k in ranks}
            self._held = None
            self._done = True
            return
        self._held = None
        assert self._hist is not None
        self._plen = 0
        self._ranges = {0: (0, n)}
        self._want = dict.fromkeys(ranks, 0)
        self._narrow(self._hist.reshape(1, -1))

    def _narrow(self, hist: npt.NDArray[np.int64]) -> None:
        """Move each wanted rank into the histogram bin (next 16 key bits) that holds it."""
        order = sorted(self._ranges)
        cums = np.cumsum(hist, axis=1)
        ranges: dict[int, tuple[int, int]] = {}
        want: dict[int, int] = {}
        for rank, prefix in self._want.items():
            i = order.index(prefix)
            below, _ = self._ranges[prefix]
            cum = cums[i]
            digit = int(np.searchsorted(cum, rank - below, side="right"))
            new_below = below + (int(cum[digit - 1]) if digit else 0)
            new_prefix = (prefix << _DIGIT) | digit
            ranges[new_prefix] = (new_below, int(hist[i, digit]))
            want[rank] = new_prefix
        self._plen += _DIGIT
        self._hist = None
        if self._plen == 64:  # every key bit known: the value itself
            self._ordered.update({rank: key_value(prefix) for rank, prefix in want.items()})
            self._done = True
            return
        self._ranges, self._want = ranges, want

    def _end_histogram(self) -> None:
        assert self._hist is not None
        self._narrow(self._hist.reshape(len(self._ranges), -1))

    def _end_gather(self) -> None:
        keys = np.concatenate(self._gathered) if self._gathered else np.zeros(0, np.uint64)
        self._gathered = []
        # the ranges are disjoint key intervals: in sorted order each one is a block
        start, offset = {}, 0
        for prefix in sorted(self._ranges):
            start[prefix] = offset
            offset += self._ranges[prefix][1]
        kth = {rank: start[p] + rank - self._ranges[p][0] for rank, p in self._want.items()}
        part = np.partition(keys, sorted(set(kth.values())))
        self._ordered.update({rank: key_value(int(part[k])) for rank, k in kth.items()})
        self._done = True

    def result(self) -> Distribution:
        """The distribution, as ``stats.distribution`` gives it (count 0: all None)."""
        if not self._done:
            raise RuntimeError("StreamingDistribution.result() before its last pass")
        n = self.count
        if n == 0:
            return Distribution(0)
        p = [interpolate(self._ordered, r) for r in _ranks(n, self.qs)]
        return Distribution(
            count=n,
            mean=self._sum / n,
            min=self._min,
            max=self._max,
            p50=p[0],
            p90=p[1],
            p95=p[2],
            p99=p[3],
            p999=p[4],
        )
